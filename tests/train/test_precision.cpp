// The precision policies on the CPU (Bf16Mixed, Fp16Mixed: 16-bit weights, activations and
// gradients, fp32 master weights and moments): a training run follows the fp32 run within
// the bounds of 16-bit storage; fp16's dynamic loss scale grows every window, an overflow
// skips its step and lowers the scale after the hysteresis; and checkpoints cross between
// precisions in both directions without losing a bit of the master weights or moments.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <vector>

#include "../support/files.hpp"
#include "../support/plans.hpp"
#include "seqpar/io/safetensors.hpp"

using namespace seqpar;
using test::Small;

namespace {

// A 50-step run with a schedule (warmup, linear decay) over eight batches in turn.
TrainOptions run_options() {
  auto o = test::plan_options();
  o.schedule.warmup = 5;
  o.schedule.total = 50;
  return o;
}

template <class Prec>
std::vector<double> losses_of(int steps, const TrainOptions& o = run_options()) {
  Trainer<Small, Replicated<1>, Cpu, Prec> t(o);
  std::vector<double> out;
  for (int s = 0; s < steps; ++s) out.push_back(t.step(test::plan_batch(s % 8)).loss);
  return out;
}

// Every tensor of two safetensors files, bit for bit (the metadata aside).
void check_same_tensors(const std::filesystem::path& a, const std::filesystem::path& b) {
  const SafetensorsFile fa(a), fb(b);
  REQUIRE(fa.names() == fb.names());
  for (const auto& name : fa.names()) {
    CAPTURE(name);
    const TensorEntry &x = fa.at(name), &y = fb.at(name);
    CHECK(x.dtype == y.dtype);
    CHECK(x.shape == y.shape);
    REQUIRE(x.bytes.size() == y.bytes.size());
    CHECK(std::memcmp(x.bytes.data(), y.bytes.data(), x.bytes.size()) == 0);
  }
}

}  // namespace

TEST_CASE("50 training steps in bf16 and in fp16 follow the fp32 run within 1e-3") {
  // (the loss, a mean over every token, moves 12 % over the run; bf16 stays within 1e-4 of
  // it, fp16, with three more bits, closer)
  const auto fp32 = losses_of<Fp32>(50);
  CHECK(fp32.back() < 0.9 * fp32.front());
  auto fp16_options = run_options();
  fp16_options.loss_scale.initial_scale_power = 10;  // no overflow in these 50 steps
  for (const auto& [name, run] : {std::pair{"bf16", losses_of<Bf16Mixed>(50)},
                                  std::pair{"fp16", losses_of<Fp16Mixed>(50, fp16_options)}}) {
    CAPTURE(name);
    for (std::size_t s = 0; s < fp32.size(); ++s) {
      CAPTURE(s);
      CHECK(run[s] == doctest::Approx(fp32[s]).epsilon(1e-3));
    }
  }
}

TEST_CASE(
    "fp16's dynamic loss scale on the CPU: growth, overflow, skipped steps, retried batches") {
  // From 2^16 the scale doubles every 4 clean steps until the scaled gradients overflow
  // fp16 (at 2^20 here); with hysteresis 2 the first overflow keeps the scale, the second
  // halves it. A skipped step leaves the weights and the schedule as they were, so the
  // batch is tried again, and the taken steps follow fp32's.
  auto o = run_options();
  o.loss_scale.loss_scale_window = 4;
  Trainer<Small, Replicated<1>, Cpu, Fp16Mixed> h(o);
  Trainer<Small, Replicated<1>> f(o);
  int batch = 0, overflows = 0;
  double scale_before = h.loss_scale();
  for (int s = 0; s < 40 && batch < 30; ++s) {
    CAPTURE(s);
    const auto st = h.step(test::plan_batch(batch % 8));
    CHECK(st.nonfinite_in_a_row == 0);  // never a fault: every skip is the scaler's
    CHECK(st.loss_scale == scale_before);
    if (st.skipped) {
      CHECK(st.overflow);
      CHECK(std::isinf(st.grad_norm));
      ++overflows;
      // the first overflow of a run of them spends the hysteresis, the second halves
      CHECK(h.loss_scale() == (overflows % 2 == 1 ? st.loss_scale : st.loss_scale / 2));
    } else {
      CHECK(st.loss == doctest::Approx(f.step(test::plan_batch(batch % 8)).loss).epsilon(1e-3));
      ++batch;
    }
    scale_before = h.loss_scale();
  }
  CHECK(overflows >= 2);
  CHECK(h.step_guard().skipped_steps() == overflows);
  CHECK(h.steps_taken() == f.steps_taken());
  CHECK(h.loss_scale() > 65536);  // it grew past its start before (and after) overflowing
}

TEST_CASE("checkpoints cross between bf16 and fp32 in both directions without losing a bit") {
  const auto dir = test::temp_path("precision_ckpt");
  std::filesystem::create_directories(dir);
  const auto o = test::plan_options();
  const auto& ref = test::reference();

  SUBCASE("bf16 under ZeRO-3 over 2 ranks -> fp32 on one rank -> bf16 again") {
    // Two bf16 steps; the file holds their fp32 master weights and moments. fp32 resumes
    // from it (saved again at once: the same tensors) and goes on; bf16 resumed from fp32's
    // file after the third step gives the same bits as fp32's file there.
    run_ranks(2, [&](ThreadComm& comm) {
      Trainer<Small, Sharded<Zero3, 2>, Cpu, Bf16Mixed> t(comm, o);
      for (int s = 0; s < 2; ++s) t.step(test::plan_batch(s));
      t.save_checkpoint(dir / "bf16.safetensors", {{"data.position", "2"}});
    });
    Trainer<Small, Replicated<1>> f(o);
    CHECK(f.load_checkpoint(dir / "bf16.safetensors").at("data.position") == "2");
    f.save_checkpoint(dir / "fp32_again.safetensors");
    check_same_tensors(dir / "bf16.safetensors", dir / "fp32_again.safetensors");
    std::vector<double> losses;
    for (int s = 2; s < test::kPlanSteps; ++s) losses.push_back(f.step(test::plan_batch(s)).loss);
    for (std::size_t i = 0; i < losses.size(); ++i)
      CHECK(losses[i] == doctest::Approx(ref.losses[i + 2]).epsilon(1e-3));
    f.save_checkpoint(dir / "fp32.safetensors");
    Trainer<Small, Replicated<1>, Cpu, Bf16Mixed> b(o);
    b.load_checkpoint(dir / "fp32.safetensors");
    CHECK(b.steps_taken() == test::kPlanSteps);
    b.save_checkpoint(dir / "bf16_again.safetensors");
    check_same_tensors(dir / "fp32.safetensors", dir / "bf16_again.safetensors");
  }
  SUBCASE("a bf16 run resumed from its checkpoint is the run that never stopped, bit for bit") {
    Trainer<Small, Replicated<1>, Cpu, Bf16Mixed> whole(o), first(o), second(o);
    std::vector<double> a, b;
    for (int s = 0; s < test::kPlanSteps; ++s) a.push_back(whole.step(test::plan_batch(s)).loss);
    for (int s = 0; s < 2; ++s) b.push_back(first.step(test::plan_batch(s)).loss);
    first.save_checkpoint(dir / "half.safetensors");
    second.load_checkpoint(dir / "half.safetensors");
    for (int s = 2; s < test::kPlanSteps; ++s) b.push_back(second.step(test::plan_batch(s)).loss);
    CHECK(a == b);
    CHECK(test::all_weights(whole) == test::all_weights(second));
  }
  std::filesystem::remove_all(dir);
}

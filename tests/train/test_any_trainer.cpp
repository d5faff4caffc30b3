// AnyTrainer and make_trainer: a layout chosen at run time (plan/registry.hpp) trains as its
// plan type does. Each layout of a two-family set, over world sizes a static plan list would
// not have (3, 5, 6, 8), takes Replicated<1>'s losses and ends with its weights (the saved
// file, read back); what the program did not compile is refused by name.
#include <doctest/doctest.h>

#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "../support/files.hpp"
#include "../support/plans.hpp"
#include "seqpar/io/safetensors.hpp"
#include "seqpar/plan/registry.hpp"
#include "seqpar/train/any_trainer.hpp"
#include "seqpar/train/plan_trainers.hpp"

using namespace seqpar;
using test::Small;

namespace any_trainer_test {

// A global batch whose 60 rows every data degree below divides (1 to 6), with padding and
// ignored labels as the plan tests' batches.
Batch wide_batch(int step) { return test::plan_batch(step, 60, "any-trainer-batch"); }

constexpr int kSteps = 4;

TrainOptions options() {
  TrainOptions o = test::plan_options();
  o.micro_batch_rows = 5;  // 2 to 12 micro-batches a data rank
  return o;
}

// Replicated<1> on the wide batches: losses and whole weights (computed once).
const test::RunResult& reference() {
  static const test::RunResult r = [] {
    Trainer<Small, Replicated<1>> t(options());
    test::RunResult out;
    for (int s = 0; s < kSteps; ++s) out.losses.push_back(t.step(wide_batch(s)).loss);
    out.weights = test::weights_by_name(t);
    return out;
  }();
  return r;
}

// Tensor degrees 1 and 2 (both stack kinds), one or two stages, every ZeRO stage.
using TestPlans =
    PlanSet<PlanFamily<Degrees<1>, Degrees<1, 2>>, PlanFamily<Degrees<2>, Degrees<1, 2>>>;

AnyTrainer make(const PlanDesc& layout, AnyComm world, std::string_view precision = "fp32") {
  return make_trainer<Small, Cpu, Precisions<Fp32>, TestPlans>(layout, precision, world, options());
}

// The layout a name asks for over `world` ranks, resolved against TestPlans.
PlanDesc layout(const std::string& name, int world) {
  return resolve_plan({*parse_plan_name(name), "--plan " + name}, {world, ""}, Small::config,
                      TestPlans::layouts());
}

// Runs the layout over `world` ThreadComm ranks for kSteps steps; compares the losses
// and the saved weights with Replicated<1>'s, as the plan tests do (1e-5, 1e-4).
void check_layout(const std::string& name, int world, const PlanDesc& want) {
  const PlanDesc p = layout(name, world);
  CHECK(p == want);
  const auto& ref = reference();
  test::TempDir dir;
  std::mutex m;
  std::vector<double> losses;
  run_ranks(world, [&](ThreadComm& comm) {
    AnyTrainer t = make(p, AnyComm(comm));
    std::vector<double> mine;
    for (int s = 0; s < kSteps; ++s) mine.push_back(t.step(wide_batch(s)).loss);
    t.save_weights(dir / "w.safetensors");
    std::lock_guard lock(m);
    CHECK(t.facts().plan == p);
    CHECK(t.facts().precision == "fp32");
    CHECK(t.steps_taken() == kSteps);
    if (comm.rank() == 0) losses = mine;
  });
  INFO(name, " over ", world, " ranks");
  REQUIRE(losses.size() == ref.losses.size());
  for (std::size_t s = 0; s < losses.size(); ++s)
    CHECK(losses[s] == doctest::Approx(ref.losses[s]).epsilon(1e-5));
  const SafetensorsFile f(dir / "w.safetensors");
  for (const auto& [param, full] : ref.weights) {
    const TensorEntry* e = f.find("transformer." + param);
    REQUIRE(e != nullptr);
    std::vector<float> got(static_cast<std::size_t>(e->numel()));
    std::memcpy(got.data(), e->bytes.data(), got.size() * sizeof(float));
    const std::vector<float> want_w(full.begin(), full.begin() + e->numel());
    CHECK_MESSAGE(test::rel_norm_err(got, want_w) < 1e-4, param);
  }
}

TEST_CASE("a layout chosen at run time trains as Replicated<1>, over any world size") {
  check_layout("zero1", 3, {3, 1, 1, 1, false});
  check_layout("zero2", 5, {5, 1, 1, 2, false});
  check_layout("zero3", 6, {6, 1, 1, 3, false});
  check_layout("tp2dp", 6, {3, 2, 1, 0, false});
  check_layout("tp2pp2dp2", 8, {2, 2, 2, 0, false});
  check_layout("pp2gpipezero3", 4, {2, 1, 2, 3, true});
  check_layout("single", 1, {1, 1, 1, 0, false});
  check_layout("zero3", 1, {1, 1, 1, 3, false});  // one data rank: a shard is the whole
}

TEST_CASE("make_trainer refuses what the program did not compile, naming it") {
  run_ranks(1, [](ThreadComm& comm) {
    CHECK_THROWS_WITH_AS(make({1, 1, 1, 0, false}, AnyComm(comm), "bf16"),
                         "precision bf16 is not compiled for cpu in this program; it has fp32",
                         Error);
  });
  run_ranks(4, [](ThreadComm& comm) {
    CHECK_THROWS_WITH_AS(
        make({1, 4, 1, 0, false}, AnyComm(comm)),
        doctest::Contains("plan tp4 (TensorSplit<4>) is not compiled for cpu in fp32 in this "
                          "program; it has tensor degrees 1 and 2, pipeline degrees 1 and 2"),
        Error);
  });
}

TEST_CASE("AnyTrainer reports what it trains and the bytes its axes moved") {
  run_ranks(4, [](ThreadComm& comm) {
    AnyTrainer t = make(layout("tp2zero2", 4), AnyComm(comm));
    CHECK(t.facts().model.heads == Small::heads);
    CHECK(t.facts().parameter_count == Small::parameter_count);
    CHECK(t.facts().device == DeviceKind::cpu);
    CHECK(t.facts().plan.name() == "Hybrid<TensorSplit<2>,Sharded<Zero2,2>>");
    t.step(wide_batch(0));
    CHECK(t.data_stats().total_bytes_sent() > 0);
    CHECK(t.tensor_stats().total_bytes_sent() > 0);
    CHECK(t.pipeline_stats().total_bytes_sent() == 0);
  });
}

}  // namespace any_trainer_test

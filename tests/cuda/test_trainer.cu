// The Trainer on the GPU against the Trainer on the CPU: the same tiny model trained from
// the same seed on the same batches. Fp32 must agree to 1e-4 (losses, gradient norms,
// every weight, logits); bf16 and fp16 models (fp32 master weights) to 2e-2 in the loss.
// Fp16Mixed's loss scaling skips a step whose gradients overflow and recovers.
#include <doctest/doctest.h>

#include <unistd.h>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cuda_test_util.hpp"
#include "seqpar/backend/cuda/ops.hpp"
#include "seqpar/io/safetensors.hpp"
#include "seqpar/train/trainer.hpp"
#include "trainer_reference.hpp"

using namespace seqpar;
using namespace seqpar::test;

namespace {

constexpr int kSteps = 3;

// Loss-scaled fp16 whose first scale overflows the gradients (2^24 / ~50 targets is
// past fp16's 65504) and halves on every overflow, one that never overflows here, and one
// that grows fast.
TrainOptions huge_scale() {
  TrainOptions o = trainer_options();
  o.loss_scale.initial_scale_power = 24;
  o.loss_scale.hysteresis = 1;
  return o;
}
TrainOptions small_scale(TrainOptions o = trainer_options()) {
  o.loss_scale.initial_scale_power = 8;
  return o;
}
TrainOptions window2() {
  TrainOptions o = small_scale();
  o.loss_scale.loss_scale_window = 2;
  return o;
}

template <class TrainerT>
std::map<std::string, std::vector<float>> weights_of(TrainerT& t) {
  std::map<std::string, std::vector<float>> w;
  t.for_each_param([&](const ParamSpec& p, auto* v, auto*) {
    auto& out = w[p.name];
    out.resize(static_cast<std::size_t>(p.numel()));
    for (std::int64_t i = 0; i < p.numel(); ++i)
      out[static_cast<std::size_t>(i)] = static_cast<float>(v[i]);
  });
  return w;
}

template <class Prec>
TrainRun cuda_train_run(int steps, const TrainOptions& o = trainer_options()) {
  Trainer<TrainTiny, Replicated<1>, Cuda, Prec> t(o);
  TrainRun r;
  for (int s = 0; s < steps; ++s) {
    const auto st = t.step(trainer_batch(s));
    CHECK_FALSE(st.skipped);
    r.losses.push_back(st.loss);
    r.norms.push_back(st.grad_norm);
  }
  r.weights = weights_of(t);
  const auto logits = t.logits(trainer_batch(0));
  for (const auto& v : logits) r.logits.push_back(static_cast<float>(v));
  return r;
}

const TrainRun& cpu_reference() {
  static const TrainRun r = cpu_train_run(kSteps);
  return r;
}

double rel(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-30); }

// The LM head's logits whole (TrainTiny's 300 words fit the default budget), and in
// chunks of 128 words (a budget of one byte): the head's second pass then adds three
// chunks' products into dh (for 16-bit models in an fp32 sum the GEMM itself adds to).
TrainOptions with_logits_bytes(std::int64_t bytes) {
  auto o = trainer_options();
  o.logits_bytes = bytes;
  return o;
}

std::string temp_file(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("seqpar_cuda_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

}  // namespace

TEST_CASE("Trainer<Cuda, Fp32> trains as Trainer<Cpu, Fp32>: losses, norms, weights, logits") {
  const TrainRun& cpu = cpu_reference();
  for (const std::int64_t budget : {std::int64_t{0}, std::int64_t{1}}) {
    CAPTURE(budget);
    const TrainRun gpu = cuda_train_run<Fp32>(kSteps, with_logits_bytes(budget));
    REQUIRE(gpu.losses.size() == cpu.losses.size());
    for (int s = 0; s < kSteps; ++s) {
      CAPTURE(s);
      INFO("loss cpu ", cpu.losses[s], " cuda ", gpu.losses[s]);
      CHECK(std::isfinite(gpu.losses[s]));
      CHECK(rel(gpu.losses[s], cpu.losses[s]) < 1e-4);
      CHECK(rel(gpu.norms[s], cpu.norms[s]) < 1e-4);
    }
    CHECK(cpu.losses[0] > 5.0);  // about log(300) from the initialisation: the run is not trivial
    REQUIRE(gpu.weights.size() == cpu.weights.size());
    for (const auto& [name, w] : cpu.weights) {
      CAPTURE(name);
      REQUIRE(gpu.weights.count(name) == 1);
      const double err = rel_err(gpu.weights.at(name), w);
      INFO("rel err ", err);
      CHECK(err < 1e-4);
    }
    const double logit_err = rel_err(gpu.logits, cpu.logits);
    INFO("logits rel err ", logit_err);
    CHECK(logit_err < 1e-4);
  }
}

TEST_CASE("weights saved by a Cuda trainer load into a Cpu trainer and evaluate the same") {
  Trainer<TrainTiny, Replicated<1>, Cuda, Fp32> t(trainer_options());
  t.step(trainer_batch(0));
  const std::string path = temp_file("w.safetensors");
  t.save_weights(path);
  const double gpu = t.evaluate(trainer_batch(1));
  const double cpu = cpu_evaluate_file(path, 1);
  CHECK(rel(gpu, cpu) < 1e-5);
  // ...and back: a fresh Cuda trainer loading the file evaluates the same.
  TrainOptions o = trainer_options();
  o.seed = 2;
  Trainer<TrainTiny, Replicated<1>, Cuda, Fp32> u(o);
  CHECK(u.evaluate(trainer_batch(1)) != gpu);  // a different initialisation
  u.load_weights(path);
  CHECK(rel(u.evaluate(trainer_batch(1)), gpu) < 1e-6);
  std::filesystem::remove(path);
}

TEST_CASE("for_each_param writes reach the device") {
  Trainer<TrainTiny, Replicated<1>, Cuda, Fp32> t(trainer_options());
  const double before = t.evaluate(trainer_batch(0));
  t.for_each_param([](const ParamSpec& p, float* v, float*) {
    if (p.name == "ln_f.weight")
      for (std::int64_t i = 0; i < p.numel(); ++i) v[i] = 0.0f;
  });
  // ln_f.weight = 0: every logit is 0 (the LM head is tied, ln_f.bias is 0), the loss log(300).
  const double after = t.evaluate(trainer_batch(0));
  CHECK(after == doctest::Approx(std::log(300.0)).epsilon(1e-5));
  CHECK(before != doctest::Approx(after));
}

// Concatenated weights in name order (the norm of a difference over the whole model).
static std::vector<float> flat(const std::map<std::string, std::vector<float>>& w) {
  std::vector<float> out;
  for (const auto& [name, v] : w) out.insert(out.end(), v.begin(), v.end());
  return out;
}

TEST_CASE_TEMPLATE("Trainer<Cuda, 16-bit mixed> follows the Cpu losses within 2e-2", Prec,
                   Bf16Mixed, Fp16Mixed) {
  const TrainRun& cpu = cpu_reference();
  for (const std::int64_t budget : {std::int64_t{0}, std::int64_t{1}}) {
    CAPTURE(budget);
    // (Bf16Mixed does not scale: the scale's options are unused there.)
    const TrainRun gpu = cuda_train_run<Prec>(kSteps, small_scale(with_logits_bytes(budget)));
    for (int s = 0; s < kSteps; ++s) {
      CAPTURE(s);
      INFO("loss cpu ", cpu.losses[s], " cuda ", gpu.losses[s], "; norm cpu ", cpu.norms[s],
           " cuda ", gpu.norms[s]);
      CHECK(rel(gpu.losses[s], cpu.losses[s]) < 2e-2);
      CHECK(rel(gpu.norms[s], cpu.norms[s]) < 1e-1);
    }
    // The loss moved: three steps of training are seen by both.
    CHECK(std::abs(cpu.losses[2] - cpu.losses[0]) > 1e-3);
    // The weights took the same steps: AdamW moves an element by about lr a step whatever
    // its gradient's size, so the few elements whose tiny gradient has another sign in
    // 16 bits differ; the rest make the GPU's weights far closer to the CPU's than the
    // CPU's are to where both started.
    const auto start = flat(cpu.initial_weights), cpu_end = flat(cpu.weights),
               gpu_end = flat(gpu.weights);
    const double moved = rel_err(cpu_end, start), apart = rel_err(gpu_end, cpu_end);
    INFO("the CPU's weights moved ", moved, " (relative); the GPU's end ", apart, " from them");
    // Three steps at lr 2e-3, the first at lr 0 (the warmup's step 0): the CPU's weights move
    // 0.037 relative (measured).
    CHECK(moved > 0.02);
    CHECK(apart < 0.5 * moved);
  }
}

TEST_CASE("Bf16Mixed compute_gradients scales by 1 / targets rounded once, as step does") {
  // 257 targets: bf16 rounds 257 to 256, so a quotient taken in bf16 would be 1/256.
  Batch b = trainer_batch(0, 24);
  for (std::size_t i = b.labels.size(); i-- > 0 && b.view().target_count() > 257;)
    b.labels[i] = ignore_index;
  REQUIRE(b.view().target_count() == 257);
  auto o = trainer_options();
  o.schedule.peak = 0;  // the step leaves the weights (and its gradients) as they are
  o.max_grad_norm = 0;
  Trainer<TrainTiny, Replicated<1>, Cuda, Bf16Mixed> direct(o), stepped(o);
  direct.compute_gradients(b);
  stepped.step(b);
  const auto grads_of = [](auto& t) {
    std::map<std::string, std::vector<float>> g;
    t.for_each_param([&](const ParamSpec& p, auto*, auto* grad) {
      for (std::int64_t i = 0; i < p.numel(); ++i) g[p.name].push_back(static_cast<float>(grad[i]));
    });
    return g;
  };
  const auto a = grads_of(direct), s = grads_of(stepped);
  for (const auto& [name, g] : a) {
    CAPTURE(name);
    CHECK(g == s.at(name));
  }
}

TEST_CASE("Bf16Mixed with recomputed attention takes the same steps bit for bit, in less memory") {
  // The recomputed probabilities are the bits the forward made (same calls, same inputs).
  auto remade = trainer_options();
  remade.recompute = Recompute::selective;
  Trainer<TrainTiny, Replicated<1>, Cuda, Bf16Mixed> base(trainer_options()), other(remade);
  for (int s = 0; s < kSteps; ++s) {
    const auto a = base.step(trainer_batch(s)), b = other.step(trainer_batch(s));
    CHECK(b.loss == a.loss);
    CHECK(b.grad_norm == a.grad_norm);
    CHECK(b.memory.peak_of(Memory::activations) < a.memory.peak_of(Memory::activations));
  }
  CHECK(weights_of(other) == weights_of(base));
}

TEST_CASE(
    "fused attention on Cuda trains as the standard attention on the Cpu; Bf16Mixed in less "
    "memory") {
  auto fused = trainer_options();
  fused.attention = AttentionKind::fused;
  const TrainRun& cpu = cpu_reference();
  const TrainRun gpu = cuda_train_run<Fp32>(kSteps, fused);
  for (int s = 0; s < kSteps; ++s) {
    CAPTURE(s);
    CHECK(rel(gpu.losses[s], cpu.losses[s]) < 1e-4);
    CHECK(rel(gpu.norms[s], cpu.norms[s]) < 1e-4);
  }
  for (const auto& [name, w] : cpu.weights) {
    CAPTURE(name);
    CHECK(rel_err(gpu.weights.at(name), w) < 1e-4);
  }
  CHECK(rel_err(gpu.logits, cpu.logits) < 1e-4);
  // bf16: the records keep a float lse row per query instead of bf16 probabilities.
  Trainer<TrainTiny, Replicated<1>, Cuda, Bf16Mixed> base(trainer_options()), other(fused);
  for (int s = 0; s < kSteps; ++s) {
    const auto a = base.step(trainer_batch(s)), b = other.step(trainer_batch(s));
    CHECK(std::isfinite(b.loss));
    CHECK(rel(b.loss, a.loss) < 2e-2);
    CHECK(b.memory.peak_of(Memory::activations) < a.memory.peak_of(Memory::activations));
  }
}

TEST_CASE("Bf16Mixed keeps 16 bytes per parameter: 2 + 2 in the model, 12 in the optimizer") {
  Trainer<TrainTiny, Replicated<1>, Cuda, Bf16Mixed> t(trainer_options());
  static_assert(std::is_same_v<decltype(t)::T, __nv_bfloat16>);
  static_assert(std::is_same_v<decltype(t)::Master, float>);
  std::int64_t psi = 0;
  for (const auto& u : bloom_units<TrainTiny>()) psi += u.numel;
  const auto& m = t.memory();
  CHECK(m.current_of(Memory::parameters) == 2 * psi);
  CHECK(m.current_of(Memory::gradients) == 2 * psi);
  CHECK(m.current_of(Memory::optimizer) == 12 * psi);
}

TEST_CASE("Fp16Mixed: an overflowing loss scale skips steps, halving the scale, then trains") {
  Trainer<TrainTiny, Replicated<1>, Cuda, Fp16Mixed> t(huge_scale());
  const auto start = weights_of(t);
  auto st = t.step(trainer_batch(0));
  CHECK(st.skipped);
  CHECK(st.loss_scale == 0x1p24);
  CHECK_FALSE(std::isfinite(st.grad_norm));
  CHECK(std::isfinite(st.loss));
  CHECK(t.steps_taken() == 0);
  const auto after_skip = weights_of(t);
  for (const auto& [name, w] : start) {
    CAPTURE(name);
    CHECK(same_bits(after_skip.at(name), w));
  }
  double scale = st.loss_scale;
  int skipped = 1;
  for (int i = 0; i < 40 && st.skipped; ++i) {
    st = t.step(trainer_batch(0));
    CHECK(st.loss_scale == scale / 2);  // halved after every skipped step
    scale = st.loss_scale;
    skipped += st.skipped;
  }
  REQUIRE_FALSE(st.skipped);
  INFO(skipped, " steps skipped; training resumed at scale ", st.loss_scale);
  CHECK(skipped >= 3);  // 2^24, 2^23 and 2^22 over ~50 targets all overflow fp16
  CHECK(t.steps_taken() == 1);
  CHECK(std::isfinite(st.grad_norm));
  // The first step taken saw the initial weights: its loss and norm are the CPU's first.
  CHECK(rel(st.loss, cpu_reference().losses[0]) < 2e-2);
  CHECK(rel(st.grad_norm, cpu_reference().norms[0]) < 1e-1);
  // That step was the schedule's step 0, at lr 0 (the warmup): the weights move from the next.
  const auto next = t.step(trainer_batch(1));
  CHECK_FALSE(next.skipped);
  CHECK(next.loss_scale == st.loss_scale);
  CHECK(t.steps_taken() == 2);
  double moved = 0;
  for (const auto& [name, w] : weights_of(t)) moved = std::max(moved, rel_err(w, start.at(name)));
  CHECK(moved > 1e-4);
}

TEST_CASE("Fp16Mixed doubles the loss scale after a window of clean steps") {
  Trainer<TrainTiny, Replicated<1>, Cuda, Fp16Mixed> t(window2());
  std::vector<double> scales;
  for (int s = 0; s < 5; ++s) {
    const auto st = t.step(trainer_batch(s));
    CHECK_FALSE(st.skipped);
    scales.push_back(st.loss_scale);
  }
  CHECK(scales == std::vector<double>{256, 256, 256, 512, 512});
  // Fp32 and Bf16Mixed do not scale.
  Trainer<TrainTiny, Replicated<1>, Cuda, Bf16Mixed> b(trainer_options());
  CHECK(b.step(trainer_batch(0)).loss_scale == 1.0);
}

TEST_CASE("a checkpoint saved by a Cuda trainer resumes on the CPU") {
  Trainer<TrainTiny, Replicated<1>, Cuda, Fp32> t(trainer_options());
  t.step(trainer_batch(0));
  t.step(trainer_batch(1));
  const std::string path = temp_file("ckpt_fp32.safetensors");
  t.save_checkpoint(path, {{"data.position", "2"}});
  const StepStats gpu = t.step(trainer_batch(2));
  const StepStats cpu = cpu_resume_step(path, 2);
  std::filesystem::remove(path);
  CHECK(cpu.step == 3);
  CHECK(gpu.step == 3);
  CHECK(rel(gpu.loss, cpu.loss) < 1e-5);
  CHECK(rel(gpu.grad_norm, cpu.grad_norm) < 1e-4);
  CHECK(rel(gpu.lr, cpu.lr) < 1e-12);  // the schedule resumed at the saved step
}

TEST_CASE_TEMPLATE(
    "a CPU checkpoint resumes on Cuda, and Cuda's on the CPU, as the run that "
    "did not stop",
    Prec, Fp32, Bf16Mixed) {
  const std::string from_cpu = temp_file("ckpt_from_cpu.safetensors");
  const std::string from_gpu = temp_file("ckpt_from_gpu.safetensors");
  // The CPU's uninterrupted steps 1-4, a checkpoint written after two of them.
  const std::vector<StepStats> straight = cpu_steps_saving(from_cpu, 4, 2);
  TrainOptions o = trainer_options();
  o.seed = 1;  // the weights come from the checkpoint
  Trainer<TrainTiny, Replicated<1>, Cuda, Prec> gpu(o);
  gpu.load_checkpoint(from_cpu);
  const StepStats third = gpu.step(trainer_batch(2));
  gpu.save_checkpoint(from_gpu);
  const StepStats fourth = cpu_resume_step(from_gpu, 3);
  std::filesystem::remove(from_cpu);
  std::filesystem::remove(from_gpu);
  CHECK(third.step == 3);
  CHECK(fourth.step == 4);
  CHECK(rel(third.lr, straight[2].lr) < 1e-12);  // the schedule resumed at the saved step
  CHECK(rel(fourth.lr, straight[3].lr) < 1e-12);
  // Fp32 follows the CPU to fp32's rounding; Bf16Mixed computes in bf16 for one step (its
  // fp32 master weights and moments travel unrounded both ways).
  const double tol = std::is_same_v<Prec, Fp32> ? 1e-5 : 2e-2;
  CHECK(rel(third.loss, straight[2].loss) < tol);
  CHECK(rel(third.grad_norm, straight[2].grad_norm) < 10 * tol);
  CHECK(rel(fourth.loss, straight[3].loss) < tol);
  CHECK(rel(fourth.grad_norm, straight[3].grad_norm) < 10 * tol);
}

TEST_CASE("a Bf16Mixed checkpoint holds the fp32 master weights and resumes bit for bit") {
  Trainer<TrainTiny, Replicated<1>, Cuda, Bf16Mixed> straight(trainer_options());
  for (int s = 0; s < 2; ++s) straight.step(trainer_batch(s));
  const std::string path = temp_file("ckpt_bf16.safetensors");
  straight.save_checkpoint(path);
  const StepStats want = straight.step(trainer_batch(2));
  const auto want_weights = weights_of(straight);

  TrainOptions o = trainer_options();
  o.seed = 5;  // overwritten by the load
  Trainer<TrainTiny, Replicated<1>, Cuda, Bf16Mixed> resumed(o);
  resumed.load_checkpoint(path);
  // The file's weights are F32 and not all of them are bf16 values: master weights.
  const SafetensorsFile f(path);
  const auto* e = f.find("transformer.h.0.mlp.dense_4h_to_h.weight");
  REQUIRE(e != nullptr);
  CHECK(e->dtype == DType::f32);
  std::vector<float> w(static_cast<std::size_t>(e->numel()));
  std::memcpy(w.data(), e->bytes.data(), w.size() * sizeof(float));
  std::int64_t finer = 0;
  for (const float x : w) finer += bf16_to_float(float_to_bf16(x)) != x;
  CHECK(finer > 1000);
  std::filesystem::remove(path);

  const StepStats got = resumed.step(trainer_batch(2));
  CHECK(got.step == want.step);
  CHECK(got.loss == want.loss);
  CHECK(got.grad_norm == want.grad_norm);
  for (const auto& [name, v] : weights_of(resumed)) {
    CAPTURE(name);
    CHECK(same_bits(v, want_weights.at(name)));
  }
}

TEST_CASE("an Fp16Mixed checkpoint resumes the loss scale") {
  Trainer<TrainTiny, Replicated<1>, Cuda, Fp16Mixed> t(huge_scale());
  CHECK(t.step(trainer_batch(0)).skipped);
  CHECK(t.step(trainer_batch(0)).skipped);  // the scale is now 2^22
  const std::string path = temp_file("ckpt_fp16.safetensors");
  t.save_checkpoint(path);
  Trainer<TrainTiny, Replicated<1>, Cuda, Fp16Mixed> resumed(huge_scale());
  const auto meta = resumed.load_checkpoint(path);
  std::filesystem::remove(path);
  CHECK(meta.at("seqpar.loss_scale") == "4194304");
  CHECK(meta.at("seqpar.loss_scale_clean_steps") == "0");
  CHECK(resumed.step(trainer_batch(0)).loss_scale == 0x1p22);
  CHECK(t.step(trainer_batch(0)).loss_scale == 0x1p22);
}

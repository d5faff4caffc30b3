// Parity with Hugging Face transformers' BloomForCausalLM (fp32, eager attention) on
// the golden files of tests/golden: logits, loss, every gradient, and three AdamW steps
// with warmup and clipping. Tolerances are relative L2 errors over whole tensors.
#include <doctest/doctest.h>

#include <string>

#include "../support/golden.hpp"
#include "seqpar/backend/cpu/ops.hpp"
#include "seqpar/train/trainer.hpp"

using namespace seqpar;
using test::floats;
using test::rel_norm_err;

namespace {
using H16 = Bloom<BloomConfig{
    .vocab_size = 250, .hidden = 64, .layers = 2, .heads = 16, .layer_norm_eps = 1e-5}>;
using H12 = Bloom<BloomConfig{
    .vocab_size = 300, .hidden = 96, .layers = 3, .heads = 12, .layer_norm_eps = 1e-5}>;

constexpr double kForwardTol = 1e-5;  // logits and loss
constexpr double kGradTol = 1e-4;     // gradients: a longer chain of fp32 sums
constexpr double kTrainTol = 1e-4;    // parameters after three AdamW steps

TensorLookup golden_lookup(const SafetensorsFile& f, const std::string& prefix) {
  return [&f, prefix](std::string_view name) { return f.find(prefix + std::string(name)); };
}

// `attention`: the standard ops or the fused ones compute the same function.
template <class M>
void check_golden(const std::string& file, AttentionKind attention = AttentionKind::standard) {
  TrainOptions base;
  base.attention = attention;
  const SafetensorsFile f(test::golden_path(file));
  const Batch batch = test::golden_batch(f);
  const auto meta = [&](const char* k) { return std::stod(f.metadata().at(k)); };
  REQUIRE(meta("vocab_size") == M::vocab_size);
  REQUIRE(meta("n_head") == M::heads);

  SUBCASE("logits and loss") {
    Trainer<M, Replicated<1>> t(base);
    t.load_weights(golden_lookup(f, "param."), file);
    const auto logits = t.logits(batch);
    CHECK(rel_norm_err(logits, floats(f, "logits")) < kForwardTol);
    const double loss = t.evaluate(batch);
    CHECK(loss == doctest::Approx(floats(f, "loss")[0]).epsilon(kForwardTol));
  }
  SUBCASE("every parameter gradient") {
    Trainer<M, Replicated<1>> t(base);
    t.load_weights(golden_lookup(f, "param."), file);
    t.compute_gradients(batch);
    int n = 0;
    t.for_each_param([&](const ParamSpec& p, float*, float* g) {
      CAPTURE(p.name);
      const auto ref = floats(f, "grad.transformer." + p.name);
      CHECK(rel_norm_err(std::span<const float>(g, ref.size()), ref) < kGradTol);
      ++n;
    });
    CHECK(n == 3 + 12 * M::layers + 2);
  }
  SUBCASE("three AdamW steps with warmup, decay and clipping") {
    TrainOptions o = base;
    o.schedule.peak = meta("lr");
    o.beta1 = meta("beta1");
    o.beta2 = meta("beta2");
    o.eps = meta("eps");
    o.weight_decay = meta("weight_decay");
    o.schedule.warmup = static_cast<std::int64_t>(meta("warmup_steps"));
    o.schedule.total = static_cast<std::int64_t>(meta("total_steps"));
    o.max_grad_norm = meta("max_grad_norm");
    Trainer<M, Replicated<1>> t(o);
    t.load_weights(golden_lookup(f, "param."), file);
    const auto losses = floats(f, "train.loss"), norms = floats(f, "train.grad_norm"),
               lrs = floats(f, "train.lr");
    for (int s = 0; s < 3; ++s) {
      CAPTURE(s);
      const auto st = t.step(batch);
      CHECK(st.loss == doctest::Approx(losses[s]).epsilon(kTrainTol));
      CHECK(st.grad_norm == doctest::Approx(norms[s]).epsilon(kTrainTol));
      CHECK(st.lr == doctest::Approx(lrs[s]).epsilon(1e-6));
    }
    t.for_each_param([&](const ParamSpec& p, float* v, float*) {
      CAPTURE(p.name);
      const auto ref = floats(f, "step3.transformer." + p.name);
      CHECK(rel_norm_err(std::span<const float>(v, ref.size()), ref) < kTrainTol);
    });
  }
}
}  // namespace

TEST_CASE("golden: 16 heads, 2 layers matches transformers") {
  check_golden<H16>("bloom_h16.safetensors");
}
TEST_CASE("golden: 12 heads (not a power of two), 3 layers matches transformers") {
  check_golden<H12>("bloom_h12.safetensors");
}
TEST_CASE("golden: 16 heads with fused attention matches transformers") {
  check_golden<H16>("bloom_h16.safetensors", AttentionKind::fused);
}
TEST_CASE("golden: 12 heads with fused attention matches transformers") {
  check_golden<H12>("bloom_h12.safetensors", AttentionKind::fused);
}

// TrainOptions::attention = AttentionKind::fused against the standard attention: the same
// training (losses, gradient norms, weights) on one rank and on tensor-split plans over
// ThreadComm, and the activation records smaller by exactly the probabilities less the
// log-sum-exp rows.
#include <doctest/doctest.h>

#include "../support/plans.hpp"
#include "../support/weights.hpp"

using namespace seqpar;

namespace {
using Tiny = Bloom<BloomConfig{.vocab_size = 100, .hidden = 32, .layers = 2, .heads = 4}>;

// 4 rows of 70 tokens (past a 64-key and two 32-query tiles): row 1 left-padded by 3,
// row 2 by 40, row 3 entirely padding (its queries attend uniformly, none has a target).
Batch padded_batch(std::uint64_t seed) {
  constexpr std::int64_t rows = 4, seq = 70;
  Batch b(rows, seq);
  const CounterRng rng(seed, "fused batch");
  const std::int64_t padding[rows] = {0, 3, 40, seq};
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t t = 0; t < seq; ++t) {
      const auto i = static_cast<std::size_t>(r * seq + t);
      const bool pad = t < padding[r];
      b.input_ids[i] = pad ? 3 : static_cast<std::int32_t>(4 + rng.bits(i) % 90);
      b.attention_mask[i] = pad ? 0 : 1;
      b.labels[i] = pad ? ignore_index : b.input_ids[i];
    }
  return b;
}

}  // namespace

TEST_CASE(
    "fused attention trains as the standard one; a record keeps lse rows instead of "
    "probabilities") {
  TrainOptions standard, fused;
  standard.schedule.peak = fused.schedule.peak = 1e-3;
  fused.attention = AttentionKind::fused;
  Trainer<Tiny, Replicated<1>> t1(standard), t2(fused);
  const Batch b = padded_batch(1);
  const std::int64_t B = b.rows, S = b.seq, f32 = sizeof(float);
  const std::int64_t probs_bytes = B * Tiny::heads * S * S * f32,
                     lse_bytes = B * Tiny::heads * S * f32;
  for (int step = 0; step < 4; ++step) {
    CAPTURE(step);
    const StepStats s1 = t1.step(b), s2 = t2.step(b);
    // fp32 sums in another order: the tile loops against the GEMMs of the standard ops.
    CHECK(s2.loss == doctest::Approx(s1.loss).epsilon(1e-6));
    CHECK(s2.grad_norm == doctest::Approx(s1.grad_norm).epsilon(1e-5));
    // Every block's record: [B, nh, S, S] probabilities less [B, nh, S] lse, exactly.
    CHECK(s1.memory.peak_of(Memory::activations) - s2.memory.peak_of(Memory::activations) ==
          Tiny::layers * (probs_bytes - lse_bytes));
    // The backward's scratch: d scores [B, nh, S, S] less the delta rows [B, nh, S].
    CHECK(t1.memory().current_of(Memory::buffers) - t2.memory().current_of(Memory::buffers) ==
          probs_bytes - lse_bytes);
  }
  CHECK(test::rel_norm_err(test::all_weights(t2), test::all_weights(t1)) < 1e-5);
  // Evaluation and logits take the fused forward too.
  CHECK(t2.evaluate(padded_batch(2)) ==
        doctest::Approx(t1.evaluate(padded_batch(2))).epsilon(1e-6));
  CHECK(test::rel_norm_err(t2.logits(b), t1.logits(b)) < 1e-5);
}

TEST_CASE_TEMPLATE_DEFINE(
    "fused attention on tensor-split plans equals the standard one (ThreadComm)", Plan,
    fused_plans) {
  // Each tensor rank holds a share of the heads: its ALiBi slopes start at head0.
  constexpr int n = PlanTraits<Plan>::world_size;
  auto o = test::plan_options();
  const auto standard = test::run_plan_threads<Plan>(n, 3, o);
  o.attention = AttentionKind::fused;
  const auto fused = test::run_plan_threads<Plan>(n, 3, o);
  for (std::size_t r = 0; r < fused.size(); ++r) {
    CAPTURE(r);
    for (std::size_t s = 0; s < 3; ++s) {
      CHECK(fused[r].losses[s] == doctest::Approx(standard[r].losses[s]).epsilon(1e-6));
      CHECK(fused[r].norms[s] == doctest::Approx(standard[r].norms[s]).epsilon(1e-5));
      CHECK(fused[r].evals[s] == doctest::Approx(standard[r].evals[s]).epsilon(1e-6));
    }
    CHECK(test::rel_norm_err(fused[r].logits, standard[r].logits) < 1e-5);
    // Per tensor, as check_equivalent: AdamW's m / sqrt(v) turns rounding noise into full
    // steps where a gradient is zero in exact arithmetic (the key bias: softmax ignores a
    // per-row constant), so small tensors move by 1e-5 of their norm either way.
    for (const auto& [name, w] : standard[r].weights) {
      CAPTURE(name);
      CHECK(test::rel_norm_err(fused[r].weights.at(name), w) < 1e-4);
    }
  }
}
TEST_CASE_TEMPLATE_INVOKE(fused_plans, TP2, Hybrid<TP2, PP2>);

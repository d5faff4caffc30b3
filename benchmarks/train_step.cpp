// One training step (forward, backward, clipping, AdamW) of a small BLOOM on the CPU:
// hidden 256, 4 layers, 8 heads, vocab 8192, 8 x 128 tokens (and 2 x 512, where attention
// weighs more). tools/compare_cpu_step.py runs this and the same step in PyTorch side by side.
#include <benchmark/benchmark.h>

#include "seqpar/backend/cpu/ops.hpp"
#include "seqpar/core/rng.hpp"
#include "seqpar/train/trainer.hpp"

namespace {
using Small =
    seqpar::Bloom<seqpar::BloomConfig{.vocab_size = 8192, .hidden = 256, .layers = 4, .heads = 8}>;

void train_step(benchmark::State& state, seqpar::Recompute recompute,
                seqpar::AttentionKind attention = seqpar::AttentionKind::standard) {
  const std::int64_t rows = state.range(0), seq = state.range(1);
  seqpar::TrainOptions o;
  o.schedule.peak = 1e-4;
  o.weight_decay = 0.01;
  o.recompute = recompute;
  o.attention = attention;
  seqpar::Trainer<Small, seqpar::Replicated<1>> trainer(o);
  seqpar::Batch batch(rows, seq);
  const seqpar::CounterRng rng(1, "bench");
  for (std::size_t i = 0; i < batch.input_ids.size(); ++i) {
    batch.input_ids[i] = static_cast<std::int32_t>(rng.bits(i) % Small::vocab_size);
    batch.labels[i] = batch.input_ids[i];
  }
  trainer.step(batch);  // warm up: first-touch allocations
  double loss = 0;
  for (auto _ : state) loss = trainer.step(batch).loss;
  const double tokens = static_cast<double>(rows * seq);
  const double flops_per_token =
      6.0 * Small::parameter_count + 12.0 * Small::layers * Small::hidden * seq;
  state.counters["tokens_per_s"] =
      benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["gflops"] = benchmark::Counter(tokens * flops_per_token * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.counters["loss"] = loss;
  state.counters["peak_mib"] = static_cast<double>(trainer.memory().total_peak) / (1 << 20);
}

void BM_TrainStep(benchmark::State& state) { train_step(state, seqpar::Recompute::none); }
// TrainOptions::recompute = selective: the same step, the attention probabilities recomputed in
// the backward instead of kept (peak_mib shows what that saves).
void BM_TrainStepRecomputedAttention(benchmark::State& state) {
  train_step(state, seqpar::Recompute::selective);
}
// TrainOptions::attention = fused: flash-style tiles, a log-sum-exp per query kept instead of
// the probabilities (peak_mib again).
void BM_TrainStepFusedAttention(benchmark::State& state) {
  train_step(state, seqpar::Recompute::none, seqpar::AttentionKind::fused);
}
// The standard step at 2 x 512 (a separate name: tools/compare_cpu_step.py reads BM_TrainStep).
void BM_TrainStepSeq512(benchmark::State& state) { train_step(state, seqpar::Recompute::none); }
BENCHMARK(BM_TrainStep)->Args({8, 128})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3.0);
BENCHMARK(BM_TrainStepRecomputedAttention)
    ->Args({8, 128})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(3.0);
BENCHMARK(BM_TrainStepSeq512)
    ->Args({2, 512})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(3.0);
BENCHMARK(BM_TrainStepFusedAttention)
    ->Args({8, 128})
    ->Args({2, 512})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(3.0);
}  // namespace

BENCHMARK_MAIN();

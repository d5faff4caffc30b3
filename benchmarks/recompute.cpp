// What activation recomputation costs and saves (TrainOptions::recompute): one training
// step of a small BLOOM on the CPU (hidden 256, 8 layers, 8 heads, vocab 8192; 8 x 256
// tokens in micro-batches of 4 rows) per mode. Counters: the arena's activations peak
// (act_peak_mib), its whole peak (peak_mib) and the step time; the losses are the same
// bits in every mode (tests/train/test_recompute.cpp checks that).
#include <benchmark/benchmark.h>

#include "seqpar/backend/cpu/ops.hpp"
#include "seqpar/core/rng.hpp"
#include "seqpar/train/trainer.hpp"

namespace {
using Model =
    seqpar::Bloom<seqpar::BloomConfig{.vocab_size = 8192, .hidden = 256, .layers = 8, .heads = 8}>;

void recompute_step(benchmark::State& state, seqpar::Recompute mode, std::int64_t every = 1) {
  const std::int64_t rows = 8, seq = state.range(0);
  seqpar::TrainOptions o;
  o.schedule.peak = 1e-4;
  o.micro_batch_rows = 4;
  o.recompute = mode;
  o.recompute_every = every;
  seqpar::Trainer<Model, seqpar::Replicated<1>> trainer(o);
  seqpar::Batch batch(rows, seq);
  const seqpar::CounterRng rng(1, "bench");
  for (std::size_t i = 0; i < batch.input_ids.size(); ++i) {
    batch.input_ids[i] = static_cast<std::int32_t>(rng.bits(i) % Model::vocab_size);
    batch.labels[i] = batch.input_ids[i];
  }
  seqpar::StepStats st = trainer.step(batch);  // warm up: first-touch allocations
  for (auto _ : state) st = trainer.step(batch);
  state.counters["tokens_per_s"] = benchmark::Counter(
      static_cast<double>(rows * seq), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["act_peak_mib"] =
      static_cast<double>(st.memory.peak_of(seqpar::Memory::activations)) / (1 << 20);
  state.counters["peak_mib"] = static_cast<double>(st.memory.total_peak) / (1 << 20);
  state.counters["loss"] = st.loss;
}

void BM_RecomputeNone(benchmark::State& s) { recompute_step(s, seqpar::Recompute::none); }
void BM_RecomputeSelective(benchmark::State& s) { recompute_step(s, seqpar::Recompute::selective); }
void BM_RecomputeFull(benchmark::State& s) { recompute_step(s, seqpar::Recompute::full); }
// Megatron's --recompute-method block: every 2nd block recomputed, the others kept whole.
void BM_RecomputeFullEvery2(benchmark::State& s) { recompute_step(s, seqpar::Recompute::full, 2); }
#define SEQPAR_RECOMPUTE_BENCH(fn) \
  BENCHMARK(fn)->Arg(256)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0)
SEQPAR_RECOMPUTE_BENCH(BM_RecomputeNone);
SEQPAR_RECOMPUTE_BENCH(BM_RecomputeSelective);
SEQPAR_RECOMPUTE_BENCH(BM_RecomputeFull);
SEQPAR_RECOMPUTE_BENCH(BM_RecomputeFullEvery2);
}  // namespace

#pragma once
// The trainer-level comparison of test_trainer.cu: one tiny model, one batch sequence and
// one set of options for both devices, and the CPU runs (trainer_reference.cpp, compiled
// by the host compiler so that Eigen never goes through nvcc).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "seqpar/config/bloom.hpp"
#include "seqpar/core/batch.hpp"
#include "seqpar/core/rng.hpp"
#include "seqpar/nn/generate.hpp"
#include "seqpar/train/trainer.hpp"

namespace seqpar::test {

/// 300 tokens (padded to 384), 2 layers of 64 with 4 heads.
using TrainTiny = Bloom<BloomConfig{.vocab_size = 300, .hidden = 64, .layers = 2, .heads = 4}>;

/// Global batch `step`: `rows` rows of 16 random tokens (never all one id), left padding
/// on the odd rows (r % 8 tokens) and some ignored labels.
inline Batch trainer_batch(int step, std::int64_t rows = 4) {
  Batch b(rows, 16);
  const CounterRng rng(static_cast<std::uint64_t>(step) + 100, "cuda-trainer-batch");
  for (std::size_t i = 0; i < b.input_ids.size(); ++i) {
    b.input_ids[i] = static_cast<std::int32_t>(4 + rng.bits(i) % 296);
    b.labels[i] = rng.bits(i, 1) % 9 == 0 ? ignore_index : b.input_ids[i];
  }
  for (std::int64_t r = 1; r < rows; r += 2)
    for (std::int64_t t = 0; t < r % 8; ++t) {
      const auto i = static_cast<std::size_t>(r * 16 + t);
      b.attention_mask[i] = 0;
      b.labels[i] = ignore_index;
      b.input_ids[i] = 3;
    }
  return b;
}

/// Two micro-batches of two rows, clipping active, weight decay on.
inline TrainOptions trainer_options() {
  TrainOptions o;
  o.schedule.peak = 2e-3;
  o.weight_decay = 0.01;
  o.schedule.warmup = 1;
  o.schedule.total = 10;
  o.max_grad_norm = 0.5;
  o.micro_batch_rows = 2;
  o.seed = 17;
  return o;
}

/// What a run leaves: per-step loss and gradient norm, the initial and final weights by
/// name (the CPU run), and the logits [tokens, vocab] of batch 0 after the last step.
struct TrainRun {
  std::vector<double> losses, norms;
  std::map<std::string, std::vector<float>> initial_weights, weights;
  std::vector<float> logits;
};

/// The model the generation tests decode with: trainer_options() with spread-out weights
/// (no near-ties between the best two logits).
inline TrainOptions generation_options() {
  TrainOptions o = trainer_options();
  o.init_std = 0.4;
  return o;
}

/// Rows of 12, 7 and 9 tokens left-padded to 12; prompts are their first `prompt` columns.
inline Batch generation_batch(std::int64_t prompt = 12) {
  constexpr std::int64_t rows = 3, seq = 12;
  const std::int64_t lengths[rows] = {12, 7, 9};
  Batch b(rows, prompt);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t k = 0; k < prompt; ++k) {
      const auto i = static_cast<std::size_t>(r * prompt + k);
      const bool ok = k >= seq - lengths[r];
      b.attention_mask[i] = ok;
      b.input_ids[i] = ok ? static_cast<std::int32_t>(4 + (r * 53 + k * 29) % 296) : 3;
    }
  return b;
}

/// Greedy tokens (no eos) of Trainer<TrainTiny, Replicated<1>, Cpu> under
/// generation_options() for the prompts generation_batch(prompt).
std::vector<std::vector<std::int32_t>> cpu_greedy_tokens(std::int64_t prompt, std::int64_t max_new);

/// Beam search (eos id 60, so that some hypotheses end early) of the same model and prompts
/// with `beams` beams and the repetition penalty.
Generated cpu_beam_search(std::int64_t prompt, std::int64_t max_new, std::int64_t beams,
                          double penalty);

/// `steps` steps of Trainer<TrainTiny, Replicated<1>, Cpu, Fp32> on trainer_batch(0, 1, ...).
TrainRun cpu_train_run(int steps);

/// The loss of trainer_batch(step) under the weights of a safetensors file, on the CPU.
double cpu_evaluate_file(const std::string& path, int step);

/// A Cpu trainer restored from a training checkpoint, then one step on trainer_batch(step).
StepStats cpu_resume_step(const std::string& checkpoint, int step);

/// `steps` steps of the Cpu trainer on trainer_batch(0, 1, ...), a training checkpoint saved
/// to `checkpoint` after the first `save_after` of them: the stats of every step.
std::vector<StepStats> cpu_steps_saving(const std::string& checkpoint, int steps, int save_after);

}  // namespace seqpar::test

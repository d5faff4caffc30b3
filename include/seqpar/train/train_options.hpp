#pragma once
// TrainOptions (what a run is asked to do), StepStats (what a step did), and the one list of
// TrainOptions' fields (visit_options) that the start-up agreement, checkpoints and resumes
// read, so that a new option cannot be left out of any of them.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "seqpar/config/memory_modes.hpp"
#include "seqpar/core/arena.hpp"
#include "seqpar/core/fields.hpp"
#include "seqpar/nn/block.hpp"
#include "seqpar/optim/schedule.hpp"
#include "seqpar/train/precision.hpp"

namespace seqpar::inline v0 {

/// What a training run is asked to do (Hugging Face Trainer names in comments; the memory
/// trades are docs/architecture.md's, the faults and loss scale docs/reliability.md's).
struct TrainOptions {
  LrSchedule schedule{.peak = 2e-5};  // learning_rate, warmup_steps, the decay
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0.0;          // on matrices only
  double max_grad_norm = 1.0;         // <= 0: no clipping
  std::int64_t micro_batch_rows = 0;  // rows per micro-batch; 0: the whole local batch at once
  std::uint64_t seed = 42;            // initialisation and data order
  double init_std = 0.02;
  // Logits the LM head holds at once; 0: Ops<D>::logits_chunk_bytes (32 MiB Cpu, 256 MiB Cuda).
  std::int64_t logits_bytes = 0;
  // What a block keeps for its backward (Recompute: none, selective, full); full recomputes
  // every recompute_every-th block (gradient_checkpointing). The same bits in every mode.
  Recompute recompute = Recompute::none;
  std::int64_t recompute_every = 1;
  // fused: flash-style attention, a log-sum-exp per query kept instead of the probabilities.
  AttentionKind attention = AttentionKind::standard;
  // DeepSpeed's fp16 block (dynamic under Fp16Mixed; off elsewhere unless enabled).
  LossScaleOptions loss_scale;
  // Non-finite steps in a row after which step() throws (each one makes no update).
  std::int64_t max_nonfinite_steps = 10;
  // Master weights and moments in host memory (optimizer), and ZeRO-3's parameter shards
  // too (optimizer_and_params): DeepSpeed's offload_optimizer / offload_param.
  Offload offload = Offload::none;
};

/// What one optimizer step did.
struct StepStats {
  std::int64_t step = 0;     // 1-based count of optimizer steps taken
  double loss = 0;           // token mean over the global batch
  double grad_norm = 0;      // before clipping
  double lr = 0;             // the rate this step used
  std::int64_t tokens = 0;   // rows * seq of the global batch
  std::int64_t targets = 0;  // tokens that entered the loss
  double seconds = 0;
  double tokens_per_s = 0;
  MemoryStats memory;              // this rank's arena
  bool skipped = false;            // no update was made: the loss or gradient norm was not finite
  bool overflow = false;           // skipped: the scaled gradients overflowed, the scaler adapts
  double loss_scale = 1;           // the loss scale this step used (1 without loss scaling)
  std::int64_t skipped_steps = 0;  // steps skipped so far by this trainer, this one included
  std::int64_t nonfinite_in_a_row = 0;  // faults in a row (no loss scale explains them)
  /// 1-based count of step() calls, skipped ones included (step + skipped_steps; it resumes
  /// with a checkpoint): a skipped step's own number, where `step` stays the last update's.
  std::int64_t attempt = 0;
};

/// How an option bears on a run, for resumes: `order` and `result` options change what is
/// computed (a resume must find them unchanged, `order` ones change the data order too);
/// `layout` ones change only how (memory, speed): a resume may change them.
enum class OptionRole { order, result, layout };

/// Calls f(name, field, role) for every field of `o` (TrainOptions or const TrainOptions),
/// nested ones by dotted names ("schedule.peak").
template <class O, class F>
requires std::same_as<std::remove_const_t<O>, TrainOptions>
constexpr void visit_options(O& o, F&& f) {
  using enum OptionRole;
  f("schedule.peak", o.schedule.peak, result);
  f("schedule.warmup", o.schedule.warmup, result);
  f("schedule.total", o.schedule.total, result);
  f("schedule.decay", o.schedule.decay, result);
  f("schedule.min_ratio", o.schedule.min_ratio, result);
  f("schedule.warmup_shape", o.schedule.warmup_shape, result);
  f("beta1", o.beta1, result);
  f("beta2", o.beta2, result);
  f("eps", o.eps, result);
  f("weight_decay", o.weight_decay, result);
  f("max_grad_norm", o.max_grad_norm, result);
  f("micro_batch_rows", o.micro_batch_rows, layout);
  f("seed", o.seed, order);
  f("init_std", o.init_std, layout);  // only a fresh run initialises
  f("logits_bytes", o.logits_bytes, layout);
  f("recompute", o.recompute, layout);
  f("recompute_every", o.recompute_every, layout);
  f("attention", o.attention, layout);
  f("loss_scale.enabled", o.loss_scale.enabled, layout);
  f("loss_scale.loss_scale", o.loss_scale.loss_scale, layout);
  f("loss_scale.initial_scale_power", o.loss_scale.initial_scale_power, layout);
  f("loss_scale.loss_scale_window", o.loss_scale.loss_scale_window, layout);
  f("loss_scale.hysteresis", o.loss_scale.hysteresis, layout);
  f("loss_scale.consecutive_hysteresis", o.loss_scale.consecutive_hysteresis, layout);
  f("loss_scale.min_loss_scale", o.loss_scale.min_loss_scale, layout);
  f("max_nonfinite_steps", o.max_nonfinite_steps, layout);
  f("offload", o.offload, layout);
}

namespace detail {
constexpr std::size_t visited_options() {
  std::size_t n = 0;
  const TrainOptions o{};
  visit_options(o, [&n](std::string_view, const auto&, OptionRole) { ++n; });
  return n;
}
}  // namespace detail

// A field added to TrainOptions, LrSchedule or LossScaleOptions must be added to
// visit_options too (the agreement and the resume keys read it).
static_assert(detail::visited_options() == aggregate_fields<TrainOptions>() - 2 +
                                               aggregate_fields<LrSchedule>() +
                                               aggregate_fields<LossScaleOptions>(),
              "visit_options must list every field of TrainOptions, LrSchedule and "
              "LossScaleOptions");

}  // namespace seqpar::inline v0

// Everyday training controls of seqgpt_ner under Hugging Face's names: the batch as
// micro-batch rows x gradient accumulation x data-parallel ranks, the optimizer and the
// learning-rate schedule (TrainOptions), and examples over --max-length cut on the left.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "options.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/data/examples.hpp"
#include "seqpar/optim/schedule.hpp"

namespace ner {

/// The rows of one optimizer step: `rows` in the global batch, `micro_rows` in each data
/// rank's micro-batch, `accumulation` micro-batches per step (the last one may be smaller
/// when --micro-batch does not divide a rank's rows). rows = micro_rows x accumulation x
/// data ranks, as the Hugging Face Trainer (and DeepSpeed's train_batch_size) count it.
struct BatchShape {
  std::int64_t rows = 0, micro_rows = 0, accumulation = 1;
};

/// The batch of --batch, --micro-batch and --gradient-accumulation-steps for `data_ranks`
/// data-parallel ranks; a pipeline of `stages` > 1 defaults to micro-batches of a quarter
/// of a rank's rows. Given both --micro-batch and --gradient-accumulation-steps the batch
/// is their product with the ranks (and --batch, when given too, must equal it).
inline BatchShape batch_shape(const Options& o, std::int64_t data_ranks, std::int64_t stages) {
  const std::int64_t m = o.micro_batch, a = o.gradient_accumulation_steps;
  if (m > 0 && a > 0) {
    SEQPAR_CHECK(m <= INT64_MAX / a / data_ranks, "--micro-batch ", m,
                 " x --gradient-accumulation-steps ", a, " x ", data_ranks,
                 " data-parallel rank(s) overflows");
    const std::int64_t rows = m * a * data_ranks;
    SEQPAR_CHECK(!o.given.contains("--batch") || o.batch == rows, "--batch ", o.batch,
                 " is not --micro-batch ", m, " x --gradient-accumulation-steps ", a, " x ",
                 data_ranks, " data-parallel rank(s) = ", rows, "; give two of the three");
    return {rows, m, a};
  }
  SEQPAR_CHECK(o.batch % data_ranks == 0, "--batch ", o.batch,
               " is not a multiple of the plan's data-parallel degree ", data_ranks);
  const std::int64_t local = o.batch / data_ranks;
  if (a > 0) {
    SEQPAR_CHECK(local % a == 0, "--batch ", o.batch, " over ", data_ranks,
                 " data-parallel rank(s) is ", local,
                 " rows per rank, which --gradient-accumulation-steps ", a,
                 " does not divide into micro-batches of equal rows");
    return {o.batch, local / a, a};
  }
  const std::int64_t micro = m > 0        ? std::min(m, local)
                             : stages > 1 ? std::max<std::int64_t>(1, local / 4)
                                          : local;
  return {o.batch, micro, (local + micro - 1) / micro};
}

/// The learning-rate schedule of a run of `total` optimizer steps: a warmup of
/// --warmup-steps (else --warmup-ratio of the steps), linear or logarithmic (DeepSpeed's
/// warmup_type), from warmup_min_lr to --lr, then --lr-scheduler-type's decay back to
/// warmup_min_lr at lr_decay_steps (else the last step).
inline seqpar::LrSchedule lr_schedule(const Options& o, std::int64_t total) {
  seqpar::LrSchedule s;
  s.peak = o.lr;
  s.warmup = o.warmup_steps >= 0
                 ? o.warmup_steps
                 : static_cast<std::int64_t>(o.warmup_ratio * static_cast<double>(total) + 0.5);
  s.total = o.lr_decay_steps > 0 ? o.lr_decay_steps : total;
  s.decay = o.lr_scheduler_type == "cosine"                 ? seqpar::LrDecay::cosine
            : o.lr_scheduler_type == "constant_with_warmup" ? seqpar::LrDecay::constant
                                                            : seqpar::LrDecay::linear;
  s.warmup_shape = o.warmup_type == "log" ? seqpar::LrWarmup::log : seqpar::LrWarmup::linear;
  s.min_ratio = o.lr > 0 ? o.warmup_min_lr / o.lr : 0.0;
  return s;
}

/// The optimizer, schedule and batch fields of `to` for a run of `total` steps under a
/// plan with `data_ranks` data-parallel ranks and `stages` pipeline stages.
template <class TrainOptionsT>
BatchShape set_train_controls(const Options& o, std::int64_t total, std::int64_t data_ranks,
                              std::int64_t stages, TrainOptionsT& to) {
  to.schedule = lr_schedule(o, total);
  to.beta1 = o.adam_beta1;
  to.beta2 = o.adam_beta2;
  to.eps = o.adam_epsilon;
  to.weight_decay = o.weight_decay;
  to.max_grad_norm = o.max_grad_norm;
  const BatchShape b = batch_shape(o, data_ranks, stages);
  to.micro_batch_rows = b.micro_rows;
  return b;
}

/// `o` with --batch the global batch of batch_shape() (which it then gives again).
inline Options with_global_batch(Options o, std::int64_t data_ranks, std::int64_t stages) {
  o.batch = batch_shape(o, data_ranks, stages).rows;
  return o;
}

/// The run's batch and schedule, one line, at its start.
inline void print_train_controls(const Options& o, const BatchShape& b, std::int64_t data_ranks) {
  std::printf(
      "  batch %lld rows = micro-batch %lld x accumulation %lld x %lld data rank(s); lr %s, "
      "%s warmup from %g; AdamW betas %g, %g, eps %g; offload %s\n",
      static_cast<long long>(b.rows), static_cast<long long>(b.micro_rows),
      static_cast<long long>(b.accumulation), static_cast<long long>(data_ranks),
      o.lr_scheduler_type.c_str(), o.warmup_type.c_str(), o.warmup_min_lr, o.adam_beta1,
      o.adam_beta2, o.adam_epsilon, o.offload.c_str());
}

/// The optimizer and schedule settings a resume must find unchanged, as one text.
inline std::string optimizer_key(const Options& o) {
  std::ostringstream os;
  os.precision(17);
  os << "betas=" << o.adam_beta1 << "," << o.adam_beta2 << ";eps=" << o.adam_epsilon
     << ";schedule=" << o.lr_scheduler_type << ";warmup=" << o.warmup_type
     << ";min_lr=" << o.warmup_min_lr << ";decay_steps=" << o.lr_decay_steps;
  return os.str();
}

/// A prompt's tokens within --max-length: cut on the left (--truncation left), as
/// SeqGPT's inference truncates its prompts.
inline std::vector<std::int32_t> cut_prompt(const Options& o, std::vector<std::int32_t> prompt) {
  if (o.truncation != "left" || static_cast<std::int64_t>(prompt.size()) <= o.max_tokens)
    return prompt;
  const auto tail = seqpar::prompt_tail(prompt, o.max_tokens);
  return {tail.begin(), tail.end()};
}

/// What an example over --max-length becomes (--truncation).
inline seqpar::TooLong too_long(const Options& o) {
  return o.truncation == "skip" ? seqpar::TooLong::skip : seqpar::TooLong::cut_prompt;
}

}  // namespace ner

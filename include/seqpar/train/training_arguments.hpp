#pragma once
// TrainingArguments: what a training run is asked to do, under the names Hugging Face's
// TrainingArguments gives them (learning_rate, per_device_train_batch_size, ...), with the
// layout (ZeRO stage, tensor and pipeline degrees) and DeepSpeed's extras beside them. A
// command line or a DeepSpeed configuration (train/deepspeed_config.hpp) fills it; it maps
// onto TrainOptions (train_options), the batch of a step (batch_shape) and the layout
// (`plan`, resolved against the launch by resolve_plan).

#include <algorithm>
#include <cstdint>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>

#include "seqpar/config/memory_modes.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/fields.hpp"
#include "seqpar/optim/schedule.hpp"
#include "seqpar/plan/registry.hpp"
#include "seqpar/train/best_model.hpp"
#include "seqpar/train/precision.hpp"
#include "seqpar/train/trainer.hpp"

namespace seqpar::inline v0 {

struct TrainingArguments {
  // The optimizer and its schedule.
  double learning_rate = 5e-5;
  double weight_decay = 0.0;  // on matrices only
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_epsilon = 1e-8;
  double max_grad_norm = 1.0;                // 0: no clipping
  std::string lr_scheduler_type = "linear";  // linear | cosine | constant_with_warmup
  double warmup_ratio = 0.0;                 // of the run's steps, unless warmup_steps >= 0
  std::int64_t warmup_steps = -1;
  std::string warmup_type = "linear";  // linear | log (DeepSpeed's WarmupLR default)
  double warmup_min_lr = 0.0;          // where warmup starts and the decay ends (DeepSpeed)
  std::int64_t lr_decay_steps = 0;     // the step the decay ends at; 0: the run's last
  // How long, and the batch of a step: train_batch_size (global rows, DeepSpeed's name) =
  // per_device_train_batch_size x gradient_accumulation_steps x data-parallel ranks; two
  // of the three give the third (batch_shape).
  double num_train_epochs = 3;
  std::int64_t max_steps = 0;  // > 0: this many steps, whatever the epochs
  std::int64_t train_batch_size = 16;
  std::int64_t per_device_train_batch_size = 0;
  std::int64_t gradient_accumulation_steps = 0;
  std::uint64_t seed = 42;
  // Checkpoints and logging.
  IntervalStrategy save_strategy = IntervalStrategy::epoch;  // save_steps alone: steps
  std::int64_t save_steps = 0;
  std::int64_t save_total_limit = 2;
  std::int64_t logging_steps = 10;
  // Evaluation and the best model.
  IntervalStrategy eval_strategy = IntervalStrategy::epoch;  // eval_steps alone: steps
  std::int64_t eval_steps = 0;                               // with steps; 0: logging_steps
  std::int64_t per_device_eval_batch_size = 32;
  std::string metric_for_best_model;  // empty: "loss" where a best model is asked for
  std::optional<bool> greater_is_better;
  bool load_best_model_at_end = false;
  std::int64_t early_stopping_patience = 0;  // evaluations without improvement; 0: none
  double early_stopping_threshold = 0;
  // Precision, memory and the layout.
  std::string precision = "fp32";  // fp32 | bf16 | fp16 (Hugging Face: bf16, fp16)
  LossScaleOptions loss_scale;     // fp16's scaler (DeepSpeed's fp16 block)
  std::string offload = "none";    // none | optimizer | optimizer+params (offload_name)
  Recompute recompute = Recompute::none;
  std::int64_t recompute_every = 1;
  std::int64_t max_nonfinite_steps = 10;
  /// The layout: a ZeRO stage, tensor and pipeline degrees and schedule, and a data degree
  /// (0: what the launch leaves).
  PlanRequest plan;
  /// The arguments given explicitly (on the command line), by field name: a DeepSpeed
  /// configuration must agree with them, and may replace the others.
  std::set<std::string> given;

  bool was_given(const std::string& field) const { return given.contains(field); }
};

/// Every field of TrainingArguments and how a run's ranks use it: the one list a program's
/// start-up agreement reads (a field added to TrainingArguments is added here).
inline constexpr std::tuple training_arguments_fields{
    field<FieldUse::agreed>("learning_rate", &TrainingArguments::learning_rate),
    field<FieldUse::agreed>("weight_decay", &TrainingArguments::weight_decay),
    field<FieldUse::agreed>("adam_beta1", &TrainingArguments::adam_beta1),
    field<FieldUse::agreed>("adam_beta2", &TrainingArguments::adam_beta2),
    field<FieldUse::agreed>("adam_epsilon", &TrainingArguments::adam_epsilon),
    field<FieldUse::agreed>("max_grad_norm", &TrainingArguments::max_grad_norm),
    field<FieldUse::agreed>("lr_scheduler_type", &TrainingArguments::lr_scheduler_type),
    field<FieldUse::agreed>("warmup_ratio", &TrainingArguments::warmup_ratio),
    field<FieldUse::agreed>("warmup_steps", &TrainingArguments::warmup_steps),
    field<FieldUse::agreed>("warmup_type", &TrainingArguments::warmup_type),
    field<FieldUse::agreed>("warmup_min_lr", &TrainingArguments::warmup_min_lr),
    field<FieldUse::agreed>("lr_decay_steps", &TrainingArguments::lr_decay_steps),
    field<FieldUse::agreed>("num_train_epochs", &TrainingArguments::num_train_epochs),
    field<FieldUse::agreed>("max_steps", &TrainingArguments::max_steps),
    field<FieldUse::agreed>("train_batch_size", &TrainingArguments::train_batch_size),
    field<FieldUse::agreed>("per_device_train_batch_size",
                            &TrainingArguments::per_device_train_batch_size),
    field<FieldUse::agreed>("gradient_accumulation_steps",
                            &TrainingArguments::gradient_accumulation_steps),
    field<FieldUse::agreed>("seed", &TrainingArguments::seed),
    field<FieldUse::agreed>("save_strategy", &TrainingArguments::save_strategy),
    field<FieldUse::agreed>("save_steps", &TrainingArguments::save_steps),
    field<FieldUse::agreed>("save_total_limit", &TrainingArguments::save_total_limit),
    field<FieldUse::agreed>("logging_steps", &TrainingArguments::logging_steps),
    field<FieldUse::agreed>("eval_strategy", &TrainingArguments::eval_strategy),
    field<FieldUse::agreed>("eval_steps", &TrainingArguments::eval_steps),
    field<FieldUse::agreed>("per_device_eval_batch_size",
                            &TrainingArguments::per_device_eval_batch_size),
    field<FieldUse::agreed>("metric_for_best_model", &TrainingArguments::metric_for_best_model),
    field<FieldUse::agreed>("greater_is_better", &TrainingArguments::greater_is_better),
    field<FieldUse::agreed>("load_best_model_at_end", &TrainingArguments::load_best_model_at_end),
    field<FieldUse::agreed>("early_stopping_patience", &TrainingArguments::early_stopping_patience),
    field<FieldUse::agreed>("early_stopping_threshold",
                            &TrainingArguments::early_stopping_threshold),
    field<FieldUse::agreed>("precision", &TrainingArguments::precision),
    field<FieldUse::agreed>("loss_scale", &TrainingArguments::loss_scale),
    field<FieldUse::agreed>("offload", &TrainingArguments::offload),
    field<FieldUse::agreed>("recompute", &TrainingArguments::recompute),
    field<FieldUse::agreed>("recompute_every", &TrainingArguments::recompute_every),
    field<FieldUse::agreed>("max_nonfinite_steps", &TrainingArguments::max_nonfinite_steps),
    field<FieldUse::agreed>("layout", &TrainingArguments::plan),
    field<FieldUse::own>("given", &TrainingArguments::given),  // how, not what
};
static_assert(lists_every_field<TrainingArguments>(training_arguments_fields),
              "training_arguments_fields must list every field of TrainingArguments");

/// The layout asked for as the agreement shows it: its name and the name given.
inline std::string field_text(const PlanRequest& r) {
  return plan_name(r.layout) + (r.asked.empty() ? "" : " (asked as " + r.asked + ")");
}

/// A loss scale's fields as the agreement shows them, from visit_options' list.
inline std::string field_text(const LossScaleOptions& l) {
  TrainOptions o;
  o.loss_scale = l;
  std::string s;
  visit_options(o, [&](std::string_view name, const auto& v, OptionRole) {
    if (name.starts_with("loss_scale."))
      s += (s.empty() ? "" : ", ") + std::string(name.substr(11)) + " " + field_text(v);
  });
  return s;
}

/// The rows of one optimizer step: `rows` in the global batch, `micro_rows` in each data
/// rank's micro-batch, `accumulation` micro-batches per step (the last one may be smaller
/// when the micro-batch does not divide a rank's rows).
struct BatchShape {
  std::int64_t rows = 0, micro_rows = 0, accumulation = 1;
};

/// The batch of train_batch_size, per_device_train_batch_size and gradient_accumulation_steps
/// for `data_ranks` data-parallel ranks and `stages` pipeline stages. Given the micro-batch
/// and the accumulation, the global batch is their product with the ranks (and
/// train_batch_size, when given too, must equal it); given the global batch, the
/// micro-batches divide a rank's rows (a pipeline of several stages defaults to micro-batches
/// of a quarter of them, so that its stages overlap).
inline BatchShape batch_shape(const TrainingArguments& a, std::int64_t data_ranks,
                              std::int64_t stages) {
  const std::int64_t m = a.per_device_train_batch_size, g = a.gradient_accumulation_steps;
  if (m > 0 && g > 0) {
    SEQPAR_CHECK(m <= INT64_MAX / g / data_ranks, "TrainingArguments::per_device_train_batch_size ",
                 m, " x TrainingArguments::gradient_accumulation_steps ", g, " x ", data_ranks,
                 " data-parallel rank(s) overflows");
    const std::int64_t rows = m * g * data_ranks;
    SEQPAR_CHECK(!a.was_given("train_batch_size") || a.train_batch_size == rows,
                 "TrainingArguments::train_batch_size ", a.train_batch_size,
                 " is not TrainingArguments::per_device_train_batch_size ", m,
                 " x TrainingArguments::gradient_accumulation_steps ", g, " x ", data_ranks,
                 " data-parallel rank(s) = ", rows, "; give two of the three");
    return {rows, m, g};
  }
  SEQPAR_CHECK(a.train_batch_size > 0 && a.train_batch_size % data_ranks == 0,
               "TrainingArguments::train_batch_size ", a.train_batch_size,
               " is not a multiple of the data-parallel degree ", data_ranks);
  const std::int64_t local = a.train_batch_size / data_ranks;
  if (g > 0) {
    SEQPAR_CHECK(local % g == 0, "TrainingArguments::train_batch_size ", a.train_batch_size,
                 " over ", data_ranks, " data-parallel rank(s) is ", local,
                 " rows per rank, which TrainingArguments::gradient_accumulation_steps ", g,
                 " does not divide into micro-batches of equal rows");
    return {a.train_batch_size, local / g, g};
  }
  const std::int64_t micro = m > 0        ? std::min(m, local)
                             : stages > 1 ? std::max<std::int64_t>(1, local / 4)
                                          : local;
  return {a.train_batch_size, micro, (local + micro - 1) / micro};
}

/// The learning-rate schedule of a run of `total` optimizer steps: a warmup of warmup_steps
/// (else warmup_ratio of the steps), linear or logarithmic (DeepSpeed's warmup_type), from
/// warmup_min_lr to learning_rate, then lr_scheduler_type's decay back to warmup_min_lr at
/// lr_decay_steps (else the last step).
inline LrSchedule lr_schedule(const TrainingArguments& a, std::int64_t total) {
  LrSchedule s;
  s.peak = a.learning_rate;
  s.warmup = a.warmup_steps >= 0
                 ? a.warmup_steps
                 : static_cast<std::int64_t>(a.warmup_ratio * static_cast<double>(total) + 0.5);
  s.total = a.lr_decay_steps > 0 ? a.lr_decay_steps : total;
  s.decay = a.lr_scheduler_type == "cosine"                 ? LrDecay::cosine
            : a.lr_scheduler_type == "constant_with_warmup" ? LrDecay::constant
                                                            : LrDecay::linear;
  s.warmup_shape = a.warmup_type == "log" ? LrWarmup::log : LrWarmup::linear;
  s.min_ratio = a.learning_rate > 0 ? a.warmup_min_lr / a.learning_rate : 0.0;
  return s;
}

/// The TrainOptions of a run of `total` steps whose steps have the batch `batch`.
inline TrainOptions train_options(const TrainingArguments& a, std::int64_t total,
                                  const BatchShape& batch) {
  TrainOptions to;
  to.schedule = lr_schedule(a, total);
  to.beta1 = a.adam_beta1;
  to.beta2 = a.adam_beta2;
  to.eps = a.adam_epsilon;
  to.weight_decay = a.weight_decay;
  to.max_grad_norm = a.max_grad_norm;
  to.micro_batch_rows = batch.micro_rows;
  to.seed = a.seed;
  to.max_nonfinite_steps = a.max_nonfinite_steps;
  to.offload = parse_offload(a.offload, "TrainingArguments::offload");
  to.recompute = a.recompute;
  to.recompute_every = a.recompute_every;
  to.loss_scale = a.loss_scale;  // the precision decides whether it scales
  return to;
}

/// When the run saves: save_strategy (steps where only save_steps was given).
inline Interval save_interval(const TrainingArguments& a) {
  Interval i{a.save_strategy, a.save_steps};
  if (a.was_given("save_steps") && !a.was_given("save_strategy") && a.save_steps > 0)
    i.strategy = IntervalStrategy::steps;
  i.check("TrainingArguments::save_strategy");
  return i;
}

/// When the run evaluates: eval_strategy (steps where only eval_steps was given; every
/// logging_steps steps where eval_steps is 0).
inline Interval eval_interval(const TrainingArguments& a) {
  Interval i{a.eval_strategy, a.eval_steps};
  if (a.was_given("eval_steps") && !a.was_given("eval_strategy") && a.eval_steps > 0)
    i.strategy = IntervalStrategy::steps;
  if (i.strategy == IntervalStrategy::steps && i.steps == 0) i.steps = a.logging_steps;
  i.check("TrainingArguments::eval_strategy");
  return i;
}

/// The best model the arguments ask for (metric_for_best_model, load_best_model_at_end or
/// early_stopping_patience), or none; refuses one without evaluations to choose by.
inline std::optional<BestModel> best_model(const TrainingArguments& a) {
  if (a.metric_for_best_model.empty() && !a.load_best_model_at_end &&
      a.early_stopping_patience == 0)
    return std::nullopt;
  SEQPAR_CHECK(eval_interval(a).strategy != IntervalStrategy::no,
               "TrainingArguments::eval_strategy is no, but ",
               a.load_best_model_at_end        ? "TrainingArguments::load_best_model_at_end"
               : a.early_stopping_patience > 0 ? "TrainingArguments::early_stopping_patience"
                                               : "TrainingArguments::metric_for_best_model",
               " needs evaluations; set TrainingArguments::eval_strategy to steps or epoch");
  BestModel b;
  if (!a.metric_for_best_model.empty()) b.metric = a.metric_for_best_model;
  b.greater_is_better = a.greater_is_better;
  b.load_at_end = a.load_best_model_at_end;
  b.patience = a.early_stopping_patience;
  b.threshold = a.early_stopping_threshold;
  return b;
}

/// The steps of a run: max_steps when given, else num_train_epochs x `per_epoch` (at least
/// one).
inline std::int64_t total_steps(const TrainingArguments& a, std::int64_t per_epoch) {
  if (a.max_steps > 0) return a.max_steps;
  return std::max<std::int64_t>(
      1, static_cast<std::int64_t>(a.num_train_epochs * static_cast<double>(per_epoch) + 0.5));
}

/// The optimizer and schedule settings a resume must find unchanged, as one text.
inline std::string optimizer_key(const TrainingArguments& a) {
  std::ostringstream os;
  os.precision(17);
  os << "betas=" << a.adam_beta1 << "," << a.adam_beta2 << ";eps=" << a.adam_epsilon
     << ";schedule=" << a.lr_scheduler_type << ";warmup=" << a.warmup_type
     << ";min_lr=" << a.warmup_min_lr << ";decay_steps=" << a.lr_decay_steps;
  return os.str();
}

/// The loss-scaling arguments set fp16's scaler: with another precision (fp32 and bf16 scale
/// no loss) they are refused, not ignored.
inline void check_loss_scale_arguments(const TrainingArguments& a) {
  for (const char* field : {"loss_scale", "initial_scale_power", "loss_scale_window", "hysteresis",
                            "consecutive_hysteresis", "min_loss_scale"})
    SEQPAR_CHECK(!a.was_given(field) || a.precision == "fp16", "TrainingArguments::", field,
                 " sets fp16's loss scaling; this run trains in ", a.precision,
                 ", which scales no loss (TrainingArguments::precision fp16, or fp16.enabled in "
                 "a DeepSpeed configuration)");
}

}  // namespace seqpar::inline v0

// A DeepSpeed configuration (ds_config.json) applied to TrainingArguments the way the
// Hugging Face Trainer applies one to its own (HfTrainerDeepSpeedConfig): "auto" takes the
// argument's value (given or default), an explicit value replaces an argument's default and
// must agree with an argument the command line gives. Every key is honoured, reported as
// ignored (performance only: the results are the same without it) or refused with its
// value (ignoring it would change the training), all refusals in one error.
// docs/deepspeed.md maps each key.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/io/detail/json_unique.hpp"
#include "seqpar/plan/registry.hpp"
#include "seqpar/train/training_arguments.hpp"

namespace seqpar::inline v0 {

/// What applying a DeepSpeed configuration did besides changing the options.
struct DeepSpeedReport {
  std::string file;
  std::vector<std::string>
      applied;  // "zero_optimization.stage=3 -> TrainingArguments::zero_stage 3"
  std::vector<std::string> ignored;  // "zero_optimization.overlap_comm=true"

  /// The lines a run prints at its start: what was applied, and what was ignored.
  std::vector<std::string> lines() const {
    std::vector<std::string> out;
    const auto list = [](const std::vector<std::string>& v) {
      std::string s;
      for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
      return s;
    };
    if (!applied.empty()) out.push_back(file + ": " + list(applied));
    if (!ignored.empty())
      out.push_back(file +
                    ": ignored (performance only; the results are the same): " + list(ignored));
    return out;
  }
};

namespace detail::deepspeed {

using nlohmann::json;

class DeepSpeedReader {
 public:
  DeepSpeedReader(TrainingArguments& a, std::string file, std::int64_t world)
      : a_(a), file_(std::move(file)), world_(world) {
    report_.file = file_;
  }

  DeepSpeedReport read(const json& root) {
    if (!root.is_object())
      seqpar::detail::fail(file_, ": a DeepSpeed configuration is a JSON object; this is ",
                           root.type_name());
    std::optional<std::int64_t> stage;
    for (const auto& [k, v] : root.items()) {
      if (k == "train_batch_size" || k == "train_micro_batch_size_per_gpu" ||
          k == "gradient_accumulation_steps")
        batch_[k] = v;
      else if (k == "zero_optimization")
        stage = zero(v);
      else if (k == "fp16" || k == "bf16" || k == "bfloat16")
        precision_block(k, v);
      else if (k == "optimizer")
        optimizer(v);
      else if (k == "scheduler")
        scheduler(v);
      else if (k == "gradient_clipping")
        match_number(k, v, "max_grad_norm", a_.max_grad_norm);
      else if (is_one_of(k, {"steps_per_print", "wall_clock_breakdown", "dump_state",
                             "memory_breakdown", "flops_profiler", "tensorboard", "wandb",
                             "csv_monitor", "comet", "comms_logger", "monitor_config", "timers",
                             "aio", "autotuning", "checkpoint", "zero_allow_untested_optimizer",
                             "zero_force_ds_cpu_optimizer", "activation_checkpointing"}))
        ignore(k, v);
      else if (k == "prescale_gradients" || k == "sparse_gradients")
        neutral(k, v, json(false), "seqpar averages gradients after their reduction");
      else if (k == "gradient_predivide_factor")
        neutral(k, v, json(1.0), "seqpar divides gradients once, after their reduction");
      else if (k == "communication_data_type" || k == "gradient_accumulation_dtype")
        neutral_any(k, v, {json(nullptr), json("fp32"), json("float32")},
                    "seqpar reduces and accumulates gradients in fp32");
      else if (is_one_of(k, {"amp", "elasticity", "curriculum_learning", "data_efficiency",
                             "progressive_layer_drop", "eigenvalue", "quantize_training",
                             "compression_training", "sparse_attention", "pipeline"}))
        disabled_block(k, v);
      else
        refuse(k, v, "not a DeepSpeed key seqpar knows");
    }
    plan(stage.value_or(0));
    batch();
    if (!refused_.empty()) {
      std::string list;
      for (const auto& r : refused_) list += "\n  " + r;
      seqpar::detail::fail(file_, ": ", refused_.size(),
                           " key(s) that seqpar does not honour, and ignoring them would "
                           "change the training:",
                           list, "\n(docs/deepspeed.md maps every key)");
    }
    return report_;
  }

 private:
  TrainingArguments& a_;
  std::string file_;
  std::int64_t world_;
  DeepSpeedReport report_;
  std::vector<std::string> refused_;
  std::map<std::string, json> batch_;
  bool offload_optimizer_ = false, offload_params_ = false;
  std::optional<double> optimizer_lr_;

  static bool is_one_of(std::string_view k, std::initializer_list<std::string_view> names) {
    return std::find(names.begin(), names.end(), k) != names.end();
  }
  static bool is_auto(const json& v) { return v.is_string() && v.get<std::string>() == "auto"; }
  static std::string text(const json& v) { return v.dump(); }
  template <class T>
  static std::string text_of(const T& x) {
    if constexpr (std::is_same_v<T, std::string>)
      return x;
    else if constexpr (std::is_same_v<T, bool>)
      return x ? "true" : "false";
    else {
      std::ostringstream os;
      os << x;
      return os.str();
    }
  }

  void refuse(const std::string& key, const json& v, const std::string& why) {
    refused_.push_back(key + "=" + text(v) + ": " + why);
  }
  void ignore(const std::string& key, const json& v) {
    report_.ignored.push_back(key + "=" + text(v));
  }
  void applied(const std::string& key, const json& v, const std::string& what) {
    report_.applied.push_back(key + "=" + text(v) + " -> " + what);
  }

  // A key whose every value but `neutral` (what seqpar does) changes the training.
  void neutral(const std::string& key, const json& v, const json& want, const std::string& why) {
    neutral_any(key, v, {want}, why);
  }
  void neutral_any(const std::string& key, const json& v, std::initializer_list<json> want,
                   const std::string& why) {
    for (const auto& w : want)
      if (v == w) return;
    std::string values;
    for (const auto& w : want) values += (values.empty() ? "" : " or ") + text(w);
    refuse(key, v, "only " + values + " is honoured (" + why + ")");
  }
  // A block of a feature seqpar does not have: honoured while {"enabled": false}.
  void disabled_block(const std::string& key, const json& v) {
    if (v.is_object() && v.contains("enabled") && v["enabled"] == false) return;
    refuse(key, v, "seqpar has no such feature; only {\"enabled\": false} is honoured");
  }

  // A number, or nullopt for "auto"; a refusal (and nullopt) for anything else.
  std::optional<double> number(const std::string& key, const json& v) {
    if (is_auto(v)) return std::nullopt;
    if (!v.is_number() || !std::isfinite(v.get<double>())) {
      refuse(key, v, "expected a number or \"auto\"");
      return std::nullopt;
    }
    return v.get<double>();
  }
  std::optional<std::int64_t> integer(const std::string& key, const json& v, std::int64_t least) {
    const auto x = number(key, v);
    if (!x) return std::nullopt;
    if (*x != std::floor(*x) || *x < static_cast<double>(least) || *x > 9e18) {
      refuse(key, v, "expected an integer of at least " + std::to_string(least) + " or \"auto\"");
      return std::nullopt;
    }
    return static_cast<std::int64_t>(*x);
  }
  std::optional<bool> boolean(const std::string& key, const json& v) {
    if (is_auto(v)) return std::nullopt;
    if (!v.is_boolean()) {
      refuse(key, v, "expected true, false or \"auto\"");
      return std::nullopt;
    }
    return v.get<bool>();
  }

  // An argument set by a key: "auto" keeps the argument; a value must agree with the
  // argument when the command line gives it (`name`, a field of TrainingArguments), else it
  // replaces the argument's default (as the Hugging Face Trainer refuses a DeepSpeed value
  // that disagrees with its arguments).
  template <class T>
  void match(const std::string& key, const json& v, const char* name, T& field, const T& value,
             const std::string& shown = {}) {
    if (a_.was_given(name) && !(field == value)) {
      refuse(key, v,
             std::string("the arguments give TrainingArguments::") + name + " " + text_of(field) +
                 "; make them agree, or set the key to \"auto\" to take the command line's");
      return;
    }
    field = value;
    applied(
        key, v,
        shown.empty() ? "TrainingArguments::" + std::string(name) + " " + text_of(value) : shown);
  }
  template <class T>
  void match_number(const std::string& key, const json& v, const char* name, T& field) {
    if (const auto x = number(key, v)) {
      if (*x < 0)
        refuse(key, v, "expected a non-negative number");
      else
        match(key, v, name, field, static_cast<T>(*x));
    }
  }

  // Every key of block `obj` at `prefix` that `handle(key, value)` does not take is
  // refused as unknown; `performance` keys are reported as ignored.
  template <class F>
  void block(const std::string& prefix, const json& obj,
             std::initializer_list<std::string_view> performance, F&& handle) {
    if (!obj.is_object()) {
      refuse(prefix, obj, "expected an object");
      return;
    }
    for (const auto& [k, v] : obj.items()) {
      const std::string key = prefix + "." + k;
      if (is_one_of(k, performance))
        ignore(key, v);
      else if (!handle(k, key, v))
        refuse(key, v, "not a key of " + prefix + " seqpar knows");
    }
  }

  // zero_optimization: the stage (the plan, in plan()) and the offload option.
  std::optional<std::int64_t> zero(const json& z) {
    std::optional<std::int64_t> stage;
    block("zero_optimization", z,
          {"overlap_comm",
           "contiguous_gradients",
           "sub_group_size",
           "reduce_bucket_size",
           "allgather_bucket_size",
           "allgather_partitions",
           "reduce_scatter",
           "round_robin_gradients",
           "stage3_prefetch_bucket_size",
           "stage3_param_persistence_threshold",
           "stage3_max_live_parameters",
           "stage3_max_reuse_distance",
           "stage3_gather_16bit_weights_on_model_save",
           "stage3_gather_fp16_weights_on_model_save",
           "elastic_checkpoint",
           "load_from_fp32_weights",
           "memory_efficient_linear",
           "prefetch_bucket_size",
           "param_persistence_threshold",
           "max_live_parameters",
           "max_reuse_distance",
           "gather_16bit_weights_on_model_save",
           "use_multi_rank_bucket_allreduce",
           "ignore_unused_parameters",
           "cpu_offload_use_pin_memory",
           "stage3_module_granularity_threshold",
           "log_trace_cache_warnings"},
          [&](const std::string& k, const std::string& key, const json& v) {
            if (k == "stage") {
              if (is_auto(v))
                refuse(key, v, "DeepSpeed has no \"auto\" stage; give 0, 1, 2 or 3");
              else if (const auto s = integer(key, v, 0); s && *s > 3)
                refuse(key, v, "expected 0, 1, 2 or 3");
              else
                stage = s;
            } else if (k == "offload_optimizer" || k == "offload_param") {
              offload(k, key, v);
            } else if (k == "cpu_offload" || k == "cpu_offload_params") {
              if (const auto b = boolean(key, v))
                (k == "cpu_offload" ? offload_optimizer_ : offload_params_) = *b;
            } else if (is_one_of(k, {"zero_quantized_weights", "zero_quantized_gradients",
                                     "zero_quantized_nontrainable_weights",
                                     "mics_hierarchical_params_gather"})) {
              neutral(key, v, json(false), "seqpar moves weights and gradients unquantized");
            } else if (k == "zero_hpz_partition_size") {
              neutral(key, v, json(1), "one parameter partition over all data ranks");
            } else if (k == "mics_shard_size") {
              neutral(key, v, json(-1), "ZeRO shards over all data ranks, not MiCS groups");
            } else {
              return false;
            }
            return true;
          });
    if (z.is_object() && !z.contains("stage")) stage = 0;  // DeepSpeed's default
    if (offload_params_ && stage && *stage != 3)
      refuse("zero_optimization.offload_param", z.value("offload_param", json()),
             "parameters are offloaded under ZeRO stage 3 only (the stage here is " +
                 std::to_string(*stage) + ")");
    return stage;
  }

  void offload(const std::string& k, const std::string& prefix, const json& v) {
    block(prefix, v,
          {"pin_memory", "buffer_count", "buffer_size", "fast_init", "ratio", "max_in_cpu",
           "nvme_path", "pipeline", "pipeline_read", "pipeline_write"},
          [&](const std::string& name, const std::string& key, const json& d) {
            if (name != "device") return false;
            if (d == "cpu" || d == "none" || d.is_null())
              (k == "offload_optimizer" ? offload_optimizer_ : offload_params_) = d == "cpu";
            else
              refuse(key, d,
                     d == "nvme" ? "seqpar offloads to pinned host memory only (\"cpu\")"
                                 : "expected \"cpu\" or \"none\"");
            return true;
          });
  }

  // fp16 / bf16: the precision and fp16's loss scaling.
  void precision_block(const std::string& k, const json& v) {
    const bool fp16 = k == "fp16";
    const std::string wanted = fp16 ? "fp16" : "bf16";
    block(k, v, {}, [&](const std::string& name, const std::string& key, const json& x) {
      if (name == "enabled") {
        if (const auto b = boolean(key, x)) {
          (fp16 ? fp16_on_ : bf16_on_) = *b;
          if (*b && fp16_on_ && bf16_on_)
            refuse(key, x, "fp16.enabled and bf16.enabled are both true; enable one");
          else if (*b)
            match(key, x, "precision", a_.precision, wanted);
          else if (a_.precision == wanted && a_.was_given("precision"))
            refuse(key, x, "the arguments give TrainingArguments::precision " + wanted);
          else if (a_.precision == wanted)
            a_.precision = "fp32";
        }
      } else if (fp16 && name == "loss_scale") {
        match_number(key, x, "loss_scale", a_.loss_scale.loss_scale);
      } else if (fp16 && name == "min_loss_scale") {
        match_number(key, x, "min_loss_scale", a_.loss_scale.min_loss_scale);
      } else if (fp16 && (name == "initial_scale_power" || name == "loss_scale_window" ||
                          name == "hysteresis")) {
        std::int64_t& field = name == "initial_scale_power" ? a_.loss_scale.initial_scale_power
                              : name == "loss_scale_window" ? a_.loss_scale.loss_scale_window
                                                            : a_.loss_scale.hysteresis;
        if (const auto n = integer(key, x, name == "initial_scale_power" ? 0 : 1))
          match(key, x,
                name == "initial_scale_power" ? "initial_scale_power"
                : name == "loss_scale_window" ? "loss_scale_window"
                                              : "hysteresis",
                field, *n);
      } else if (fp16 && name == "consecutive_hysteresis") {
        if (const auto b = boolean(key, x))
          match(key, x, "consecutive_hysteresis", a_.loss_scale.consecutive_hysteresis, *b);
      } else if (name == "auto_cast" || name == "fp16_master_weights_and_grads" ||
                 name == "bf16_master_weights_and_grads" || name == "bf16_optimizer_states") {
        neutral(key, x, json(false), "seqpar keeps fp32 master weights and moments");
      } else {
        return false;
      }
      return true;
    });
  }

  void optimizer(const json& v) {
    if (v.is_object() && v.contains("type")) {
      std::string type = v["type"].is_string() ? v["type"].get<std::string>() : "";
      std::transform(type.begin(), type.end(), type.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (type != "adamw" && type != "adam")
        refuse("optimizer.type", v["type"],
               "seqpar's optimizer is AdamW (\"AdamW\", or \"Adam\" in its default "
               "adam_w_mode)");
    } else {
      refuse("optimizer", v, "expected {\"type\": \"AdamW\", \"params\": {...}}");
      return;
    }
    block("optimizer", v, {}, [&](const std::string& k, const std::string&, const json& p) {
      if (k == "type") return true;
      if (k != "params") return false;
      block("optimizer.params", p, {"torch_adam", "fused", "foreach"},
            [&](const std::string& name, const std::string& key, const json& x) {
              if (name == "lr") {
                if (const auto lr = number(key, x)) optimizer_lr_ = *lr;
                match_number(key, x, "learning_rate", a_.learning_rate);
              } else if (name == "eps") {
                match_number(key, x, "adam_epsilon", a_.adam_epsilon);
              } else if (name == "weight_decay") {
                match_number(key, x, "weight_decay", a_.weight_decay);
              } else if (name == "betas") {
                if (is_auto(x)) return true;
                if (!x.is_array() || x.size() != 2 || !x[0].is_number() || !x[1].is_number() ||
                    x[0].get<double>() < 0 || x[0].get<double>() >= 1 || x[1].get<double>() < 0 ||
                    x[1].get<double>() >= 1)
                  refuse(key, x, "expected [beta1, beta2] in [0, 1) or \"auto\"");
                else {
                  match(key, x, "adam_beta1", a_.adam_beta1, x[0].get<double>());
                  match(key, x, "adam_beta2", a_.adam_beta2, x[1].get<double>());
                }
              } else if (name == "adam_w_mode" || name == "bias_correction") {
                neutral(key, x, json(true), "decoupled weight decay, bias-corrected moments");
              } else if (name == "amsgrad") {
                neutral(key, x, json(false), "seqpar's AdamW has no amsgrad");
              } else {
                return false;
              }
              return true;
            });
      return true;
    });
  }

  void scheduler(const json& v) {
    const bool typed = v.is_object() && v.contains("type") && v["type"].is_string();
    const std::string type = typed ? v["type"].get<std::string>() : "";
    if (type != "WarmupLR" && type != "WarmupDecayLR") {
      refuse(typed ? "scheduler.type" : "scheduler", typed ? v["type"] : v,
             "seqpar's DeepSpeed schedules are WarmupLR and WarmupDecayLR");
      return;
    }
    const bool decay = type == "WarmupDecayLR";
    match("scheduler.type", v["type"], "lr_scheduler_type", a_.lr_scheduler_type,
          std::string(decay ? "linear" : "constant_with_warmup"));
    // DeepSpeed's defaults where a key is absent: a logarithmic warmup from 0.
    a_.warmup_min_lr = 0;
    a_.warmup_type = "log";
    bool typed_warmup = false;
    block("scheduler", v, {}, [&](const std::string& k, const std::string&, const json& p) {
      if (k == "type") return true;
      if (k != "params") return false;
      block(
          "scheduler.params", p, {},
          [&](const std::string& name, const std::string& key, const json& x) {
            if (name == "warmup_min_lr") {
              if (const auto lr = number(key, x)) {
                a_.warmup_min_lr = *lr;
                applied(key, x, "the warmup's first rate");
              }
            } else if (name == "warmup_max_lr") {
              const auto lr = number(key, x);
              if (lr && optimizer_lr_ && *lr != *optimizer_lr_)
                refuse(
                    key, x,
                    "optimizer.params.lr is " + text_of(*optimizer_lr_) + "; the two are one rate");
              else if (lr)
                match_number(key, x, "learning_rate", a_.learning_rate);
            } else if (name == "warmup_num_steps") {
              if (is_auto(x)) return true;
              if (a_.was_given("warmup_ratio"))
                refuse(
                    key, x,
                    "the arguments give TrainingArguments::warmup_ratio; set the key to \"auto\"");
              else if (const auto n = integer(key, x, 0))
                match(key, x, "warmup_steps", a_.warmup_steps, *n);
            } else if (name == "total_num_steps" && decay) {
              if (const auto n = integer(key, x, 1)) {
                a_.lr_decay_steps = *n;
                applied(key, x, "the decay ends at step " + std::to_string(*n));
              }
            } else if (name == "warmup_type") {
              typed_warmup = true;
              if (x == "log" || x == "linear")
                a_.warmup_type = x.get<std::string>();
              else
                refuse(key, x, "expected \"log\" or \"linear\"");
            } else if (name == "last_batch_iteration") {
              neutral(key, x, json(-1), "a resumed run takes its step from the checkpoint");
            } else {
              return false;
            }
            return true;
          });
      return true;
    });
    if (!typed_warmup) report_.applied.push_back("scheduler warmup_type (absent) -> log");
  }

  // zero_optimization.stage -> the layout's ZeRO stage; offload -> TrainingArguments::offload. The
  // data degree (for the batch) is the layout's, else what the launch leaves.
  void plan(std::int64_t stage) {
    PlanDesc& layout = a_.plan.layout;
    const json s(stage);
    const int others = std::max(1, layout.tensor * layout.pipeline);
    data_ranks_ = layout.data > 0 ? layout.data : std::max<std::int64_t>(1, world_ / others);
    if (a_.was_given("zero_stage") && layout.zero_stage != stage) {
      // One data rank shards nothing: a layout of one data rank keeps its own stage.
      if (!(data_ranks_ == 1 && stage > 0))
        refuse("zero_optimization.stage", s,
               "the arguments give " +
                   (a_.plan.asked.empty()
                        ? "TrainingArguments::zero_stage " + std::to_string(layout.zero_stage)
                        : a_.plan.asked) +
                   " (ZeRO stage " + std::to_string(layout.zero_stage) +
                   "); make them agree, or drop one");
    } else {
      layout.zero_stage = static_cast<int>(stage);
      applied("zero_optimization.stage", s,
              "TrainingArguments::zero_stage " + std::to_string(stage));
    }
    if (offload_params_ && !offload_optimizer_ && stage == 3) {
      refuse("zero_optimization.offload_param", json("cpu"),
             "parameters are offloaded together with the optimizer state only "
             "(TrainingArguments::offload optimizer+params); offload_optimizer is not \"cpu\"");
      return;
    }
    const std::string offload = offload_params_      ? "optimizer+params"
                                : offload_optimizer_ ? "optimizer"
                                                     : "none";
    if (offload != "none" || a_.was_given("offload"))
      match("zero_optimization.offload_*", json(offload), "offload", a_.offload, offload);
  }

  // train_batch_size = train_micro_batch_size_per_gpu x gradient_accumulation_steps x data
  // ranks. "auto" (or an absent key) takes the command line's value where it gives one;
  // what is still open follows from the others, as DeepSpeed completes two of the three.
  void batch() {
    std::optional<std::int64_t> t, m, a;
    const auto take = [&](const char* key, const char* name, std::int64_t cli,
                          std::optional<std::int64_t>& out) {
      const auto it = batch_.find(key);
      std::optional<std::int64_t> ds;
      if (it != batch_.end()) ds = integer(key, it->second, 1);
      from_file_ = from_file_ || ds.has_value();
      if (ds && a_.was_given(name) && *ds != cli)
        refuse(key, it->second,
               std::string("the arguments give TrainingArguments::") + name + " " +
                   std::to_string(cli) + "; make them agree, or set the key to \"auto\"");
      out = ds ? ds : a_.was_given(name) ? std::optional(cli) : std::nullopt;
    };
    take("train_batch_size", "train_batch_size", a_.train_batch_size, t);
    take("train_micro_batch_size_per_gpu", "per_device_train_batch_size",
         a_.per_device_train_batch_size, m);
    take("gradient_accumulation_steps", "gradient_accumulation_steps",
         a_.gradient_accumulation_steps, a);
    if (!from_file_) return;  // all "auto" or absent: the command line's batch (batch_shape)
    const std::int64_t dp = data_ranks_;
    const auto quotient = [](std::int64_t n, std::int64_t d) {
      return n % d == 0 ? std::optional<std::int64_t>(n / d) : std::nullopt;
    };
    if (t && m && !a)
      a = quotient(*t, *m * dp);
    else if (t && a && !m)
      m = quotient(*t, *a * dp);
    else if (m && a && !t)
      t = *m * *a * dp;
    else if (t && !m && !a)  // DeepSpeed: train_batch_size alone means no accumulation
      a = 1, m = quotient(*t, dp);
    else if (m && !t && !a)
      a = 1, t = *m * dp;
    else if (a && !t && !m)
      t = a_.train_batch_size, m = quotient(*t, *a * dp);
    if (!t || !m || !a || *t != *m * *a * dp) {
      const auto shown = [](const std::optional<std::int64_t>& x) {
        return x ? std::to_string(*x) : std::string("?");
      };
      refuse("train_batch_size", t ? json(*t) : json("?"),
             "train_batch_size " + shown(t) + " is not train_micro_batch_size_per_gpu " + shown(m) +
                 " x gradient_accumulation_steps " + shown(a) + " x " + std::to_string(dp) +
                 " data-parallel rank(s) (values from the file, else the command line)");
      return;
    }
    a_.train_batch_size = *t;
    a_.per_device_train_batch_size = *m;
    a_.gradient_accumulation_steps = *a;
    report_.applied.push_back("batch " + std::to_string(*t) + " = micro-batch " +
                              std::to_string(*m) + " x accumulation " + std::to_string(*a) + " x " +
                              std::to_string(dp) + " data rank(s)");
  }

  std::int64_t data_ranks_ = 1;
  bool from_file_ = false;  // a batch key of the file holds a number
  bool fp16_on_ = false, bf16_on_ = false;
};

}  // namespace detail::deepspeed

/// Applies the DeepSpeed configuration `config` (read from `file`) to `a` for a launch of
/// `world` ranks (the data degree of the batch keys: the layout's, else what the world
/// leaves). Throws seqpar::Error naming the file and every key refused, with its value.
inline DeepSpeedReport apply_deepspeed_config(TrainingArguments& a, const nlohmann::json& config,
                                              const std::string& file, std::int64_t world) {
  return detail::deepspeed::DeepSpeedReader(a, file, world).read(config);
}

/// Reads the DeepSpeed configuration `path` and applies it (apply_deepspeed_config); a key
/// repeated in one object is refused, as DeepSpeed refuses it.
inline DeepSpeedReport apply_deepspeed_file(TrainingArguments& a, const std::filesystem::path& path,
                                            std::int64_t world) {
  const std::string file = path.string();
  std::ifstream f(path);
  SEQPAR_CHECK(f.good(), file, ": the DeepSpeed configuration cannot be opened");
  std::ostringstream text;
  text << f.rdbuf();
  return apply_deepspeed_config(a, detail::parse_json_unique_keys(text.str(), file), file, world);
}

}  // namespace seqpar::inline v0

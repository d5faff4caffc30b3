// seqgpt_ner's command line: a table of options, each with its names (Hugging Face's
// TrainingArguments name first where there is one; `_` and `-` are the same letter), the
// kind of value it takes and where it goes. An unknown option is refused with the nearest
// known name.
#include "options.hpp"

#include <cctype>
#include <cstring>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "model_list.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/data/any_task.hpp"
#include "seqpar/data/decoding.hpp"
#include "seqpar/data/record.hpp"
#include "seqpar/io/atomic_file.hpp"
#include "seqpar/io/detail/utf8.hpp"

namespace ner {

namespace {

using seqpar::TrainingArguments;

// An option: its names (the first is the one messages use), whether it takes a value (and
// may leave it out: --resume_from_checkpoint) or is a switch (`boolean`: alone it is true;
// --bf16 True, --bf16=false as transformers' parser reads them: set() gets "true" or
// "false"), and what it does with it.
struct Flag {
  std::vector<std::string_view> names;
  enum Kind { value, boolean, optional } kind = value;
  std::function<void(Options&, const std::string& value, const std::string& flag)> set;
};

[[noreturn]] void usage_error(const std::string& what) { throw UsageError(what); }

// A switch's value as transformers reads it (yes/true/t/y/1, no/false/f/n/0, any case), or
// none when `v` is none of them.
std::optional<bool> boolean_word(std::string v) {
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  if (v == "yes" || v == "true" || v == "t" || v == "y" || v == "1") return true;
  if (v == "no" || v == "false" || v == "f" || v == "n" || v == "0") return false;
  return std::nullopt;
}

// Plain decimals only: no hexadecimal, inf or nan, nothing out of range.
std::int64_t integer(const std::string& v, const std::string& flag) {
  const auto n = seqpar::detail::parse_number<std::int64_t>(v);
  if (!n || *n < 0)
    usage_error(flag + " expects a non-negative decimal integer (at most " +
                std::to_string(INT64_MAX) + "), got '" + v + "'");
  return *n;
}
std::uint64_t unsigned_integer(const std::string& v, const std::string& flag) {
  const auto n = seqpar::detail::parse_number<std::uint64_t>(v);
  if (!n)
    usage_error(flag + " expects a non-negative decimal integer (at most " +
                std::to_string(UINT64_MAX) + "), got '" + v + "'");
  return *n;
}
double real(const std::string& v, const std::string& flag) {
  const auto x = seqpar::detail::parse_number<double>(v);
  if (!x || *x < 0)
    usage_error(flag + " expects a finite non-negative decimal number, got '" + v + "'");
  return *x;
}
// What `read` returns; a seqpar::Error it throws (a library check of the value) is a
// command-line mistake.
template <class F>
auto checked(F read) {
  try {
    return read();
  } catch (const seqpar::Error& e) {
    usage_error(e.what());
  }
}

// --report_to's words, comma-separated (the flag may be repeated): none, all, jsonl
// (metrics.jsonl, which every run writes) or a reporter's name.
void add_reporters(Options& o, const std::string& v, const std::string& flag) {
  std::string accepted = "none, all, jsonl";
  for (const auto r : seqpar::reporters) (accepted += ", ") += seqpar::reporter_name(r);
  const auto add = [&o](seqpar::Reporter r) {
    if (std::find(o.report_to.begin(), o.report_to.end(), r) == o.report_to.end())
      o.report_to.push_back(r);
  };
  for (std::size_t at = 0; at <= v.size();) {
    const std::size_t comma = std::min(v.find(',', at), v.size());
    const std::string word = v.substr(at, comma - at);
    at = comma + 1;
    const auto named =
        std::find_if(seqpar::reporters.begin(), seqpar::reporters.end(),
                     [&](seqpar::Reporter r) { return seqpar::reporter_name(r) == word; });
    if (named != seqpar::reporters.end())
      add(*named);
    else if (word == "all")
      std::for_each(seqpar::reporters.begin(), seqpar::reporters.end(), add);
    else if (word == "none")
      o.report_none = true;
    else if (word != "jsonl")
      usage_error(flag + " is '" + v + "'; expected " + accepted +
                  " (several comma-separated, or the flag repeated)");
  }
}

// A TrainingArguments field, marked as given (a DeepSpeed configuration must agree with it).
template <class T>
Flag train_field(std::vector<std::string_view> names, T TrainingArguments::*field,
                 T (*read)(const std::string&, const std::string&)) {
  const std::string key(names.front());
  return {std::move(names), Flag::value,
          [=](Options& o, const std::string& v, const std::string& f) {
            o.train.*field = read(v, f);
            o.train.given.insert(key);
          }};
}
std::string text(const std::string& v, const std::string&) { return v; }
double as_double(const std::string& v, const std::string& f) { return real(v, f); }
std::int64_t as_int(const std::string& v, const std::string& f) { return integer(v, f); }

// --bf16 / --fp16: that precision, or (False) not it.
auto precision_switch(const char* name) {
  return [=](Options& o, const std::string& v, const std::string&) {
    if (v == "true")
      o.train.precision = name;
    else if (o.train.precision == name)
      o.train.precision = "fp32";
    o.train.given.insert("precision");
  };
}

std::vector<Flag> flags() {
  using O = Options;
  using T = TrainingArguments;
  using seqpar::IntervalStrategy;
  const auto field = [](auto member, auto read) {
    return [=](O& o, const std::string& v, const std::string& f) { o.*member = read(v, f); };
  };
  const auto path = [](fs::path O::*member) {
    return [=](O& o, const std::string& v, const std::string&) { o.*member = v; };
  };
  const auto on = [](bool O::*member) {
    return [=](O& o, const std::string& v, const std::string&) { o.*member = v == "true"; };
  };
  const auto strategy = [](IntervalStrategy T::*member, const char* key) {
    return [=](O& o, const std::string& v, const std::string& f) {
      o.train.*member = checked([&] { return seqpar::parse_interval_strategy(v, f); });
      o.train.given.insert(key);
    };
  };
  const auto layout = [](const char* key, auto apply) {
    return [=](O& o, const std::string& v, const std::string& f) {
      apply(o.train.plan.layout, v, f);
      o.train.given.insert(key);
    };
  };
  return {
      // Data and model
      {{"data_dir", "data-dir"}, Flag::value, path(&O::data_dir)},
      {{"output_dir", "out"}, Flag::value, path(&O::out_dir)},
      {{"export_hf"}, Flag::value, path(&O::export_hf)},
      {{"model"}, Flag::value, field(&O::model, text)},
      {{"weights", "model_name_or_path"}, Flag::value, path(&O::weights)},
      {{"tokenizer"}, Flag::value, path(&O::tokenizer)},
      {{"labels"},
       Flag::value,
       [](O& o, const std::string& v, const std::string& f) {
         o.labels = checked([&] { return seqpar::parse_label_list(v, f); });
       }},
      {{"task"}, Flag::value, field(&O::task, text)},
      {{"checkpoint"}, Flag::value, path(&O::checkpoint)},
      {{"to"}, Flag::value, path(&O::export_to)},
      // The layout and the launch
      {{"plan"}, Flag::value, [](O& o, const std::string& v, const std::string&) { o.plan = v; }},
      {{"zero_stage"},
       Flag::value,
       layout("zero_stage",
              [](auto& l, auto& v, auto& f) {
                const auto z = integer(v, f);
                if (z > 3) usage_error(f + " is " + v + "; expected 0, 1, 2 or 3");
                l.zero_stage = static_cast<int>(z);
              })},
      {{"tensor_parallel", "tensor_model_parallel_size"},
       Flag::value,
       layout("tensor_parallel",
              [](auto& l, auto& v, auto& f) {
                l.tensor = static_cast<int>(std::clamp<std::int64_t>(integer(v, f), 0, 4096));
                if (l.tensor == 0) usage_error(f + " must be at least 1");
              })},
      {{"pipeline_parallel", "pipeline_model_parallel_size"},
       Flag::value,
       layout("pipeline_parallel",
              [](auto& l, auto& v, auto& f) {
                l.pipeline = static_cast<int>(std::clamp<std::int64_t>(integer(v, f), 0, 4096));
                if (l.pipeline == 0) usage_error(f + " must be at least 1");
              })},
      {{"pipeline_schedule"},
       Flag::value,
       layout("pipeline_schedule",
              [](auto& l, auto& v, auto& f) {
                if (v != "gpipe" && v != "1f1b")
                  usage_error(f + " is '" + v + "'; expected gpipe or 1f1b");
                l.gpipe = v == "gpipe";
              })},
      {{"ranks"},
       Flag::value,
       [](O& o, const std::string& v, const std::string& f) {
         const auto n = integer(v, f);
         if (n < 1 || n > 4096) usage_error(f + " is " + v + "; expected 1 to 4096 thread ranks");
         o.ranks = static_cast<int>(n);
       }},
      {{"local_rank"},
       Flag::value,
       [](O& o, const std::string& v, const std::string& f) {
         const auto n = integer(v, f);
         if (n < 0 || n > 4096) usage_error(f + " is " + v + "; expected a rank from 0 to 4096");
         o.local_rank = static_cast<int>(n);
       }},
      {{"threads"},
       Flag::value,
       [](O& o, const std::string& v, const std::string& f) {
         o.threads = integer(v, f);
         if (o.threads > 4096) usage_error(f + " is " + v + "; expected at most 4096");
       }},
      {{"device"}, Flag::value, field(&O::device, text)},
      {{"precision"},
       Flag::value,
       [](O& o, const std::string& v, const std::string&) {
         o.train.precision = v;
         o.train.given.insert("precision");
       }},
      {{"bf16"}, Flag::boolean, precision_switch("bf16")},
      {{"fp16"}, Flag::boolean, precision_switch("fp16")},
      {{"offload"}, Flag::value, train_field<std::string>({"offload"}, &T::offload, text).set},
      {{"deepspeed"}, Flag::value, path(&O::deepspeed)},
      // Training (Hugging Face's TrainingArguments)
      train_field<double>({"learning_rate", "lr"}, &T::learning_rate, as_double),
      train_field<double>({"num_train_epochs", "epochs"}, &T::num_train_epochs, as_double),
      train_field<std::int64_t>({"max_steps"}, &T::max_steps, as_int),
      train_field<std::int64_t>({"train_batch_size", "batch"}, &T::train_batch_size, as_int),
      train_field<std::int64_t>({"per_device_train_batch_size", "micro-batch"},
                                &T::per_device_train_batch_size, as_int),
      train_field<std::int64_t>({"gradient_accumulation_steps"}, &T::gradient_accumulation_steps,
                                as_int),
      train_field<double>({"weight_decay"}, &T::weight_decay, as_double),
      train_field<double>({"warmup_ratio"}, &T::warmup_ratio, as_double),
      train_field<std::int64_t>({"warmup_steps"}, &T::warmup_steps, as_int),
      train_field<double>({"max_grad_norm"}, &T::max_grad_norm, as_double),
      train_field<double>({"adam_beta1"}, &T::adam_beta1, as_double),
      train_field<double>({"adam_beta2"}, &T::adam_beta2, as_double),
      train_field<double>({"adam_epsilon"}, &T::adam_epsilon, as_double),
      train_field<std::string>({"lr_scheduler_type"}, &T::lr_scheduler_type, text),
      {{"seed"},
       Flag::value,
       [](O& o, const std::string& v, const std::string& f) {
         o.train.seed = unsigned_integer(v, f);
         o.train.given.insert("seed");
       }},
      train_field<std::int64_t>({"save_steps", "save-every"}, &T::save_steps, as_int),
      train_field<std::int64_t>({"save_total_limit"}, &T::save_total_limit, as_int),
      train_field<std::int64_t>({"logging_steps", "log-every"}, &T::logging_steps, as_int),
      train_field<std::int64_t>({"max_nonfinite_steps"}, &T::max_nonfinite_steps, as_int),
      train_field<std::int64_t>({"recompute_every"}, &T::recompute_every, as_int),
      {{"recompute"},
       Flag::value,
       [](O& o, const std::string& v, const std::string& f) {
         o.train.recompute = seqpar::parse_recompute(v, f);
       }},
      {{"gradient_checkpointing"},
       Flag::boolean,
       [](O& o, const std::string& v, const std::string&) {
         o.train.recompute = v == "true" ? seqpar::Recompute::full : seqpar::Recompute::none;
       }},
      {{"resume_from_checkpoint", "resume"},
       Flag::optional,
       [](O& o, const std::string& v, const std::string&) {
         o.resume = true;
         o.resume_from = v;
       }},
      {{"allow_changed_options"}, Flag::boolean, on(&O::allow_changed_options)},
      {{"overwrite_output_dir"}, Flag::boolean, on(&O::overwrite_output_dir)},
      {{"stop_after"}, Flag::value, field(&O::stop_after, as_int)},
      {{"report_to"}, Flag::value, add_reporters},
      // fp16's loss scaling (DeepSpeed's fp16 block)
      {{"loss_scale"},
       Flag::value,
       [](O& o, const std::string& v, const std::string& f) {
         o.train.loss_scale.loss_scale = real(v, f);
         o.train.given.insert("loss_scale");
       }},
      {{"initial_scale_power"},
       Flag::value,
       [](O& o, const std::string& v, const std::string& f) {
         o.train.loss_scale.initial_scale_power = integer(v, f);
         o.train.given.insert("initial_scale_power");
       }},
      {{"loss_scale_window"},
       Flag::value,
       [](O& o, const std::string& v, const std::string& f) {
         o.train.loss_scale.loss_scale_window = integer(v, f);
         o.train.given.insert("loss_scale_window");
       }},
      {{"hysteresis"},
       Flag::value,
       [](O& o, const std::string& v, const std::string& f) {
         o.train.loss_scale.hysteresis = integer(v, f);
         o.train.given.insert("hysteresis");
       }},
      {{"consecutive_hysteresis"},
       Flag::boolean,
       [](O& o, const std::string& v, const std::string&) {
         o.train.loss_scale.consecutive_hysteresis = v == "true";
         o.train.given.insert("consecutive_hysteresis");
       }},
      {{"min_loss_scale"},
       Flag::value,
       [](O& o, const std::string& v, const std::string& f) {
         o.train.loss_scale.min_loss_scale = real(v, f);
         o.train.given.insert("min_loss_scale");
       }},
      // Evaluation, the best model and generation
      {{"eval_strategy", "evaluation_strategy"},
       Flag::value,
       strategy(&T::eval_strategy, "eval_strategy")},
      train_field<std::int64_t>({"eval_steps", "eval-every"}, &T::eval_steps, as_int),
      {{"save_strategy"}, Flag::value, strategy(&T::save_strategy, "save_strategy")},
      {{"no_eval"},
       Flag::boolean,
       [](O& o, const std::string& v, const std::string&) {
         if (v == "true") o.train.eval_strategy = IntervalStrategy::no;
         o.train.given.insert("eval_strategy");
       }},
      // transformers' scripts say what to run: train runs training (with its evaluations).
      {{"do_train"},
       Flag::boolean,
       [](O& o, const std::string& v, const std::string& f) {
         if (v == "false" && o.command == "train")
           usage_error(f +
                       " False: seqgpt_ner train trains; eval and predict are commands of "
                       "their own");
       }},
      {{"do_eval"},
       Flag::boolean,
       [](O& o, const std::string& v, const std::string&) {
         if (v == "false" && !o.train.was_given("eval_strategy"))
           o.train.eval_strategy = IntervalStrategy::no;
       }},
      train_field<std::string>({"metric_for_best_model"}, &T::metric_for_best_model, text),
      {{"greater_is_better"},
       Flag::boolean,
       [](O& o, const std::string& v, const std::string&) {
         o.train.greater_is_better = v == "true";
       }},
      {{"load_best_model_at_end"},
       Flag::boolean,
       [](O& o, const std::string& v, const std::string&) {
         o.train.load_best_model_at_end = v == "true";
       }},
      train_field<std::int64_t>({"early_stopping_patience"}, &T::early_stopping_patience, as_int),
      train_field<double>({"early_stopping_threshold"}, &T::early_stopping_threshold, as_double),
      train_field<std::int64_t>({"per_device_eval_batch_size", "eval_rows"},
                                &T::per_device_eval_batch_size, as_int),
      {{"eval_limit"}, Flag::value, field(&O::eval_limit, as_int)},
      // Given, they must decode (check_decoding); not given (0), the model's default does.
      {{"max_new_tokens"},
       Flag::value,
       [](O& o, const std::string& v, const std::string& f) {
         seqpar::DecodingDefaults d;
         d.max_new_tokens = o.max_new_tokens = integer(v, f);
         checked([&] { seqpar::check_decoding(d, f); });
       }},
      {{"num_beams"},
       Flag::value,
       [](O& o, const std::string& v, const std::string& f) {
         seqpar::DecodingDefaults d;
         d.num_beams = o.num_beams = integer(v, f);
         checked([&] { seqpar::check_decoding(d, f); });
       }},
      {{"repetition_penalty"},
       Flag::value,
       [](O& o, const std::string& v, const std::string& f) {
         seqpar::DecodingDefaults d;
         d.repetition_penalty = o.repetition_penalty = real(v, f);
         checked([&] { seqpar::check_decoding(d, f); });
       }},
      {{"max_chars"}, Flag::value, field(&O::max_chars, as_int)},
      {{"max_length", "max-tokens"}, Flag::value, field(&O::max_length, as_int)},
      {{"truncation"}, Flag::value, field(&O::truncation, text)},
      {{"quiet"}, Flag::boolean, on(&O::quiet)},
      {{"text"},
       Flag::value,
       [](O& o, const std::string& v, const std::string&) { o.texts.push_back(v); }},
      {{"input"}, Flag::value, path(&O::input)},
      {{"submission"}, Flag::value, path(&O::submission)},
      {{"on_bad_input"}, Flag::value, field(&O::on_bad_input, text)},
  };
}

// A flag's name with `_` read as `-`: --learning_rate and --learning-rate are one flag.
std::string normal(std::string_view name) {
  std::string s(name);
  std::replace(s.begin(), s.end(), '_', '-');
  return s;
}

// Levenshtein distance.
std::size_t distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The known names nearest an unknown option (at most three, nearest first, each flag once),
// or empty when none is near.
std::string nearest(const std::string& name, const std::vector<Flag>& all) {
  std::vector<std::pair<std::size_t, std::string>> near;
  const std::size_t limit = std::max<std::size_t>(2, name.size() / 2);
  for (const auto& f : all) {
    std::size_t d = SIZE_MAX;
    for (const auto n : f.names) d = std::min(d, distance(normal(name), normal(n)));
    if (d <= limit) near.emplace_back(d, "--" + std::string(f.names.front()));
  }
  std::stable_sort(near.begin(), near.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  // Those about as near as the nearest.
  while (!near.empty() && near.back().first > near.front().first + 1) near.pop_back();
  std::string s;
  for (std::size_t i = 0; i < std::min<std::size_t>(3, near.size()); ++i)
    s += (i == 0                                           ? ""
          : i + 1 == std::min<std::size_t>(3, near.size()) ? " or "
                                                           : ", ") +
         near[i].second;
  return s;
}

void check(const Options& o) {
  const auto& t = o.train;
  if (o.command != "train" && o.command != "eval" && o.command != "predict" &&
      o.command != "export")
    usage_error("unknown command '" + o.command + "'; expected train, eval, predict or export");
  if (t.train_batch_size == 0) usage_error("--train_batch_size must be positive");
  if (t.per_device_eval_batch_size == 0)
    usage_error("--per_device_eval_batch_size must be positive");
  if (o.num_beams > 64) usage_error("--num_beams is at most 64");
  if (t.save_total_limit == 0)
    usage_error("--save_total_limit must be positive (the checkpoints kept)");
  if (t.max_nonfinite_steps == 0) usage_error("--max_nonfinite_steps must be positive");
  if (t.recompute_every == 0) usage_error("--recompute_every must be positive (every K-th block)");
  if (t.loss_scale.initial_scale_power > 1000)
    usage_error("--initial_scale_power is at most 1000 (a double's exponent)");
  if (t.loss_scale.loss_scale_window == 0)
    usage_error("--loss_scale_window must be positive (clean steps)");
  if (t.loss_scale.hysteresis == 0)
    usage_error("--hysteresis must be positive (1: the first overflow halves)");
  if (t.loss_scale.min_loss_scale == 0) usage_error("--min_loss_scale must be above 0");
  if (!o.task.empty() && !seqpar::StandardTasks::has(o.task))
    usage_error("--task is '" + o.task + "'; expected " + seqpar::StandardTasks::names());
  if (o.truncation != "left" && o.truncation != "skip")
    usage_error("--truncation is '" + o.truncation + "'; expected left or skip");
  if (t.lr_scheduler_type != "linear" && t.lr_scheduler_type != "cosine" &&
      t.lr_scheduler_type != "constant_with_warmup")
    usage_error("--lr_scheduler_type is '" + t.lr_scheduler_type +
                "'; expected linear, cosine or constant_with_warmup");
  if (t.adam_beta1 >= 1 || t.adam_beta2 >= 1)
    usage_error("--adam_beta1 and --adam_beta2 must be below 1");
  if (t.offload != "none" && t.offload != "optimizer" && t.offload != "optimizer+params")
    usage_error("--offload is '" + t.offload + "'; expected none, optimizer or optimizer+params");
  if (o.device != "cpu" && o.device != "cuda")
    usage_error("--device is '" + o.device + "'; expected cpu or cuda");
  if (t.precision != "fp32" && t.precision != "bf16" && t.precision != "fp16")
    usage_error("--precision is '" + t.precision + "'; expected fp32, bf16 or fp16");
  if (!o.model.empty() && !find_model(o.model))
    usage_error("--model is '" + o.model + "'; expected one of " + model_names());
  if (o.max_length < 2)
    usage_error("--max_length is " + std::to_string(o.max_length) +
                "; expected at least 2 (a prompt token and the end-of-sequence token)");
  if (o.report_none && !o.report_to.empty())
    usage_error("--report_to none cannot be combined with " + seqpar::reporter_names(o.report_to));
  if (o.on_bad_input != "skip" && o.on_bad_input != "stop")
    usage_error("--on_bad_input is '" + o.on_bad_input + "'; expected skip or stop");
  for (std::size_t i = 0; i < o.texts.size(); ++i)
    if (!seqpar::detail::utf8_valid(o.texts[i]))
      usage_error("--text number " + std::to_string(i + 1) + " is not UTF-8; expected UTF-8 text");
  if (!o.submission.empty() && !o.texts.empty())
    usage_error(
        "--submission writes CLUENER's file of --input's records; --text sentences have "
        "no place in it (give one or the other)");
  if (o.command == "export" && (o.checkpoint.empty() || o.export_to.empty()))
    usage_error("export needs --checkpoint FILE (a checkpoint or weights) and --to DIR");
  // Folders the command writes into: a file in the way or a read-only folder is refused now,
  // not after the work (predict only reads --output_dir: a file there is still refused).
  const bool train = o.command == "train";
  for (const auto& [flag, dir, writes] :
       {std::tuple{"--output_dir", &o.out_dir, train || o.command == "eval"},
        {"--export_hf", &o.export_hf, train},
        {"--to", &o.export_to, o.command == "export"}}) {
    std::error_code ec;
    if (dir->empty() || (!writes && (!fs::exists(*dir, ec) || fs::is_directory(*dir, ec))))
      continue;
    if (const std::string problem = seqpar::detail::folder_write_problem(*dir); !problem.empty())
      usage_error(std::string(flag) + " " + problem);
  }
}

}  // namespace

std::vector<OptionName> option_names() {
  std::vector<OptionName> out;
  for (const Flag& f : flags())
    for (const auto n : f.names) {
      std::string name(n);
      std::replace(name.begin(), name.end(), '-', '_');
      out.push_back({name, std::string(f.names.front()), f.kind == Flag::boolean});
    }
  return out;
}

Options parse_options(int argc, char** argv) {
  Options o;
  // The tiny model trained from scratch; published weights change three of these
  // (apply_fine_tuning_defaults).
  o.train.learning_rate = 5e-3;
  o.train.num_train_epochs = 15;
  o.train.warmup_ratio = 0.03;
  o.train.weight_decay = 0.01;
  int i = 1;
  if (i < argc && std::string_view(argv[i]).substr(0, 1) != "-") o.command = argv[i++];
  const std::vector<Flag> all = flags();
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") throw UsageError("");
    if (arg.substr(0, 2) != "--") usage_error("'" + arg + "' is not an option (--name)");
    // --name=value is --name value.
    const std::size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const auto f = std::find_if(all.begin(), all.end(), [&](const Flag& flag) {
      return std::any_of(flag.names.begin(), flag.names.end(),
                         [&](std::string_view n) { return normal(n) == normal(name); });
    });
    if (f == all.end()) {
      const std::string near = nearest(name, all);
      usage_error("unknown option '--" + name + "'" +
                  (near.empty() ? "" : "; did you mean " + near + "?"));
    }
    const std::string shown = "--" + std::string(f->names.front());
    std::string value;
    if (f->kind == Flag::boolean) {
      // Alone: true; else its value, =given or next when it reads as a boolean.
      std::optional<bool> on = true;
      if (eq != std::string::npos)
        on = boolean_word(arg.substr(eq + 1));
      else if (i + 1 < argc && boolean_word(argv[i + 1]))
        on = boolean_word(argv[++i]);
      if (!on)
        usage_error(shown + " is a switch: alone, or with True/False (yes/no, 1/0); got '" +
                    arg.substr(eq + 1) + "'");
      value = *on ? "true" : "false";
    } else if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (f->kind == Flag::value) {
      if (i + 1 >= argc) usage_error(shown + " needs a value");
      value = argv[++i];
    } else if (f->kind == Flag::optional && i + 1 < argc &&
               std::string_view(argv[i + 1]).substr(0, 2) != "--") {
      value = argv[++i];
    }
    f->set(o, value, shown);
  }
  if (o.data_dir.empty() && o.command == "train") o.data_dir = SEQPAR_NER_DATA_DIR;
  if (o.train.logging_steps == 0) o.train.logging_steps = 1;
  check(o);
  o.train.plan = plan_request(o);
  if (!o.plan.empty()) o.train.given.insert("zero_stage");
  return o;
}

void apply_fine_tuning_defaults(Options& o) {
  if (o.weights.empty()) return;
  auto& t = o.train;
  if (!t.was_given("learning_rate")) t.learning_rate = 2e-5;
  if (!t.was_given("num_train_epochs")) t.num_train_epochs = 3;
  if (!t.was_given("warmup_ratio")) t.warmup_ratio = 0.1;
}

std::string plan_flags(const seqpar::PlanDesc& layout) {
  std::string flags;
  seqpar::layout_fields(layout, [&flags](std::string field, const std::string& value) {
    std::replace(field.begin(), field.end(), '_', '-');
    flags += (flags.empty() ? "--" : " --") + field + " " + value;
  });
  return flags;
}

seqpar::PlanRequest plan_request(const Options& o) {
  const auto& given = o.train.given;
  const seqpar::PlanDesc flags = o.train.plan.layout;
  std::string asked;
  if (given.contains("zero_stage")) asked += " --zero-stage " + std::to_string(flags.zero_stage);
  if (given.contains("tensor_parallel"))
    asked += " --tensor-parallel " + std::to_string(flags.tensor);
  if (given.contains("pipeline_parallel"))
    asked += " --pipeline-parallel " + std::to_string(flags.pipeline);
  if (given.contains("pipeline_schedule"))
    asked += std::string(" --pipeline-schedule ") + (flags.gpipe ? "gpipe" : "1f1b");
  if (o.plan.empty()) {
    seqpar::PlanDesc layout = flags;
    layout.data = 0;  // what the launch leaves
    return {layout,
            asked.empty() ? "the default layout (data parallel over every rank)" : asked.substr(1)};
  }
  const auto named = seqpar::parse_plan_name(o.plan);
  if (!named)
    usage_error("--plan '" + o.plan +
                "' is not a plan name: tp<T>, pp<S> (gpipe after it for that schedule), then "
                "dp<D> or zero<K>x<D> (e.g. tp2dp4, tp2pp2dp2, zero3x4; without the number the "
                "launch decides it: zero3, tp2dp), or single");
  const bool differs = (given.contains("zero_stage") && flags.zero_stage != named->zero_stage) ||
                       (given.contains("tensor_parallel") && flags.tensor != named->tensor) ||
                       (given.contains("pipeline_parallel") && flags.pipeline != named->pipeline) ||
                       (given.contains("pipeline_schedule") && flags.gpipe != named->gpipe);
  if (differs)
    usage_error("--plan " + o.plan + " is " + plan_flags(*named) +
                ", but the command line also gives" + asked + "; give one of them");
  return {*named, "--plan " + o.plan};
}

std::string in_flag_terms(std::string message) {
  // Longer names first: RunSpec::resume_from before RunSpec::resume.
  static const std::pair<const char*, const char*> words[] = {
      {"set RunSpec::allow_changed", "pass --allow_changed_options"},
      {"RunSpec::allow_changed", "--allow_changed_options"},
      {"RunSpec::resume_from", "--resume_from_checkpoint"},
      {"RunSpec::resume", "--resume_from_checkpoint"},
      {"RunSpec::overwrite_output_dir", "--overwrite_output_dir"},
      {"RunSpec::output_dir", "--output_dir"},
      {"RunSpec::save_total_limit", "--save_total_limit"},
      {"RunSpec::save_steps", "--save_steps"},
      {"RunSpec::stop_after", "--stop_after"},
      {"ExampleOptions::max_tokens", "--max_length"},
      {"RunSpec::report_to", "--report_to"},
      {"RunSpec::total_steps", "the run's steps (--max_steps, --num_train_epochs)"},
      {"the arguments give TrainingArguments::", "the command line gives --"},
      {"the arguments give ", "the command line gives "},
      {"TrainingArguments::zero_stage", "--zero-stage"},
      {"TrainingArguments::", "--"},
      {"DeviceKind::cuda", "--device cuda"},
      {"DeviceKind::cpu", "--device cpu"}};
  for (const auto& [field, flag] : words)
    for (std::size_t at = message.find(field); at != std::string::npos;
         at = message.find(field, at + std::strlen(flag)))
      message.replace(at, std::strlen(field), flag);
  return message;
}

}  // namespace ner

const char* ner::usage() {
  return R"(seqgpt_ner: SeqGPT-style Chinese NER with seqpar (train, evaluate, predict, export).

  seqgpt_ner [train] [options]     train (default), evaluating on the dev split as it goes
  seqgpt_ner eval [options]        F1 of the trained weights on the dev split
  seqgpt_ner predict [options]     answers for --text / --input sentences
  seqgpt_ner export --checkpoint FILE --to DIR   the transformers model directory of a
                                   checkpoint (also of a run that stopped or crashed)
  mpirun -np N seqgpt_ner ...      one rank per process (also srun -n N)

Options take Hugging Face's TrainingArguments names where there is one; `_` and `-` are the
same (--learning_rate, --learning-rate); --name=value works too; switches take True/False
(--bf16 True); --model_name_or_path is --weights; --do_train and --do_eval are accepted.

Data and model
  --data_dir DIR       train.jsonl|train.json|train.bio and dev.* (train: the bundled corpus by
                       default; eval and predict: the run's, from OUT/run.json)
  --output_dir DIR     (--out) outputs: tokenizer.json, step-N.safetensors, model.safetensors,
                       hf/ (for transformers), metrics.jsonl, runs/ (--report_to
                       tensorboard), run.json, cache/ (default
                       seqgpt_ner_out); one run at a time (the lock names its pid and host)
  --export_hf DIR      write the trained model directory there instead of OUT/hf
  --model NAME         tiny | seqgpt560m | bloom1b1 | bloom1b7 | bloom3b | bloom7b1, those the
                       build compiled (SEQPAR_NER_MODELS; default: the shape --weights'
                       config.json describes; the run's for eval and predict; else tiny)
  --weights PATH       start from published weights: a Hugging Face model directory
                       (config.json checked against the model, the weights, tokenizer.json), or
                       a weights file (safetensors or pytorch_model.bin); fine-tuning defaults
                       then: --learning_rate 2e-5 --num_train_epochs 3 --warmup_ratio 0.1
  --tokenizer FILE     tokenizer.json (default: the --weights directory's, else a
                       character-level one built from the training text)
  --labels a,b,c       label set in prompt order (default: the training data's, sorted)
  --task ner|classification|relation  (default: recognised from the training records;
                       docs/tasks.md)
Layout (the data-parallel degree is what the launch leaves: ranks / (tensor x pipeline))
  --zero-stage 0|1|2|3        ZeRO stage of the data-parallel ranks (default 0)
  --tensor-parallel 1|2|4     tensor-parallel degree (default 1)
  --pipeline-parallel 1|2     pipeline stages (default 1)
  --pipeline-schedule 1f1b|gpipe  (default 1f1b)
  --plan NAME          the same as one name: tp<T>, pp<S>[gpipe], then dp<D> or zero<K>x<D>
                       (tp2dp4, tp2pp2dp2, zero3x4, single; without the number the launch
                       decides it: zero3, tp2dp). seqpar-plan lists them with their memory.
  --ranks N            ranks as threads of this process (default: the plan name's, else
                       tensor x pipeline, at least 2); under mpirun/srun the processes are the
                       ranks
  --local_rank N       this process's rank on its node, as torch.distributed.launch passes it:
                       refused unless the launcher's node-local rank is the same
  --threads N          OpenMP threads per rank (default: the node's cores / its ranks; 1 for
                       eval and predict)
  --offload WHAT       none | optimizer | optimizer+params (ZeRO-3): state in host memory
  --deepspeed FILE     a DeepSpeed configuration (ds_config.json): ZeRO stage and offload,
                       precision, loss scaling, clipping, AdamW, WarmupLR / WarmupDecayLR, batch
                       sizes; "auto" takes these options' values (docs/deepspeed.md)
Device and precision
  --device cpu|cuda    where the ranks train (default cpu); cuda needs a build with CUDA:
                       under mpirun one process per GPU (NCCL), else the ranks share one GPU
  --precision fp32|bf16|fp16  (--bf16, --fp16) 16-bit weights, activations and gradients with
                       fp32 master weights; fp16 scales the loss dynamically
  --loss_scale X (0: dynamic)  --initial_scale_power N (16)  --loss_scale_window N (1000)
  --hysteresis N (2)  --consecutive_hysteresis  --min_loss_scale X (1)   fp16's scaler
Training
  --num_train_epochs N (15)  (--epochs)  --max_steps N  --learning_rate X (5e-3)  (--lr)
  --train_batch_size ROWS (16)  (--batch) the global batch = per-device micro-batch rows x
                       accumulation x data-parallel ranks
  --per_device_train_batch_size ROWS  (--micro-batch)  --gradient_accumulation_steps N
  --weight_decay X (0.01)  --warmup_ratio X (0.03)  --warmup_steps N  --max_grad_norm X (1)
  --lr_scheduler_type linear|cosine|constant_with_warmup (linear)  --seed N (42)
  --adam_beta1 X (0.9)  --adam_beta2 X (0.999)  --adam_epsilon X (1e-8)
  --recompute none|selective|full  --recompute_every K  (--gradient_checkpointing: full)
  --save_steps N       steps between checkpoints (default: each epoch's end)
  --save_total_limit N (2)  checkpoints kept
  --resume_from_checkpoint [PATH]  (--resume) continue from the newest checkpoint of OUT, or
                       from PATH (a checkpoint file, or a folder of them)
  --allow_changed_options  resume although data, tokenizer, labels or options differ
  --overwrite_output_dir   a fresh run in a folder of an earlier run's checkpoints deletes them
  --stop_after N       save a checkpoint and stop after N steps (to try a resume)
  --max_nonfinite_steps N (10)  non-finite steps in a row that stop the run
  --logging_steps N (10)  (--log-every)  --quiet
  --report_to WHAT     where the metrics go besides OUT/metrics.jsonl, which is always
                       written: tensorboard (event files in OUT/runs/: tensorboard --logdir
                       OUT/runs), all, or none (default; jsonl says the same); several
                       comma-separated or the flag repeated
Evaluation, the best model and generation (docs/ner.md#the-example-seqgpt_ner)
  --eval_strategy no|steps|epoch (epoch)  --eval_steps N (alone: steps)  --no_eval
  --save_strategy no|steps|epoch (epoch; --save_steps N alone: steps)
  --eval_limit N       dev records per evaluation: a seeded sample stratified by label
                       (default 100 while training, all in eval; 0: all)
  --metric_for_best_model NAME (f1, accuracy, macro_f1, loss, ...)  --greater_is_better B
  --load_best_model_at_end  the final weights and model directory are the best checkpoint's
  --early_stopping_patience N  --early_stopping_threshold X
  --per_device_eval_batch_size N (32)  (--eval_rows)  --max_new_tokens N  --max_chars N (512)
  --max_length N (512) tokens of an example; a longer one has its prompt cut on the left
  --truncation left|skip (left)
  --num_beams N        (default: 4 for seqgpt560m, 1 for tiny)
  --repetition_penalty X  (default: 2.0 for seqgpt560m, 1.0 for tiny)
Prediction
  --text "..."         a sentence (repeatable)   --input FILE  sentences (CLUENER JSON or lines)
  --submission FILE    NER: CLUENER's submission file of --input's records (test.json, with ids)
  --on_bad_input skip|stop (skip)  an input line that cannot be read (not UTF-8, too long):
                       reported with its file and line and skipped, or the run stops there
)";
}

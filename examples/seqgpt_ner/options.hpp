// The command line of seqgpt_ner: its command and options. What a training run is asked to
// do is seqpar's TrainingArguments, under Hugging Face's names (--learning_rate, ...); the
// rest is the program's: data, model, evaluation, generation.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "seqpar/comm/agreement.hpp"
#include "seqpar/core/fields.hpp"
#include "seqpar/train/metrics_log.hpp"  // Reporter
#include "seqpar/train/training_arguments.hpp"

#ifndef SEQPAR_NER_DATA_DIR
#define SEQPAR_NER_DATA_DIR "examples/data"
#endif

namespace ner {

namespace fs = std::filesystem;

/// A command-line mistake: exit code 2 (the message names the option; empty for --help).
struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// Everything seqgpt_ner can be told.
struct Options {
  std::string command = "train";  // train | eval | predict | export
  seqpar::TrainingArguments train;
  std::string plan;     // --plan NAME as given (the layout is train.plan)
  int ranks = 0;        // --ranks N: thread ranks without a launcher; 0: the layout's or 2
  int local_rank = -1;  // --local_rank N (torch.distributed.launch's): must be the launcher's
  std::string model;    // tiny | seqgpt560m; empty: resolve_model() decides
  fs::path data_dir;    // empty: the bundled corpus (train), the run's (eval, predict)
  fs::path out_dir = "seqgpt_ner_out";
  fs::path weights, tokenizer, input, deepspeed;
  fs::path model_dir;              // --weights' model directory, where it names one (resolve_model)
  fs::path checkpoint, export_to;  // export --checkpoint FILE --to DIR
  std::vector<std::string> labels, texts;
  std::int64_t stop_after = 0;  // > 0: save a checkpoint and stop after this many steps
  bool resume = false;          // --resume_from_checkpoint (PATH: resume_from)
  fs::path resume_from;         // a named checkpoint to resume from
  bool allow_changed_options = false;
  bool overwrite_output_dir = false;
  std::int64_t eval_limit = -1;     // dev records per evaluation (a stratified sample), 0: all;
                                    // -1: 100 while training, all in eval
  std::int64_t max_new_tokens = 0;  // 0: the longest training answer + 16
  std::int64_t num_beams = 0;       // 0: the model's default (docs/ner.md)
  double repetition_penalty = 0;    // 0: the model's default
  std::int64_t max_chars = 512;     // longer texts are skipped when reading
  std::int64_t max_length = 512;    // tokens of an example; a longer one is cut (or skipped)
  std::string truncation = "left";  // left (cut the prompt) | skip
  std::int64_t threads = 0;         // OpenMP threads per rank; 0: cores / ranks (1: eval, predict)
  fs::path export_hf;               // the model directory written at the end; empty: OUT/hf
  std::string task;                 // ner | classification | relation; empty: the records'
  fs::path submission;              // predict: CLUENER's submission file of --input's records
  std::string device = "cpu";       // cpu | cuda
  bool quiet = false;
  std::vector<seqpar::Reporter> report_to;  // besides metrics.jsonl (always written)
  bool report_none = false;                 // --report_to none: nothing besides

  // predict's input lines that cannot be read (not UTF-8, too long): skip | stop
  std::string on_bad_input = "skip";
};

/// Every field of Options by its flag, and how a job's processes use it: the one list their
/// start-up agreement reads (train.cpp). A field added to Options is added here, with its use
/// (FieldUse::agreed when it can change which collectives run: saves, evaluations, logging,
/// stops, decoding); TrainingArguments' fields are seqpar::training_arguments_fields.
inline constexpr std::tuple option_fields{
    seqpar::field<seqpar::FieldUse::agreed>("command", &Options::command),
    seqpar::field<seqpar::FieldUse::entries>("train", &Options::train),
    seqpar::field<seqpar::FieldUse::agreed>("plan", &Options::plan),
    seqpar::field<seqpar::FieldUse::agreed>("ranks", &Options::ranks),
    seqpar::field<seqpar::FieldUse::own>("local_rank", &Options::local_rank),  // each its own
    seqpar::field<seqpar::FieldUse::agreed>("model", &Options::model),
    seqpar::field<seqpar::FieldUse::agreed>("data_dir", &Options::data_dir),
    seqpar::field<seqpar::FieldUse::agreed>("output_dir", &Options::out_dir),
    seqpar::field<seqpar::FieldUse::agreed>("weights", &Options::weights),
    seqpar::field<seqpar::FieldUse::agreed>("tokenizer", &Options::tokenizer),
    seqpar::field<seqpar::FieldUse::agreed>("weights directory", &Options::model_dir),
    seqpar::field<seqpar::FieldUse::agreed>("input", &Options::input),
    seqpar::field<seqpar::FieldUse::agreed>("deepspeed", &Options::deepspeed),
    seqpar::field<seqpar::FieldUse::agreed>("checkpoint", &Options::checkpoint),
    seqpar::field<seqpar::FieldUse::agreed>("to", &Options::export_to),
    seqpar::field<seqpar::FieldUse::agreed>("labels", &Options::labels),
    seqpar::field<seqpar::FieldUse::agreed>("text", &Options::texts),
    seqpar::field<seqpar::FieldUse::agreed>("stop_after", &Options::stop_after),
    seqpar::field<seqpar::FieldUse::agreed>("resume_from_checkpoint", &Options::resume),
    seqpar::field<seqpar::FieldUse::agreed>("resume_from_checkpoint PATH", &Options::resume_from),
    seqpar::field<seqpar::FieldUse::agreed>("allow_changed_options",
                                            &Options::allow_changed_options),
    seqpar::field<seqpar::FieldUse::agreed>("overwrite_output_dir", &Options::overwrite_output_dir),
    seqpar::field<seqpar::FieldUse::agreed>("eval_limit", &Options::eval_limit),
    seqpar::field<seqpar::FieldUse::agreed>("max_new_tokens", &Options::max_new_tokens),
    seqpar::field<seqpar::FieldUse::agreed>("num_beams", &Options::num_beams),
    seqpar::field<seqpar::FieldUse::agreed>("repetition_penalty", &Options::repetition_penalty),
    seqpar::field<seqpar::FieldUse::agreed>("max_chars", &Options::max_chars),
    seqpar::field<seqpar::FieldUse::agreed>("max_length", &Options::max_length),
    seqpar::field<seqpar::FieldUse::agreed>("truncation", &Options::truncation),
    seqpar::field<seqpar::FieldUse::own>("threads", &Options::threads),  // a node's cores
    seqpar::field<seqpar::FieldUse::agreed>("export_hf", &Options::export_hf),
    seqpar::field<seqpar::FieldUse::agreed>("task", &Options::task),
    seqpar::field<seqpar::FieldUse::agreed>("submission", &Options::submission),
    seqpar::field<seqpar::FieldUse::agreed>("device", &Options::device),
    seqpar::field<seqpar::FieldUse::agreed>("quiet", &Options::quiet),
    seqpar::field<seqpar::FieldUse::agreed>("report_to", &Options::report_to),
    seqpar::field<seqpar::FieldUse::agreed>("report_to none", &Options::report_none),
    seqpar::field<seqpar::FieldUse::agreed>("on_bad_input", &Options::on_bad_input),
};
static_assert(seqpar::lists_every_field<Options>(option_fields),
              "option_fields must list every field of Options, with how the processes use it");

/// What every process of a job must have been given alike: each agreed field of Options and
/// of its TrainingArguments, by flag (option_fields, seqpar::training_arguments_fields).
inline seqpar::AgreedValues agreed_options(const Options& o) {
  seqpar::AgreedValues v;
  const auto add = [&](std::string_view name, std::string text) {
    v.emplace_back(std::string(name), std::move(text));
  };
  seqpar::for_agreed_fields(o, option_fields, add);
  seqpar::for_agreed_fields(o.train, seqpar::training_arguments_fields, add);
  return v;
}

/// The usage text (--help).
const char* usage();

/// A name the command line takes (`-` written `_`: learning_rate, zero_stage), the option's
/// first name, and whether it is a switch.
struct OptionName {
  std::string name, option;
  bool switch_ = false;
};

/// Every name of every option, in --help's order: what the Python package's keywords are.
std::vector<OptionName> option_names();

/// Parses argv. Throws UsageError naming a bad option (an unknown one with the nearest
/// known one), or with an empty message for --help.
Options parse_options(int argc, char** argv);

/// A library message in this program's terms: the spec and argument fields its flags set
/// named by those flags (RunSpec::resume_from -> --resume_from_checkpoint).
std::string in_flag_terms(std::string message);

/// The options of a training run from published weights (--weights) that the command line
/// does not set take the fine-tuning defaults (learning rate 2e-5, 3 epochs, warmup ratio
/// 0.1) instead of the tiny model's from scratch.
void apply_fine_tuning_defaults(Options& o);

/// The layout the command line asks for: --plan NAME, or the layout flags (--zero-stage,
/// --tensor-parallel, --pipeline-parallel, --pipeline-schedule), which must agree with a
/// name given as well.
seqpar::PlanRequest plan_request(const Options& o);

/// The layout flags of a layout (--zero-stage 3 --tensor-parallel 2 ...): the data degree is
/// the world's.
std::string plan_flags(const seqpar::PlanDesc& layout);

}  // namespace ner

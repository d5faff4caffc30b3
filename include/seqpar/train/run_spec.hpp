#pragma once
// RunSpec: what a training run is asked to do around its trainer's steps, as named fields:
// its output folder, its length, its saves, its resume, what a resume must find unchanged
// and what its ranks must share, and the program's hooks (train/run.hpp runs it).

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "seqpar/comm/agreement.hpp"
#include "seqpar/core/fields.hpp"
#include "seqpar/train/best_model.hpp"
#include "seqpar/train/hf_model_dir.hpp"
#include "seqpar/train/metrics_log.hpp"  // Reporter
#include "seqpar/train/resume_keys.hpp"

namespace seqpar::inline v0 {

/// What a resumed run found: the checkpoint, its metadata, what differs from this run
/// (RunSpec::allow_changed) and whether a difference changes the data order.
struct Resumed {
  std::filesystem::path checkpoint;
  std::map<std::string, std::string> metadata;
  std::vector<std::string> changed;
  bool reorder = false;
};

/// What a program adds to the run; each may be left empty.
struct RunHooks {
  /// The writer, once the folder is taken and before any rank resumes: the program's own
  /// files (a tokenizer, caches, a run description).
  std::function<void()> on_take;
  /// Every rank at each save: metadata the checkpoint records besides the run's (the data
  /// position); TrainingRun::resumed() gives it back to a resumed run.
  std::function<std::map<std::string, std::string>()> checkpoint_metadata;
};

/// A training run, as named fields; TrainingRun refuses, naming the field, what cannot work.
struct RunSpec {
  /// The run's folder: checkpoints step-N.safetensors, metrics.jsonl, the final weights.
  /// The same on every rank, on a file system every process sees.
  std::filesystem::path output_dir;
  /// The optimizer steps of the whole run (at least one).
  std::int64_t total_steps = 0;
  /// Steps between checkpoints; 0: only where the program asks (after_step's save_here),
  /// at a stop and at the end.
  std::int64_t save_steps = 0;
  /// The newest checkpoints kept (at least one); the best (RunSpec::best) is kept besides.
  std::int64_t save_total_limit = 2;
  /// Where set, the evaluations (TrainingRun::evaluated) choose the best checkpoint by a
  /// metric, and may end the run early.
  std::optional<BestModel> best{};
  /// > 0: a checkpoint and a stop after this step.
  std::int64_t stop_after = 0;
  /// Continue a run: from resume_from when given (a checkpoint file, or a folder whose
  /// newest complete checkpoint is taken), else from output_dir's newest complete one.
  bool resume = false;
  std::filesystem::path resume_from{};
  /// A fresh run in a folder holding an earlier run's checkpoints deletes them (without it
  /// such a run is refused: they would outrank its own in the rotation and a resume).
  bool overwrite_output_dir = false;
  /// A resume whose keys differ from the checkpoint's goes on, each difference reported
  /// (Resumed::changed), instead of being refused.
  bool allow_changed = false;
  /// The program's entries a checkpoint records and a resume compares (data and tokenizer
  /// digests, the batch); the trainer's model and options are the run's own keys.
  std::vector<RunKey> keys{};
  /// What every rank must have alike besides the keys, the trainer and this spec.
  AgreedValues agreed{};
  /// Files the program writes into the folder besides the run's own, relative to it, `*`
  /// standing for a name's letters and digits: a killed save's temporaries of them are
  /// removed when the folder is taken.
  std::vector<std::string> own_files{};
  /// The lock file's name in the folder.
  std::string lock_name = "seqpar.lock";
  /// The final weights, in the folder, as transformers loads them.
  std::string weights_file = "model.safetensors";
  /// Where set, a finished run's Hugging Face model directory.
  std::optional<HfExport> hf_export{};
  /// How the rank reports name this process's device ("cuda:0 NVIDIA H200"); empty: the
  /// device's name.
  std::string device_label{};
  /// SIGTERM and SIGINT stop the run at the next step boundary with a checkpoint.
  bool catch_signals = true;
  /// Where the rows of metrics.jsonl (always written: the run's own record) are reported
  /// besides; empty: nowhere else. Reporter::tensorboard: event files in logging_dir, a new
  /// one each attempt.
  std::vector<Reporter> report_to{};
  /// TensorBoard's folder; a relative one is under output_dir (transformers' logging_dir,
  /// without its per-start subfolder: every attempt of the run is one TensorBoard run).
  std::filesystem::path logging_dir = "runs";
  /// Fields added to the "start" row of metrics.jsonl.
  nlohmann::json start_details = nlohmann::json::object();
  RunHooks hooks{};
};

/// Every field of RunSpec and how the ranks use it: the one list the start-up agreement
/// reads (spec_values). A field added to RunSpec is added here, with its use.
inline constexpr std::tuple run_spec_fields{
    field<FieldUse::agreed>("output_dir", &RunSpec::output_dir),
    field<FieldUse::agreed>("total_steps", &RunSpec::total_steps),
    field<FieldUse::agreed>("save_steps", &RunSpec::save_steps),
    field<FieldUse::agreed>("save_total_limit", &RunSpec::save_total_limit),
    field<FieldUse::agreed>("best", &RunSpec::best),
    field<FieldUse::agreed>("stop_after", &RunSpec::stop_after),
    field<FieldUse::agreed>("resume", &RunSpec::resume),
    field<FieldUse::agreed>("resume_from", &RunSpec::resume_from),
    field<FieldUse::agreed>("overwrite_output_dir", &RunSpec::overwrite_output_dir),
    field<FieldUse::agreed>("allow_changed", &RunSpec::allow_changed),
    field<FieldUse::entries>("keys", &RunSpec::keys),
    field<FieldUse::entries>("agreed", &RunSpec::agreed),
    field<FieldUse::agreed>("own_files", &RunSpec::own_files),
    field<FieldUse::agreed>("lock_name", &RunSpec::lock_name),
    field<FieldUse::agreed>("weights_file", &RunSpec::weights_file),
    field<FieldUse::own>("hf_export", &RunSpec::hf_export),  // the writer's
    field<FieldUse::own>("device_label", &RunSpec::device_label),
    field<FieldUse::agreed>("catch_signals", &RunSpec::catch_signals),
    field<FieldUse::agreed>("report_to", &RunSpec::report_to),
    field<FieldUse::agreed>("logging_dir", &RunSpec::logging_dir),
    field<FieldUse::own>("start_details", &RunSpec::start_details),  // the writer's
    field<FieldUse::own>("hooks", &RunSpec::hooks),
};
static_assert(lists_every_field<RunSpec>(run_spec_fields),
              "run_spec_fields must list every field of RunSpec, with how the ranks use it");

/// What every rank of a run must have alike of `s`: each agreed field ("RunSpec::save_steps"),
/// then the entries of RunSpec::keys and RunSpec::agreed.
inline AgreedValues spec_values(const RunSpec& s) {
  AgreedValues v;
  for_agreed_fields(s, run_spec_fields, [&](std::string_view name, std::string text) {
    v.emplace_back("RunSpec::" + std::string(name), std::move(text));
  });
  for (const auto& k : s.keys) v.emplace_back(k.key, k.value);
  v.insert(v.end(), s.agreed.begin(), s.agreed.end());
  return v;
}

}  // namespace seqpar::inline v0

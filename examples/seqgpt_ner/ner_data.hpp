// The NER side of seqgpt_ner's data: the splits (CLUENER JSON or CoNLL BIO) and their label
// set, the tokenizer (the user's, or a character-level one built from the training text),
// the SeqGPT prompts of each record as examples cached in OUT/cache, run.json, and the
// sentences of predict. Classification and relation records are read here too (their task
// named by --task or recognised from the records); what differs by task after reading is in
// task_eval.cpp.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "options.hpp"
#include "seqpar/data/any_task.hpp"
#include "seqpar/data/examples.hpp"
#include "seqpar/io/tokenizer.hpp"
#include "seqpar/train/hf_model_dir.hpp"

namespace ner {

/// The splits of a run, their task and label set.
struct NerData {
  fs::path train_file, dev_file;
  seqpar::AnyRecords train, dev;
  std::vector<std::string> labels;
  seqpar::AnyTask task;    // the task and its labels (task.labels() == labels)
  std::string train_hash;  // content_hash of the training file: a resume must find it unchanged
};

/// The labels joined by commas, as --labels takes them.
std::string joined(const std::vector<std::string>& labels);

/// The file of split `name` in `dir`: name.jsonl, name.json, or a BIO file name.bio/.conll/.txt.
fs::path find_split(const fs::path& dir, const std::string& name);

/// Reads the train and dev splits of o.data_dir with the task (--task, else the training
/// records', refused with the record that contradicts a named one) and the label set
/// (--labels, else the training data's), printing what was read and skipped.
NerData read_ner_data(const Options& o);

/// The dev split `file` of `task`, its records kept whatever labels their gold names (a label
/// the task lacks is scored as missed, and counted).
seqpar::AnyRecords read_dev(const seqpar::AnyTask& task, const fs::path& file,
                            std::int64_t max_chars);

/// The tokenizer of a run: the user's file, or a character-level one built from the
/// training text, held as its content until the output folder may be written.
struct TokenizerChoice {
  fs::path file;      // the user's, or where the built one goes (OUT/tokenizer.json)
  std::string built;  // the built tokenizer's content; empty for the user's
  std::string id;     // content_hash of its tokenizer.json: a resume must find it unchanged
};
TokenizerChoice choose_tokenizer(const Options& o, const NerData& d, std::int64_t model_vocab);

/// Puts the run's tokenizer into the output folder as tokenizer.json (the built one, or a
/// copy of the user's), so that the folder holds what it needs (the writer, once the folder
/// is taken).
void place_tokenizer(const TokenizerChoice& t, const fs::path& out_dir);

/// Loads a tokenizer.json for a model of `model_vocab` rows.
seqpar::Tokenizer load_tokenizer(const fs::path& path, std::int64_t model_vocab);
/// The tokenizer a choice names: the user's file, or the built one from its content.
seqpar::Tokenizer load_tokenizer(const TokenizerChoice& t, std::int64_t model_vocab);

/// The checkpoint metadata key of the digest (content_hash) of the tokenizer a run trains with.
inline constexpr const char* tokenizer_key = "ner.tokenizer";

/// Throws unless the tokenizer checkpoint `checkpoint` (its metadata `meta`) records is
/// `tokenizer` (digest `tokenizer_id`): every load of a checkpoint (resume, eval, predict,
/// export) asks. A file that records none passes.
void check_checkpoint_tokenizer(const std::map<std::string, std::string>& meta,
                                const std::string& checkpoint, const fs::path& tokenizer,
                                const std::string& tokenizer_id);
/// The same for the metadata of weights file `checkpoint` (a safetensors file; others pass).
void check_checkpoint_tokenizer(const fs::path& checkpoint, const fs::path& tokenizer);

/// The special tokens of a tokenizer, for the transformers directory.
seqpar::HfSpecialTokens special_tokens(const seqpar::Tokenizer& tok);

/// The examples of a split: from the cache OUT/cache/<split>.tokens.safetensors when it was
/// made from the same inputs, else made in memory (nothing is written before the run takes
/// its folder: store_examples then writes them).
struct SplitExamples {
  std::string split, key;
  const char* format = "";
  seqpar::ExampleSet set;
  seqpar::ExampleReport report;
  bool made = false;  // made now, not read from the cache
};
SplitExamples split_examples(const Options& o, const std::string& split, const fs::path& source,
                             const seqpar::AnyRecords& d, const seqpar::AnyTask& task,
                             const seqpar::Tokenizer& tok, const std::string& tokenizer_id);

/// The options examples are made with (--max_length, --truncation).
seqpar::ExampleOptions example_options(const Options& o);

/// Writes examples made in memory as the split's cache (the writer, once the folder is taken).
void store_examples(const Options& o, const SplitExamples& e);

/// What a training run leaves for eval, predict and export: OUT/run.json, and the same
/// beside an exported model's config.json (model_task_file), so that the model directory
/// predicts alone. Files are named relative to the folder that holds it: a run folder or a
/// model directory can be copied or moved.
struct RunInfo {
  std::string model, plan;
  std::vector<std::string> labels;
  fs::path tokenizer, data_dir;  // read back absolute; data_dir empty in a model directory
  std::int64_t max_new_tokens = 0;
  std::int64_t num_beams = 0;     // the decoding the run evaluated with; 0: the model's default
  double repetition_penalty = 0;  // likewise
  std::string task = "ner";       // the name of the task trained
  nlohmann::json task_state;      // AnyTask::state(): the task without its training data
  nlohmann::json best;            // the best evaluation {step, metric, value}, where chosen

  /// The JSON text, its paths relative to `folder` where they lie inside it.
  std::string text(const fs::path& folder) const;
  void write(const fs::path& path) const;
  /// The `name` of `dir` (run.json, model_task_file); none when there is none.
  static std::optional<RunInfo> read(const fs::path& dir, const char* name = "run.json");
};

/// The file beside an exported model's config.json that says what it was trained for.
inline constexpr const char* model_task_file = "seqgpt_task.json";

/// A trained run's task: its labels, with what the training split of `data_dir` says of them
/// (the majority class, the relations' schema).
seqpar::AnyTask run_task(const std::string& task, const std::vector<std::string>& labels,
                         const fs::path& data_dir, std::int64_t max_chars);

/// predict's --input (JSON records keeping their ids, or one sentence a line), its unreadable
/// lines reported and skipped or stopping the run, as --on_bad_input says.
seqpar::TextDataset read_predict_input(const Options& o);

/// A prompt's tokens within --max_length: cut on the left (--truncation left), as SeqGPT's
/// inference truncates its prompts.
std::vector<std::int32_t> cut_prompt(const Options& o, std::vector<std::int32_t> prompt);

}  // namespace ner

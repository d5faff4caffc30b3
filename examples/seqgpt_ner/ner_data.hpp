// The NER side of seqgpt_ner's data: the splits (CLUENER JSON or CoNLL BIO) and their label
// set, the tokenizer (the user's, or a character-level one built from the training text),
// the SeqGPT prompts of each record as examples cached in OUT/cache, run.json, and the
// sentences of predict. A classification or relation task would add a file like this one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "options.hpp"
#include "seqpar/data/examples.hpp"
#include "seqpar/data/ner_record.hpp"
#include "seqpar/io/tokenizer.hpp"
#include "seqpar/train/hf_model_dir.hpp"

namespace ner {

/// The splits of a run and their label set.
struct NerData {
  fs::path train_file, dev_file;
  seqpar::NerDataset train, dev;
  std::vector<std::string> labels;
  std::string train_hash;  // content_hash of the training file: a resume must find it unchanged
};

/// The labels joined by commas, as --labels takes them.
std::string joined(const std::vector<std::string>& labels);

/// The file of split `name` in `dir`: name.jsonl, name.json, or a BIO file name.bio/.conll/.txt.
fs::path find_split(const fs::path& dir, const std::string& name);

/// Reads a split, CLUENER JSON or CoNLL BIO by its extension.
seqpar::NerDataset read_split(const fs::path& file, const seqpar::ReadOptions& ro);

/// Reads the train and dev splits of o.data_dir with the label set (--labels, else the
/// training data's), printing what was read and skipped.
NerData read_ner_data(const Options& o);

/// The tokenizer of a run: the user's file, or a character-level one built from the
/// training text, held as its content until the output folder may be written.
struct TokenizerChoice {
  fs::path file;      // the user's, or where the built one goes (OUT/tokenizer.json)
  std::string built;  // the built tokenizer's content; empty for the user's
  std::string id;     // content_hash of its tokenizer.json: a resume must find it unchanged
};
TokenizerChoice choose_tokenizer(const Options& o, const NerData& d, std::int64_t model_vocab);

/// Writes a built tokenizer into place (the writer, once the folder is taken).
void place_tokenizer(const TokenizerChoice& t);

/// Loads a tokenizer.json for a model of `model_vocab` rows.
seqpar::Tokenizer load_tokenizer(const fs::path& path, std::int64_t model_vocab);

/// The special tokens of a tokenizer, for the transformers directory.
seqpar::HfSpecialTokens special_tokens(const seqpar::Tokenizer& tok);

/// The examples of split `split` (its file `source`) through the cache
/// OUT/cache/<split>.tokens.safetensors (built and written when its key differs), printing a
/// line.
seqpar::ExampleSet cached_examples(const Options& o, const std::string& split,
                                   const fs::path& source, const seqpar::NerDataset& d,
                                   const std::vector<std::string>& labels,
                                   const seqpar::Tokenizer& tok, const std::string& tokenizer_id,
                                   seqpar::ExampleReport& report);

/// How many examples the cache of split `split` holds when it was made from `source` with
/// the tokenizer `tokenizer_id` and this run's settings; none when it was not (absent, or
/// another key). Reads the cache's header alone: nothing is built or written.
std::optional<std::int64_t> cached_example_count(const Options& o, const std::string& split,
                                                 const fs::path& source,
                                                 const std::vector<std::string>& labels,
                                                 const std::string& tokenizer_id);

/// What a training run leaves for eval, predict and export: OUT/run.json.
struct RunInfo {
  std::string model, plan;
  std::vector<std::string> labels;
  fs::path tokenizer, data_dir;  // absolute
  std::int64_t max_new_tokens = 0;

  void write(const fs::path& path) const;
  /// The run.json of `dir`; none when there is none.
  static std::optional<RunInfo> read(const fs::path& dir);
};

/// The sentences of --text and --input (CLUENER JSON, or one sentence per line).
std::vector<std::string> predict_texts(const Options& o);

/// A prompt's tokens within --max_length: cut on the left (--truncation left), as SeqGPT's
/// inference truncates its prompts.
std::vector<std::int32_t> cut_prompt(const Options& o, std::vector<std::int32_t> prompt);

}  // namespace ner

// The data side of seqgpt_ner: finding and reading the splits, the tokenizer, cached
// examples, run.json and the metrics file.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "options.hpp"
#include "seqpar/core/arena.hpp"
#include "seqpar/data/char_tokenizer.hpp"
#include "seqpar/data/cluener.hpp"
#include "seqpar/data/conll.hpp"
#include "seqpar/data/examples.hpp"
#include "seqpar/data/token_cache.hpp"
#include "seqpar/io/tokenizer.hpp"
#include "train_controls.hpp"

namespace ner {

namespace fs = std::filesystem;
using seqpar::NerDataset;

/// The file of split `name` in `dir`: name.jsonl, name.json, or a BIO file name.bio/.conll/.txt.
inline fs::path find_split(const fs::path& dir, const std::string& name) {
  for (const char* ext : {".jsonl", ".json", ".bio", ".conll", ".txt"})
    if (fs::exists(dir / (name + ext))) return dir / (name + ext);
  seqpar::detail::fail(dir.string(), ": no ", name, ".jsonl, ", name, ".json or ", name,
                       ".bio file (CLUENER JSON or CoNLL BIO); pass --data-dir");
}

inline NerDataset read_split(const fs::path& file, const seqpar::ReadOptions& ro) {
  const auto ext = file.extension();
  return ext == ".json" || ext == ".jsonl" ? seqpar::read_cluener(file, ro)
                                           : seqpar::read_conll(file, ro);
}

inline void print_report(const seqpar::ReadReport& r) {
  std::printf("  %s\n", r.summary().c_str());
  for (const auto& p : r.problems) std::printf("    skipped: %s\n", p.c_str());
}

/// Appends one JSON object per line to OUT/metrics.jsonl. A line that cannot be written
/// (a full disk, a folder in the way) ends the run with an Error: metrics are not lost
/// silently.
class MetricsLog {
 public:
  explicit MetricsLog(const fs::path& path) : path_(path) {}
  /// Adds "time" (seconds since the epoch) and appends the line (training_setup.cpp).
  void append(nlohmann::json j);
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

/// A step's peak bytes per arena category, by the categories' names (metrics.jsonl).
inline nlohmann::json memory_peaks_json(const seqpar::MemoryStats& m) {
  nlohmann::json j = nlohmann::json::object();
  for (std::size_t k = 0; k < seqpar::memory_kinds; ++k)
    j[seqpar::memory_name(static_cast<seqpar::Memory>(k))] = m.peak[k];
  return j;
}

/// What a training run leaves for eval and predict: OUT/run.json.
struct RunInfo {
  std::string model, plan;
  std::vector<std::string> labels;
  fs::path tokenizer;
  std::int64_t max_new_tokens = 0;

  void write(const fs::path& path) const {
    const nlohmann::json j{{"model", model},
                           {"plan", plan},
                           {"labels", labels},
                           {"tokenizer", fs::absolute(tokenizer).string()},
                           {"max_new_tokens", max_new_tokens}};
    seqpar::detail::write_file_atomic(path, j.dump(2) + "\n");
  }
  static std::optional<RunInfo> read(const fs::path& path) {
    if (!fs::exists(path)) return std::nullopt;
    std::ifstream f(path);
    const auto j = nlohmann::json::parse(f, nullptr, false);
    SEQPAR_CHECK(j.is_object(), path.string(), ": not a run.json written by seqgpt_ner");
    RunInfo r;
    r.model = j.value("model", "");
    r.plan = j.value("plan", "");
    r.labels = j.value("labels", std::vector<std::string>{});
    r.tokenizer = j.value("tokenizer", "");
    r.max_new_tokens = j.value("max_new_tokens", std::int64_t{0});
    return r;
  }
};

/// The model type: --model; for eval and predict without it, the trained run's (run.json);
/// else seqgpt560m when --weights is given (SeqGPT-560M's files), else tiny.
inline std::string resolve_model(const Options& o) {
  if (!o.model.empty()) return o.model;
  if (o.command != "train" && o.weights.empty())
    if (const auto info = RunInfo::read(o.out_dir / "run.json"); info && !info->model.empty())
      return info->model;
  return o.weights.empty() ? "tiny" : "seqgpt560m";
}

/// The tokenizer: --tokenizer, or a character-level one built from `texts` into OUT (with
/// `build` false: the one already built there, by the process that writes OUT).
inline fs::path tokenizer_path(const Options& o, const std::vector<std::string>& texts,
                               const std::vector<std::string>& labels, std::int64_t max_vocab,
                               bool build = true) {
  if (!o.tokenizer.empty()) return o.tokenizer;
  if (!build) return o.out_dir / "tokenizer.json";
  seqpar::CharTokenizerOptions co;
  co.max_vocab = max_vocab;
  co.words = seqpar::seqgpt_prompt_words();
  co.words.insert(co.words.end(), labels.begin(), labels.end());
  const fs::path path = o.out_dir / "tokenizer.json";
  seqpar::write_char_tokenizer(path, texts, co);
  return path;
}

inline seqpar::Tokenizer load_tokenizer(const fs::path& path, std::int64_t model_vocab) {
  seqpar::Tokenizer tok = seqpar::Tokenizer::from_file(path);
  SEQPAR_CHECK(static_cast<std::int64_t>(tok.vocab_size()) <= model_vocab, path.string(), " has ",
               tok.vocab_size(), " ids; the model's vocabulary holds ", model_vocab,
               " (use --model seqgpt560m for BLOOM's tokenizer)");
  SEQPAR_CHECK(tok.eos_id() >= 0 && tok.pad_id() >= 0, path.string(),
               ": the tokenizer needs </s> and <pad> tokens");
  return tok;
}

/// Examples of `records` through the cache OUT/cache/<split>.tokens.safetensors.
inline seqpar::ExampleSet cached_examples(const Options& o, const std::string& split,
                                          const fs::path& source, const NerDataset& d,
                                          const std::vector<std::string>& labels,
                                          const seqpar::Tokenizer& tok,
                                          const std::string& tokenizer_id,
                                          seqpar::ExampleReport& report) {
  seqpar::NerExampleOptions eo;
  eo.labels = labels;
  eo.max_tokens = o.max_tokens;
  eo.too_long = too_long(o);
  seqpar::CacheStatus st;
  const auto t0 = std::chrono::steady_clock::now();
  auto ex = seqpar::cached_ner_examples(o.out_dir / "cache" / (split + ".tokens.safetensors"),
                                        seqpar::file_hash(source), d.records, eo, tok, tokenizer_id,
                                        &st, &report);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "  %s: %lld examples, %lld tokens (prompt <= %lld, answer <= %lld), %lld too long "
      "(--max-length %lld: %lld prompts cut on the left, %lld skipped); cache %s (%s, %.2f s)\n",
      split.c_str(), static_cast<long long>(report.examples), static_cast<long long>(report.tokens),
      static_cast<long long>(report.max_prompt_tokens),
      static_cast<long long>(report.max_answer_tokens),
      static_cast<long long>(report.truncated + report.skipped_too_long),
      static_cast<long long>(o.max_tokens), static_cast<long long>(report.truncated),
      static_cast<long long>(report.skipped_too_long), st.hit ? "hit" : "built", st.reason.c_str(),
      s);
  return ex;
}

/// The sentences of --text and --input (CLUENER JSON, or one sentence per line).
inline std::vector<std::string> predict_texts(const Options& o) {
  std::vector<std::string> texts = o.texts;
  if (!o.input.empty()) {
    const auto ext = o.input.extension();
    if (ext == ".json" || ext == ".jsonl") {
      seqpar::ReadOptions ro;
      ro.max_chars = o.max_chars;
      for (auto& r : seqpar::read_cluener(o.input, ro).records) texts.push_back(std::move(r.text));
    } else {
      std::ifstream f(o.input);
      SEQPAR_CHECK(f.good(), o.input.string(), ": cannot be opened");
      for (std::string line; std::getline(f, line);) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (!line.empty()) texts.push_back(line);
      }
    }
  }
  SEQPAR_CHECK(!texts.empty(), "predict: no sentences; give --text \"...\" or --input FILE");
  return texts;
}

}  // namespace ner

// The NER side of seqgpt_ner's data (ner_data.hpp).
#include "ner_data.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>

#include "seqpar/data/char_tokenizer.hpp"
#include "seqpar/data/cluener.hpp"
#include "seqpar/data/conll.hpp"
#include "seqpar/data/prompt.hpp"
#include "seqpar/data/token_cache.hpp"
#include "seqpar/io/safetensors.hpp"

namespace ner {

namespace {
void print_report(const seqpar::ReadReport& r) {
  std::printf("  %s\n", r.summary().c_str());
  for (const auto& p : r.problems) std::printf("    skipped: %s\n", p.c_str());
}
}  // namespace

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + v[i];
  return s;
}

fs::path find_split(const fs::path& dir, const std::string& name) {
  for (const char* ext : {".jsonl", ".json", ".bio", ".conll", ".txt"})
    if (fs::exists(dir / (name + ext))) return dir / (name + ext);
  seqpar::detail::fail(dir.string(), ": no ", name, ".jsonl, ", name, ".json or ", name,
                       ".bio file (CLUENER JSON or CoNLL BIO); pass --data_dir");
}

seqpar::NerDataset read_split(const fs::path& file, const seqpar::ReadOptions& ro) {
  const auto ext = file.extension();
  return ext == ".json" || ext == ".jsonl" ? seqpar::read_cluener(file, ro)
                                           : seqpar::read_conll(file, ro);
}

NerData read_ner_data(const Options& o) {
  NerData d;
  d.train_file = find_split(o.data_dir, "train");
  d.dev_file = find_split(o.data_dir, "dev");
  std::printf("data\n");
  seqpar::ReadOptions ro;
  ro.labels = o.labels;
  ro.max_chars = o.max_chars;
  d.train = read_split(d.train_file, ro);
  d.labels = o.labels.empty() ? d.train.labels() : o.labels;
  SEQPAR_CHECK(!d.labels.empty(), d.train_file.string(),
               ": no labelled mention; cannot choose a label set");
  ro.labels = d.labels;
  d.dev = read_split(d.dev_file, ro);
  print_report(d.train.report);
  print_report(d.dev.report);
  std::printf("  labels (%zu, %zu prompt(s) per sentence): %s\n", d.labels.size(),
              seqpar::chunk_labels(d.labels).size(), joined(d.labels).c_str());
  d.train_hash = seqpar::file_hash(d.train_file);
  return d;
}

TokenizerChoice choose_tokenizer(const Options& o, const NerData& d, std::int64_t model_vocab) {
  if (!o.tokenizer.empty()) return {o.tokenizer, {}, seqpar::file_hash(o.tokenizer)};
  seqpar::CharTokenizerOptions co;
  co.max_vocab = model_vocab;
  co.words = seqpar::seqgpt_prompt_words();
  co.words.insert(co.words.end(), d.labels.begin(), d.labels.end());
  std::vector<std::string> texts;
  for (const auto& r : d.train.records) texts.push_back(r.text);
  // What write_char_tokenizer writes, byte for byte: its hash is the file's.
  std::string content = seqpar::char_tokenizer_json(texts, co).dump(1) + "\n";
  const std::string id = seqpar::content_hash(content);
  return {o.out_dir / "tokenizer.json", std::move(content), id};
}

void place_tokenizer(const TokenizerChoice& t) {
  if (!t.built.empty()) seqpar::detail::write_file_atomic(t.file, t.built);
}

seqpar::Tokenizer load_tokenizer(const fs::path& path, std::int64_t model_vocab) {
  seqpar::Tokenizer tok = seqpar::Tokenizer::from_file(path);
  SEQPAR_CHECK(static_cast<std::int64_t>(tok.vocab_size()) <= model_vocab, path.string(), " has ",
               tok.vocab_size(), " ids; the model's vocabulary holds ", model_vocab,
               " (use --model seqgpt560m for BLOOM's tokenizer)");
  SEQPAR_CHECK(tok.eos_id() >= 0 && tok.pad_id() >= 0, path.string(),
               ": the tokenizer needs </s> and <pad> tokens");
  return tok;
}

seqpar::HfSpecialTokens special_tokens(const seqpar::Tokenizer& tok) {
  const auto token = [&tok](std::int32_t id) {
    return seqpar::HfSpecialTokens::Token{id >= 0 ? std::string(tok.id_to_token(id)) : "", id};
  };
  return {token(tok.bos_id()), token(tok.eos_id()), token(tok.pad_id()), token(tok.unk_id())};
}

namespace {
seqpar::NerExampleOptions example_options(const Options& o,
                                          const std::vector<std::string>& labels) {
  seqpar::NerExampleOptions eo;
  eo.labels = labels;
  eo.max_tokens = o.max_length;
  eo.too_long = o.truncation == "skip" ? seqpar::TooLong::skip : seqpar::TooLong::cut_prompt;
  return eo;
}
fs::path cache_path(const Options& o, const std::string& split) {
  return o.out_dir / "cache" / (split + ".tokens.safetensors");
}
}  // namespace

std::optional<std::int64_t> cached_example_count(const Options& o, const std::string& split,
                                                 const fs::path& source,
                                                 const std::vector<std::string>& labels,
                                                 const std::string& tokenizer_id) {
  const fs::path path = cache_path(o, split);
  if (!fs::exists(path)) return std::nullopt;
  try {
    const seqpar::SafetensorsFile f(path);
    const auto& meta = f.metadata();
    const auto key = meta.find("key"), examples = meta.find("examples");
    if (key == meta.end() || examples == meta.end() ||
        key->second != seqpar::example_cache_key(seqpar::file_hash(source), tokenizer_id,
                                                 example_options(o, labels)))
      return std::nullopt;
    return seqpar::detail::parse_field<std::int64_t>(examples->second, path.string(),
                                                     "metadata examples");
  } catch (const seqpar::Error&) {
    return std::nullopt;  // unreadable: rebuilt once the folder is taken
  }
}

seqpar::ExampleSet cached_examples(const Options& o, const std::string& split,
                                   const fs::path& source, const seqpar::NerDataset& d,
                                   const std::vector<std::string>& labels,
                                   const seqpar::Tokenizer& tok, const std::string& tokenizer_id,
                                   seqpar::ExampleReport& report) {
  seqpar::CacheStatus st;
  const auto t0 = std::chrono::steady_clock::now();
  auto ex =
      seqpar::cached_ner_examples(cache_path(o, split), seqpar::file_hash(source), d.records,
                                  example_options(o, labels), tok, tokenizer_id, &st, &report);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "  %s: %lld examples, %lld tokens (prompt <= %lld, answer <= %lld), %lld too long "
      "(--max_length %lld: %lld prompts cut on the left, %lld skipped); cache %s (%s, %.2f s)\n",
      split.c_str(), static_cast<long long>(report.examples), static_cast<long long>(report.tokens),
      static_cast<long long>(report.max_prompt_tokens),
      static_cast<long long>(report.max_answer_tokens),
      static_cast<long long>(report.truncated + report.skipped_too_long),
      static_cast<long long>(o.max_length), static_cast<long long>(report.truncated),
      static_cast<long long>(report.skipped_too_long), st.hit ? "hit" : "built", st.reason.c_str(),
      s);
  return ex;
}

void RunInfo::write(const fs::path& path) const {
  const nlohmann::json j{{"model", model},
                         {"plan", plan},
                         {"labels", labels},
                         {"tokenizer", fs::absolute(tokenizer).string()},
                         {"data_dir", fs::absolute(data_dir).string()},
                         {"max_new_tokens", max_new_tokens}};
  seqpar::detail::write_file_atomic(path, j.dump(2) + "\n");
}

std::optional<RunInfo> RunInfo::read(const fs::path& dir) {
  const fs::path path = dir / "run.json";
  if (!fs::exists(path)) return std::nullopt;
  std::ifstream f(path);
  const auto j = nlohmann::json::parse(f, nullptr, false);
  SEQPAR_CHECK(j.is_object(), path.string(), ": not a run.json written by seqgpt_ner");
  RunInfo r;
  r.model = j.value("model", "");
  r.plan = j.value("plan", "");
  r.labels = j.value("labels", std::vector<std::string>{});
  r.tokenizer = j.value("tokenizer", "");
  r.data_dir = j.value("data_dir", "");
  r.max_new_tokens = j.value("max_new_tokens", std::int64_t{0});
  return r;
}

std::vector<std::string> predict_texts(const Options& o) {
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

std::vector<std::int32_t> cut_prompt(const Options& o, std::vector<std::int32_t> prompt) {
  if (o.truncation != "left" || static_cast<std::int64_t>(prompt.size()) <= o.max_length)
    return prompt;
  const auto tail = seqpar::prompt_tail(prompt, o.max_length);
  return {tail.begin(), tail.end()};
}

}  // namespace ner

// The NER side of seqgpt_ner's data (ner_data.hpp).
#include "ner_data.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <tuple>

#include "seqpar/data/char_tokenizer.hpp"
#include "seqpar/data/cluener.hpp"
#include "seqpar/data/conll.hpp"
#include "seqpar/data/json_records.hpp"
#include "seqpar/data/prompt.hpp"
#include "seqpar/data/token_cache.hpp"
#include "seqpar/io/detail/json_kind.hpp"
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

namespace {
bool json_file(const fs::path& f) { return f.extension() == ".json" || f.extension() == ".jsonl"; }
}  // namespace

NerData read_ner_data(const Options& o) {
  NerData d;
  d.train_file = find_split(o.data_dir, "train");
  d.dev_file = find_split(o.data_dir, "dev");
  std::printf("data\n");
  seqpar::ReadOptions ro;
  ro.labels = o.labels;
  ro.max_chars = o.max_chars;
  // The task: --task, else the shape of the training records (a JSON file of any task; CoNLL
  // BIO is NER's). A record of another shape than the named task's is refused by its line.
  std::string name = o.task;
  if (name.empty() && json_file(d.train_file))
    name = seqpar::recognise_json_task(d.train_file, seqpar::builtin_json_shapes, ro);
  if (name.empty()) name = "ner";
  std::tie(d.task, d.train) =
      seqpar::StandardTasks::train(name, d.train_file, ro, o.labels, "--task");
  d.labels = d.task.labels();
  d.dev = read_dev(d.task, d.dev_file, o.max_chars);
  print_report(d.train.report());
  print_report(d.dev.report());
  std::printf("%s", d.task.overview().c_str());
  d.train_hash = seqpar::file_hash(d.train_file);
  return d;
}

seqpar::AnyRecords read_dev(const seqpar::AnyTask& task, const fs::path& file,
                            std::int64_t max_chars) {
  seqpar::ReadOptions ro;  // no label set: gold the model cannot know is scored as missed
  ro.max_chars = max_chars;
  return task.read(file, ro);
}

TokenizerChoice choose_tokenizer(const Options& o, const NerData& d, std::int64_t model_vocab) {
  if (!o.tokenizer.empty()) return {o.tokenizer, {}, seqpar::file_hash(o.tokenizer)};
  seqpar::CharTokenizerOptions co;
  co.max_vocab = model_vocab;
  co.words = seqpar::seqgpt_prompt_words();
  const auto words = d.task.prompt_words();  // the words of its prompts and answers
  co.words.insert(co.words.end(), words.begin(), words.end());
  std::vector<std::string> texts;
  for (const auto& r : d.train.texts()) texts.push_back(r.text);
  // What write_char_tokenizer writes, byte for byte: its hash is the file's.
  std::string content = seqpar::char_tokenizer_json(texts, co).dump(1) + "\n";
  const std::string id = seqpar::content_hash(content);
  return {o.out_dir / "tokenizer.json", std::move(content), id};
}

void place_tokenizer(const TokenizerChoice& t, const fs::path& out_dir) {
  const fs::path placed = out_dir / "tokenizer.json";
  std::error_code ec;
  if (!t.built.empty())
    seqpar::detail::write_file_atomic(t.file, t.built);
  else if (!fs::equivalent(t.file, placed, ec))
    seqpar::detail::copy_file_atomic(t.file, placed);
}

namespace {
seqpar::Tokenizer checked_tokenizer(seqpar::Tokenizer tok, const fs::path& path,
                                    std::int64_t model_vocab) {
  SEQPAR_CHECK(static_cast<std::int64_t>(tok.vocab_size()) <= model_vocab, path.string(), " has ",
               tok.vocab_size(), " ids; the model's vocabulary holds ", model_vocab,
               " (use --model seqgpt560m for BLOOM's tokenizer)");
  SEQPAR_CHECK(tok.eos_id() >= 0 && tok.pad_id() >= 0, path.string(),
               ": the tokenizer needs </s> and <pad> tokens");
  return tok;
}
}  // namespace

seqpar::Tokenizer load_tokenizer(const fs::path& path, std::int64_t model_vocab) {
  return checked_tokenizer(seqpar::Tokenizer::from_file(path), path, model_vocab);
}

seqpar::Tokenizer load_tokenizer(const TokenizerChoice& t, std::int64_t model_vocab) {
  return t.built.empty() ? load_tokenizer(t.file, model_vocab)
                         : checked_tokenizer(seqpar::Tokenizer::from_json(t.built, t.file.string()),
                                             t.file, model_vocab);
}

void check_checkpoint_tokenizer(const std::map<std::string, std::string>& meta,
                                const std::string& checkpoint, const fs::path& tokenizer,
                                const std::string& tokenizer_id) {
  const auto it = meta.find(tokenizer_key);
  SEQPAR_CHECK(it == meta.end() || it->second == tokenizer_id, checkpoint,
               " was trained with the tokenizer of digest ", it->second, ", but ",
               tokenizer.string(), " (digest ", tokenizer_id,
               ") is the one given; its ids mean other text: pass --tokenizer with the run's "
               "tokenizer.json");
}

void check_checkpoint_tokenizer(const fs::path& checkpoint, const fs::path& tokenizer) {
  if (checkpoint.extension() != ".safetensors") return;  // only seqgpt_ner's record one
  const seqpar::SafetensorsFile f(checkpoint);
  if (f.metadata().contains(tokenizer_key))
    check_checkpoint_tokenizer(f.metadata(), checkpoint.string(), tokenizer,
                               seqpar::file_hash(tokenizer));
}

seqpar::HfSpecialTokens special_tokens(const seqpar::Tokenizer& tok) {
  const auto token = [&tok](std::int32_t id) {
    return seqpar::HfSpecialTokens::Token{id >= 0 ? std::string(tok.id_to_token(id)) : "", id};
  };
  return {token(tok.bos_id()), token(tok.eos_id()), token(tok.pad_id()), token(tok.unk_id())};
}

seqpar::ExampleOptions example_options(const Options& o) {
  return {o.max_length,
          o.truncation == "skip" ? seqpar::TooLong::skip : seqpar::TooLong::cut_prompt};
}

namespace {
fs::path cache_path(const Options& o, const std::string& split) {
  return o.out_dir / "cache" / (split + ".tokens.safetensors");
}
}  // namespace

SplitExamples split_examples(const Options& o, const std::string& split, const fs::path& source,
                             const seqpar::AnyRecords& d, const seqpar::AnyTask& task,
                             const seqpar::Tokenizer& tok, const std::string& tokenizer_id) {
  const auto t0 = std::chrono::steady_clock::now();
  SplitExamples e;
  e.split = split;
  e.key = task.cache_key(seqpar::file_hash(source), tokenizer_id, example_options(o));
  e.format = seqpar::examples_format;
  seqpar::CacheStatus st;
  if (auto hit = seqpar::find_cached_examples(cache_path(o, split), e.key, &st, &e.report)) {
    e.set = std::move(*hit);
  } else {
    e.set = task.make_examples(d, example_options(o), tok, &e.report);
    e.made = true;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto& r = e.report;
  std::printf(
      "  %s: %lld examples, %lld tokens (prompt <= %lld, answer <= %lld), %lld too long "
      "(--max_length %lld: %lld prompts cut on the left, %lld skipped); cache %s (%s, %.2f s)\n",
      split.c_str(), static_cast<long long>(r.examples), static_cast<long long>(r.tokens),
      static_cast<long long>(r.max_prompt_tokens), static_cast<long long>(r.max_answer_tokens),
      static_cast<long long>(r.truncated + r.skipped_too_long),
      static_cast<long long>(o.max_length), static_cast<long long>(r.truncated),
      static_cast<long long>(r.skipped_too_long), e.made ? "built" : "hit", st.reason.c_str(), s);
  return e;
}

void store_examples(const Options& o, const SplitExamples& e) {
  if (e.made)
    seqpar::save_cached_examples(cache_path(o, e.split), e.key, e.format, e.set, e.report);
}

std::string RunInfo::text(const fs::path& folder) const {
  // A path inside `folder` relative to it; any other absolute.
  const auto named = [&](const fs::path& p) -> std::string {
    if (p.empty()) return {};
    const fs::path a = fs::weakly_canonical(fs::absolute(p));
    const fs::path rel = a.lexically_relative(fs::weakly_canonical(fs::absolute(folder)));
    return !rel.empty() && *rel.begin() != ".." ? rel.string() : a.string();
  };
  nlohmann::json j{{"model", model},
                   {"plan", plan},
                   {"task", task},
                   {"labels", labels},
                   {"tokenizer", named(tokenizer)},
                   {"data_dir", named(data_dir)},
                   {"max_new_tokens", max_new_tokens},
                   {"num_beams", num_beams},
                   {"repetition_penalty", repetition_penalty}};
  if (!task_state.is_null()) j["task_state"] = task_state;
  if (!best.is_null()) j["best"] = best;
  return j.dump(2) + "\n";
}

void RunInfo::write(const fs::path& path) const {
  seqpar::detail::write_file_atomic(path, text(path.parent_path()));
}

namespace {
// Field `key` of run.json `j` as a T (absent: `fallback`); one of another type is refused
// naming the file and the field.
template <class T>
T run_field(const nlohmann::json& j, const char* key, T fallback, const fs::path& path,
            const char* expected) {
  const auto it = j.find(key);
  if (it == j.end()) return fallback;
  try {
    return it->template get<T>();
  } catch (const nlohmann::json::exception&) {
    seqpar::detail::fail(path.string(), ": field '", key, "' is ", seqpar::detail::json_kind(*it),
                         " (", it->dump(), "); expected ", expected,
                         " (written by seqgpt_ner train)");
  }
}
}  // namespace

std::optional<RunInfo> RunInfo::read(const fs::path& dir, const char* name) {
  const fs::path path = dir / name;
  if (!fs::exists(path)) return std::nullopt;
  std::ifstream f(path);
  const auto j = nlohmann::json::parse(f, nullptr, false);
  SEQPAR_CHECK(j.is_object(), path.string(), ": not a ", name, " written by seqgpt_ner");
  // A path relative to the folder that holds the file.
  const auto located = [&](const std::string& p) {
    return p.empty() || fs::path(p).is_absolute() ? fs::path(p) : dir / p;
  };
  RunInfo r;
  r.model = run_field<std::string>(j, "model", "", path, "a string");
  r.plan = run_field<std::string>(j, "plan", "", path, "a string");
  r.task = run_field<std::string>(j, "task", "ner", path, "a string");
  r.labels = run_field<std::vector<std::string>>(j, "labels", {}, path, "a list of strings");
  r.tokenizer = located(run_field<std::string>(j, "tokenizer", "", path, "a path (a string)"));
  r.data_dir = located(run_field<std::string>(j, "data_dir", "", path, "a path (a string)"));
  r.max_new_tokens = run_field<std::int64_t>(j, "max_new_tokens", 0, path, "an integer");
  r.num_beams = run_field<std::int64_t>(j, "num_beams", 0, path, "an integer");
  r.repetition_penalty = run_field<double>(j, "repetition_penalty", 0.0, path, "a number");
  r.task_state = run_field<nlohmann::json>(j, "task_state", nullptr, path, "an object");
  r.best = run_field<nlohmann::json>(j, "best", nullptr, path, "an object");
  return r;
}

seqpar::AnyTask run_task(const std::string& task, const std::vector<std::string>& labels,
                         const fs::path& data_dir, std::int64_t max_chars) {
  SEQPAR_CHECK(!data_dir.empty(), "a ", task,
               " run needs its training data (its labels' schema, its majority class): "
               "pass --data_dir");
  seqpar::ReadOptions ro;
  ro.labels = labels;
  ro.max_chars = max_chars;
  return seqpar::StandardTasks::train(task, find_split(data_dir, "train"), ro, labels,
                                      "run.json's task")
      .first;
}

seqpar::TextDataset read_predict_input(const Options& o) {
  // A line that cannot be read (not UTF-8, too long) is named by file and line, and
  // skipped or stops the run (--on_bad_input): the readers' ReadOptions::on_bad.
  seqpar::ReadOptions ro;
  ro.max_chars = o.max_chars;
  ro.on_bad = o.on_bad_input == "stop" ? seqpar::OnBadRecord::fail : seqpar::OnBadRecord::skip;
  ro.keep_problems = std::numeric_limits<std::size_t>::max();  // every skipped line is said
  const auto ext = o.input.extension();
  seqpar::TextDataset d = ext == ".json" || ext == ".jsonl" ? seqpar::read_texts(o.input, ro)
                                                            : seqpar::read_text_lines(o.input, ro);
  for (const auto& problem : d.report.problems)
    std::fprintf(stderr, "seqgpt_ner: skipped %s\n", problem.c_str());
  if (d.report.skipped > 0) std::fprintf(stderr, "seqgpt_ner: %s\n", d.report.summary().c_str());
  return d;
}

std::vector<std::int32_t> cut_prompt(const Options& o, std::vector<std::int32_t> prompt) {
  if (o.truncation != "left" || static_cast<std::int64_t>(prompt.size()) <= o.max_length)
    return prompt;
  const auto tail = seqpar::prompt_tail(prompt, o.max_length);
  return {tail.begin(), tail.end()};
}

}  // namespace ner

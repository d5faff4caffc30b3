#pragma once
// A pre-tokenized cache of examples on disk: one safetensors file of flat columns (I64
// offsets, I32 tokens, prompt lengths, record and chunk indices), memory-mapped when read.
// Its metadata holds a key made of a hash of the source file, the tokenizer's identity
// and the example settings; a cache whose key differs (or that does not read back) is
// rebuilt, so a second run with the same inputs skips tokenization.

#include <concepts>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/core/rng.hpp"
#include "seqpar/data/examples.hpp"
#include "seqpar/io/safetensors.hpp"

namespace seqpar::inline v0 {

/// A 64-bit hash of `bytes` (FNV-1a with a mixing finaliser) as 16 hex digits, with the
/// length: enough to tell inputs apart, not a cryptographic digest.
inline std::string content_hash(std::string_view bytes) {
  const std::uint64_t h = detail::splitmix64(detail::fnv1a(bytes) ^ bytes.size());
  std::ostringstream os;
  os << std::hex;
  os.width(16);
  os.fill('0');
  os << h << '-' << std::dec << bytes.size();
  return os.str();
}

/// content_hash of a whole file; throws naming the file when it cannot be read.
inline std::string file_hash(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  SEQPAR_CHECK(in.good(), path.string(), ": cannot be opened for reading");
  std::ostringstream os;
  os << in.rdbuf();
  return content_hash(os.str());
}

/// What happened to a cache file.
struct CacheStatus {
  bool hit = false;  // read from the file; tokenization skipped
  std::filesystem::path path;
  std::string reason;  // why it was (re)built: "no file", "key differs", "unreadable: ..."
};

/// The key of examples made from a source (by its hash) with a tokenizer and settings.
inline std::string example_cache_key(const std::string& source_hash,
                                     const std::string& tokenizer_id,
                                     const NerExampleOptions& options) {
  return "seqpar-ner-examples-v1|source=" + source_hash + "|tokenizer=" + tokenizer_id + "|" +
         options.describe();
}
/// The key of a task's examples: `task` is the task's describe().
inline std::string example_cache_key(const std::string& source_hash,
                                     const std::string& tokenizer_id, const std::string& task,
                                     const ExampleOptions& options) {
  return "seqpar-examples-v2|source=" + source_hash + "|tokenizer=" + tokenizer_id + "|" + task +
         options.describe();
}

namespace detail {
template <class T>
std::span<const std::byte> column_bytes(std::span<const T> s) {
  return std::as_bytes(s);
}

template <class T>
std::span<const T> column_view(const SafetensorsFile& f, const char* name, DType want) {
  const TensorEntry& e = f.at(name);
  SEQPAR_CHECK(e.dtype == want && e.shape.size() == 1, f.path().string(), ": column '", name,
               "' is ", dtype_name(e.dtype), " of rank ", e.shape.size(), "; expected a vector of ",
               dtype_name(want));
  SEQPAR_CHECK(reinterpret_cast<std::uintptr_t>(e.bytes.data()) % alignof(T) == 0,
               f.path().string(), ": column '", name, "' is not aligned for reading in place");
  return {reinterpret_cast<const T*>(e.bytes.data()), static_cast<std::size_t>(e.shape[0])};
}
}  // namespace detail

/// Writes `examples` as a cache file with `metadata` (the key under "key"); atomic.
inline void save_examples(const std::filesystem::path& path, const ExampleSet& examples,
                          const std::map<std::string, std::string>& metadata) {
  const auto& c = examples.columns();
  const auto n = static_cast<std::int64_t>(examples.size());
  // The I64 column first: every column then starts aligned in the mapping.
  const std::vector<TensorToWrite> tensors{
      {"offsets", DType::i64, {n + 1}, detail::column_bytes(c.offsets)},
      {"tokens",
       DType::i32,
       {static_cast<std::int64_t>(c.tokens.size())},
       detail::column_bytes(c.tokens)},
      {"prompt_lengths", DType::i32, {n}, detail::column_bytes(c.prompt_lengths)},
      {"records", DType::i32, {n}, detail::column_bytes(c.records)},
      {"chunks", DType::i32, {n}, detail::column_bytes(c.chunks)},
  };
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  write_safetensors(path, tensors, metadata);
}

/// Opens a cache file memory-mapped; throws naming the file when it is not one.
inline ExampleSet load_examples(const std::filesystem::path& path,
                                std::map<std::string, std::string>* metadata = nullptr) {
  auto f = std::make_shared<const SafetensorsFile>(path);
  const ExampleSet::Columns c{detail::column_view<std::int32_t>(*f, "tokens", DType::i32),
                              detail::column_view<std::int64_t>(*f, "offsets", DType::i64),
                              detail::column_view<std::int32_t>(*f, "prompt_lengths", DType::i32),
                              detail::column_view<std::int32_t>(*f, "records", DType::i32),
                              detail::column_view<std::int32_t>(*f, "chunks", DType::i32)};
  if (metadata) *metadata = f->metadata();
  return ExampleSet(c, std::shared_ptr<const void>(f), true, path.string());
}

/// The examples under `key` in the cache file at `path`; none when there is no such file,
/// it is unreadable or its key differs (`status` says which). `report` is restored on a hit.
inline std::optional<ExampleSet> find_cached_examples(const std::filesystem::path& path,
                                                      const std::string& key,
                                                      CacheStatus* status = nullptr,
                                                      ExampleReport* report = nullptr) {
  CacheStatus st{false, path, "no file"};
  const auto number = [&path](const std::map<std::string, std::string>& m,
                              const char* k) -> std::int64_t {
    const auto it = m.find(k);
    return it == m.end() ? 0
                         : detail::parse_field<std::int64_t>(it->second, path.string(),
                                                             std::string("metadata ") + k);
  };
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    try {
      std::map<std::string, std::string> meta;
      ExampleSet cached = load_examples(path, &meta);
      const auto it = meta.find("key");
      if (it != meta.end() && it->second == key) {
        if (report)
          *report = {number(meta, "examples"),
                     number(meta, "skipped_too_long"),
                     number(meta, "tokens"),
                     number(meta, "max_prompt_tokens"),
                     number(meta, "max_answer_tokens"),
                     number(meta, "truncated")};
        if (status) *status = {true, path, "key matches"};
        return cached;
      }
      st.reason = "key differs";
    } catch (const std::exception& e) {
      st.reason = std::string("unreadable: ") + e.what();
    }
  }
  if (status) *status = st;
  return std::nullopt;
}

/// Writes `examples` (made with `report`) as the cache file at `path` under `key`, in
/// `format` (the writer's name for its examples' layout); atomic.
inline void save_cached_examples(const std::filesystem::path& path, const std::string& key,
                                 const char* format, const ExampleSet& examples,
                                 const ExampleReport& rep) {
  save_examples(path, examples,
                {{"key", key},
                 {"format", format},
                 {"examples", std::to_string(rep.examples)},
                 {"skipped_too_long", std::to_string(rep.skipped_too_long)},
                 {"tokens", std::to_string(rep.tokens)},
                 {"max_prompt_tokens", std::to_string(rep.max_prompt_tokens)},
                 {"max_answer_tokens", std::to_string(rep.max_answer_tokens)},
                 {"truncated", std::to_string(rep.truncated)}});
}

/// The format names of the two example layouts, as their cache files record them.
inline constexpr const char* examples_format = "seqpar-examples-v2";
inline constexpr const char* ner_examples_format = "seqpar-ner-examples-v1";

namespace detail {
/// The examples under `key`, from the cache file at `path` when its key matches, else made
/// by `build` and written there.
template <class Build>
ExampleSet cached_examples_keyed(const std::filesystem::path& path, const std::string& key,
                                 const char* format, Build&& build, CacheStatus* status,
                                 ExampleReport* report) {
  CacheStatus st;
  if (auto hit = find_cached_examples(path, key, &st, report)) {
    if (status) *status = st;
    return std::move(*hit);
  }
  ExampleReport rep;
  save_cached_examples(path, key, format, build(&rep), rep);
  if (report) *report = rep;
  if (status) *status = st;
  // Read back mapped, so a first run works from the same bytes as every later one.
  return load_examples(path);
}
}  // namespace detail

/// The examples of records of a task that `task` describes (read from a source whose
/// content_hash is `source_hash`), from the cache file at `path` when its key matches, else
/// built from `prompts()` (every record's prompts) with `tok` and written there.
/// `tokenizer_id` names the tokenizer (file_hash of its tokenizer.json). `report` is
/// restored from the cache on a hit.
template <TextEncoder Enc, std::invocable Prompts>
ExampleSet cached_prompt_examples(const std::filesystem::path& path, const std::string& source_hash,
                                  const std::string& task, Prompts prompts,
                                  const ExampleOptions& options, const Enc& tok,
                                  const std::string& tokenizer_id, CacheStatus* status = nullptr,
                                  ExampleReport* report = nullptr) {
  return detail::cached_examples_keyed(
      path, example_cache_key(source_hash, tokenizer_id, task, options), examples_format,
      [&](ExampleReport* rep) {
        const std::vector<std::vector<TaskPrompt>> p = prompts();
        return make_examples(std::span<const std::vector<TaskPrompt>>(p), options, tok, rep);
      },
      status, report);
}

/// The examples of `records` of `task` through the cache at `path` (cached_prompt_examples).
template <NluTask T, TextEncoder Enc>
ExampleSet cached_examples(const std::filesystem::path& path, const std::string& source_hash,
                           const T& task, std::span<const typename T::Record> records,
                           const ExampleOptions& options, const Enc& tok,
                           const std::string& tokenizer_id, CacheStatus* status = nullptr,
                           ExampleReport* report = nullptr) {
  return cached_prompt_examples(
      path, source_hash, task.describe(), [&] { return task_prompts(task, records); }, options, tok,
      tokenizer_id, status, report);
}

/// cached_examples for NER records with NerExampleOptions (their key as before).
template <TextEncoder Enc>
ExampleSet cached_ner_examples(const std::filesystem::path& path, const std::string& source_hash,
                               std::span<const NerRecord> records, const NerExampleOptions& options,
                               const Enc& tok, const std::string& tokenizer_id,
                               CacheStatus* status = nullptr, ExampleReport* report = nullptr) {
  return detail::cached_examples_keyed(
      path, example_cache_key(source_hash, tokenizer_id, options), ner_examples_format,
      [&](ExampleReport* rep) { return make_ner_examples(records, options, tok, rep); }, status,
      report);
}

}  // namespace seqpar::inline v0

#pragma once
// Tokenized SeqGPT examples: for each record and each of its prompts (its task's prompts: NER's
// label chunks, the class prompt, the relations' two steps), the prompt's tokens followed by
// the answer's tokens and the end-of-sequence token. Training puts the loss on the answer and
// eos only (the prompt's labels are -100); evaluation feeds the prompt and compares the
// generated answer with the record's annotation.

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/data/ner_record.hpp"
#include "seqpar/data/ner_task.hpp"
#include "seqpar/data/prompt.hpp"
#include "seqpar/data/task.hpp"

namespace seqpar::inline v0 {

/// Turns UTF-8 text into token ids and names its end-of-sequence and padding ids
/// (seqpar::Tokenizer is one).
template <class T>
concept TextEncoder = requires(const T& t, std::string_view s) {
  { t.encode(s) } -> std::convertible_to<std::vector<std::int32_t>>;
  { t.eos_id() } -> std::convertible_to<std::int32_t>;
  { t.pad_id() } -> std::convertible_to<std::int32_t>;
};

/// What becomes of an example longer than NerExampleOptions::max_tokens.
enum class TooLong : std::uint8_t {
  skip,       // left out, counted
  cut_prompt  // the prompt loses its first tokens, as SeqGPT's inference truncates on the left;
              // an answer (with eos) that alone leaves no room for a prompt token is skipped
};

/// How records of any task become examples. Everything here, and the task's describe(), is
/// part of a token cache's key.
struct ExampleOptions {
  std::int64_t max_tokens = 1024;  // the most tokens of an example: prompt, answer and eos
  TooLong too_long = TooLong::skip;

  std::string describe() const {
    std::ostringstream os;
    os << ";max_tokens=" << max_tokens
       << ";too_long=" << (too_long == TooLong::cut_prompt ? "cut_prompt" : "skip");
    return os.str();
  }
};

/// How NER records become examples: ExampleOptions for the NER task, by its fields.
struct NerExampleOptions {
  std::vector<std::string> labels;  // in prompt order, cut into chunks
  std::size_t labels_per_prompt = seqpar::labels_per_prompt;
  std::int64_t max_tokens = 1024;  // the most tokens of an example: prompt, answer and eos
  TooLong too_long = TooLong::skip;

  NerTask task() const { return NerTask(labels, labels_per_prompt); }
  ExampleOptions example_options() const { return {max_tokens, too_long}; }
  std::string describe() const {
    std::ostringstream os;
    os << "labels=";
    for (std::size_t i = 0; i < labels.size(); ++i) os << (i ? "," : "") << labels[i];
    os << ";labels_per_prompt=" << labels_per_prompt << ";max_tokens=" << max_tokens;
    if (too_long == TooLong::cut_prompt) os << ";too_long=cut_prompt";  // skip: keys as before
    return os.str();
  }
};

/// What building examples did.
struct ExampleReport {
  std::int64_t examples = 0;
  std::int64_t skipped_too_long = 0;
  std::int64_t tokens = 0;             // in the kept examples
  std::int64_t max_prompt_tokens = 0;  // after any cut
  std::int64_t max_answer_tokens = 0;  // answer + eos
  std::int64_t truncated = 0;          // kept with their prompt cut on the left
};

/// The last `max_tokens` tokens of a prompt (all of it when it fits): a prompt cut on the
/// left, as SeqGPT's inference truncates (its tokenizer's truncation side is left).
inline std::span<const std::int32_t> prompt_tail(std::span<const std::int32_t> prompt,
                                                 std::int64_t max_tokens) {
  const auto keep = static_cast<std::size_t>(std::max<std::int64_t>(max_tokens, 0));
  return prompt.size() <= keep ? prompt : prompt.last(keep);
}

/// Tokenized examples in flat columns: example i is tokens[offsets[i], offsets[i + 1]), of
/// which the first prompt_lengths[i] are the prompt and the rest the answer and eos; it
/// comes from record records[i], and is its prompt chunks[i] (TaskPrompt::part: for NER, the
/// label chunk). The columns live in memory or in a memory-mapped cache file
/// (token_cache.hpp); copies share them.
class ExampleSet {
 public:
  /// Views of the columns.
  struct Columns {
    std::span<const std::int32_t> tokens;
    std::span<const std::int64_t> offsets;  // size() + 1 entries, offsets[0] == 0
    std::span<const std::int32_t> prompt_lengths, records, chunks;
  };

  ExampleSet() = default;
  /// Columns that `keep` keeps alive (owned vectors or a mapped file); checks them.
  ExampleSet(Columns c, std::shared_ptr<const void> keep, bool mapped, const std::string& what)
      : c_(c), keep_(std::move(keep)), mapped_(mapped) {
    const std::size_t n = c.prompt_lengths.size();
    SEQPAR_CHECK(c.offsets.size() == n + 1 && c.records.size() == n && c.chunks.size() == n, what,
                 ": example columns disagree in length (offsets ", c.offsets.size(),
                 ", prompt_lengths ", n, ", records ", c.records.size(), ", chunks ",
                 c.chunks.size(), ")");
    SEQPAR_CHECK(c.offsets[0] == 0 && c.offsets[n] == static_cast<std::int64_t>(c.tokens.size()),
                 what, ": offsets do not span the ", c.tokens.size(), " tokens");
    for (std::size_t i = 0; i < n; ++i)
      SEQPAR_CHECK(c.offsets[i + 1] > c.offsets[i] && c.prompt_lengths[i] > 0 &&
                       c.prompt_lengths[i] < c.offsets[i + 1] - c.offsets[i],
                   what, ": example ", i, " has offsets [", c.offsets[i], ", ", c.offsets[i + 1],
                   ") and prompt length ", c.prompt_lengths[i],
                   "; expected a prompt and an answer");
  }

  std::size_t size() const { return c_.prompt_lengths.size(); }
  bool empty() const { return size() == 0; }
  bool mapped() const { return mapped_; }
  const Columns& columns() const { return c_; }

  std::span<const std::int32_t> tokens(std::size_t i) const {
    return c_.tokens.subspan(static_cast<std::size_t>(c_.offsets[i]),
                             static_cast<std::size_t>(length(i)));
  }
  std::span<const std::int32_t> prompt(std::size_t i) const {
    return tokens(i).first(prompt_length(i));
  }
  /// The answer's tokens and the eos.
  std::span<const std::int32_t> answer(std::size_t i) const {
    return tokens(i).subspan(prompt_length(i));
  }
  std::int64_t length(std::size_t i) const { return c_.offsets[i + 1] - c_.offsets[i]; }
  std::size_t prompt_length(std::size_t i) const {
    return static_cast<std::size_t>(c_.prompt_lengths[i]);
  }
  std::int32_t record(std::size_t i) const { return c_.records[i]; }
  std::int32_t chunk(std::size_t i) const { return c_.chunks[i]; }
  std::vector<std::int64_t> lengths() const {
    std::vector<std::int64_t> out(size());
    for (std::size_t i = 0; i < size(); ++i) out[i] = length(i);
    return out;
  }

 private:
  Columns c_;
  std::shared_ptr<const void> keep_;
  bool mapped_ = false;
};

/// Collects examples in memory.
class ExampleSetBuilder {
 public:
  void add(std::span<const std::int32_t> prompt, std::span<const std::int32_t> answer_and_eos,
           std::int32_t record, std::int32_t chunk) {
    SEQPAR_CHECK(!prompt.empty() && !answer_and_eos.empty(), "example of record ", record,
                 ", chunk ", chunk, ": the prompt and the answer must both have tokens");
    auto& s = *store_;
    s.tokens.insert(s.tokens.end(), prompt.begin(), prompt.end());
    s.tokens.insert(s.tokens.end(), answer_and_eos.begin(), answer_and_eos.end());
    s.offsets.push_back(static_cast<std::int64_t>(s.tokens.size()));
    s.prompt_lengths.push_back(static_cast<std::int32_t>(prompt.size()));
    s.records.push_back(record);
    s.chunks.push_back(chunk);
  }

  ExampleSet finish(const std::string& what = "examples") {
    auto s = std::move(store_);
    store_ = std::make_shared<Store>();
    const ExampleSet::Columns c{s->tokens, s->offsets, s->prompt_lengths, s->records, s->chunks};
    return ExampleSet(c, std::shared_ptr<const void>(std::move(s)), false, what);
  }

 private:
  struct Store {
    std::vector<std::int32_t> tokens;
    std::vector<std::int64_t> offsets{0};
    std::vector<std::int32_t> prompt_lengths, records, chunks;
  };
  std::shared_ptr<Store> store_ = std::make_shared<Store>();
};

namespace detail {
/// The prompts a cut on the left would leave without text: how many, the first, and the
/// max_tokens that would keep a token of each text, or each prompt whole.
struct LostInputs {
  std::int64_t count = 0, need = 0, whole = 0;
  std::size_t record = 0;
  std::int32_t part = 0;
  void add(std::size_t r, std::int32_t p, std::int64_t need_tokens, std::int64_t whole_tokens) {
    if (count++ == 0) record = r, part = p;
    need = std::max(need, need_tokens);
    whole = std::max(whole, whole_tokens);
  }
};
}  // namespace detail

/// Examples of records given by their prompts (`prompts[r]`: record r's, with answers): one
/// per record and prompt, in record order; an example's chunk is its prompt's part. Examples longer
/// than options.max_tokens are skipped or have their prompt cut on the left (options.too_long;
/// counted in `report`). Throws for a record without annotation, for max_tokens under 2 (a prompt
/// token and eos), when records were given but max_tokens leaves none of their examples, and
/// when a cut would leave a prompt no text (its label list alone fills max_tokens).
template <TextEncoder Enc>
ExampleSet make_examples(std::span<const std::vector<TaskPrompt>> prompts,
                         const ExampleOptions& options, const Enc& tok,
                         ExampleReport* report = nullptr) {
  const auto& records = prompts;
  SEQPAR_CHECK(options.max_tokens >= 2, "make_examples: max_tokens is ", options.max_tokens,
               "; expected at least 2 (a prompt token, and the end-of-sequence token)");
  const std::int32_t eos = tok.eos_id();
  SEQPAR_CHECK(eos >= 0, "make_examples: the tokenizer has no end-of-sequence token (</s>)");
  ExampleReport rep;
  ExampleSetBuilder b;
  std::int64_t fewest = -1;  // the fewest tokens a skipped example needed
  detail::LostInputs lost;   // prompts whose cut would leave no text
  for (std::size_t r = 0; r < records.size(); ++r) {
    for (const TaskPrompt& p : prompts[r]) {
      const auto full = tok.encode(p.prompt);
      auto answer = tok.encode(p.answer);
      answer.push_back(eos);
      const auto room = options.max_tokens - static_cast<std::int64_t>(answer.size());
      const bool fits = static_cast<std::int64_t>(full.size()) <= room;
      if (!fits && options.too_long == TooLong::cut_prompt && room >= 1) {
        const auto labels =
            static_cast<std::int64_t>(tok.encode(prompt_labels_part(p.prompt)).size());
        if (labels + 1 > room) {
          lost.add(r, p.part, labels + 1 + static_cast<std::int64_t>(answer.size()),
                   static_cast<std::int64_t>(full.size() + answer.size()));
          continue;
        }
      }
      if (!fits && (options.too_long == TooLong::skip || room < 1)) {
        ++rep.skipped_too_long;
        const auto need = static_cast<std::int64_t>(
            answer.size() + (options.too_long == TooLong::skip ? full.size() : 1));
        fewest = fewest < 0 ? need : std::min(fewest, need);
        continue;
      }
      const auto prompt = prompt_tail(full, room);
      rep.truncated += fits ? 0 : 1;
      const auto len = static_cast<std::int64_t>(prompt.size() + answer.size());
      b.add(prompt, answer, static_cast<std::int32_t>(r), p.part);
      ++rep.examples;
      rep.tokens += len;
      rep.max_prompt_tokens =
          std::max<std::int64_t>(rep.max_prompt_tokens, static_cast<std::int64_t>(prompt.size()));
      rep.max_answer_tokens =
          std::max<std::int64_t>(rep.max_answer_tokens, static_cast<std::int64_t>(answer.size()));
    }
  }
  if (report) *report = rep;
  SEQPAR_CHECK(lost.count == 0, "make_examples: ", lost.count, " prompt(s) (the first: record ",
               lost.record, ", prompt ", lost.part, ") cannot hold their text and label list in ",
               "ExampleOptions::max_tokens ", options.max_tokens,
               ": cut on the left they would lose all their text (and labels); "
               "ExampleOptions::max_tokens ",
               lost.need, " keeps each one's label list, answer and a token of its text, ",
               lost.whole, " every prompt whole; or split the label set across prompts");
  SEQPAR_CHECK(rep.examples > 0 || rep.skipped_too_long == 0, "make_examples: max_tokens ",
               options.max_tokens, " leaves none of the ", rep.skipped_too_long, " examples of ",
               records.size(), " records (the shortest needs ", fewest, " tokens",
               options.too_long == TooLong::skip ? "" : ": its answer, eos and a prompt token",
               "); expected a limit that keeps some");
  return b.finish();
}

/// The prompts of every record of `task`, in order (what make_examples tokenizes).
template <NluTask T>
std::vector<std::vector<TaskPrompt>> task_prompts(const T& task,
                                                  std::span<const typename T::Record> records) {
  std::vector<std::vector<TaskPrompt>> out;
  out.reserve(records.size());
  for (const auto& r : records) out.push_back(task.prompts(r));
  return out;
}

/// Examples of `records` of `task`: one per record and prompt (task.prompts).
template <NluTask T, TextEncoder Enc>
ExampleSet make_examples(const T& task, std::span<const typename T::Record> records,
                         const ExampleOptions& options, const Enc& tok,
                         ExampleReport* report = nullptr) {
  const auto prompts = task_prompts(task, records);
  return make_examples(std::span<const std::vector<TaskPrompt>>(prompts), options, tok, report);
}

/// Examples of NER records: one per record and chunk of options.labels (make_examples).
template <TextEncoder Enc>
ExampleSet make_ner_examples(std::span<const NerRecord> records, const NerExampleOptions& options,
                             const Enc& tok, ExampleReport* report = nullptr) {
  SEQPAR_CHECK(!options.labels.empty(), "make_ner_examples: NerExampleOptions::labels is empty");
  return make_examples(options.task(), records, options.example_options(), tok, report);
}

}  // namespace seqpar::inline v0

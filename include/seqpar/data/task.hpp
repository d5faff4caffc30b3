#pragma once
// NluTask: what a SeqGPT task is (docs/tasks.md). A task type reads its records, says what
// trains them (a record's prompts with their answers), asks a model and reads its answers
// back into predictions, scores them and writes them; each task has its own record,
// prediction and score types. NerTask, ClassificationTask and RelationTask are the
// library's; AnyTask erases the choice where a program makes it at run time.

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <ranges>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/data/prompt.hpp"
#include "seqpar/data/record.hpp"

namespace seqpar::inline v0 {

/// One prompt of a record and the answer that trains it. `part` says which prompt of the
/// record it is (NER's label chunk; 0 for the first step of the others).
struct TaskPrompt {
  std::string prompt, answer;
  std::int32_t part = 0;
};

/// A model as a task's predict asks it: the answer to each prompt (one call per step, with
/// every record's prompts of that step).
using AnswerFn = std::function<std::vector<std::string>(std::span<const std::string> prompts)>;

/// What every task's prediction holds: the record it is of, the answers to its prompts and
/// what was garbled in them.
struct PredictionBase {
  RecordId id;
  std::string text;
  std::vector<std::string> answers;  // the answer to each of the record's prompts
  AnswerErrors errors;
};

/// What every task's score counts besides its own measures. A record whose gold names a
/// label the task lacks is scored all the same (that gold counts as missed) and counted in
/// `unknown_gold`.
struct ScoreBase {
  std::int64_t records = 0, prompts = 0, unknown_gold = 0;
  AnswerErrors errors;

  /// "5 records (1 with gold labels the task lacks), 5 prompts, garbled answers ..." (the
  /// end of a task's summary).
  std::string counts() const {
    return std::to_string(records) + " records" +
           (unknown_gold > 0 ? " (" + std::to_string(unknown_gold) +
                                   " with gold labels the task lacks, counted as missed)"
                             : std::string()) +
           ", " + std::to_string(prompts) + " prompts, garbled answers " + errors.summary();
  }
};

/// A task's score: one line, its details (per-label lines) and a JSON object (one line).
template <class S>
concept TaskScore = std::derived_from<S, ScoreBase> && requires(const S& s) {
  { s.summary() } -> std::convertible_to<std::string>;
  { s.headline() } -> std::convertible_to<std::string>;
  { s.details() } -> std::convertible_to<std::string>;
  { s.json() } -> std::convertible_to<std::string>;
};

/// A SeqGPT task: its name, its record, prediction and score types, and
///   T::read(file, options)      the records of a file in one of the task's formats
///   T::of(train, labels)        the task a training set defines (labels empty: the set's own)
///   t.prompts(record)           the prompts that train an annotated record, with answers
///   t.predict(texts, answer)    a model's answers read back, one prediction a record
///   t.score(gold, predictions)  the score of predictions against annotated records
///   t.prediction_json(p)        a prediction as one JSON line
/// and what a program shows and keys caches with (labels, describe, overview, prompt_words,
/// max_prompts).
template <class T>
concept NluTask = std::copy_constructible<T> && std::derived_from<typename T::Record, TextRecord> &&
    std::derived_from<typename T::Prediction, PredictionBase> && TaskScore<typename T::Score> &&
    requires(const T& t, const std::filesystem::path& path, const ReadOptions& options,
             const Dataset<typename T::Record>& train, std::vector<std::string> labels,
             const typename T::Record& r, std::span<const TextRecord> texts, const AnswerFn& answer,
             std::span<const typename T::Record> gold,
             std::span<const typename T::Prediction> predictions, const typename T::Prediction& p) {
  { T::name } -> std::convertible_to<std::string_view>;
  { T::read(path, options) } -> std::same_as<Dataset<typename T::Record>>;
  { T::of(train, labels) } -> std::same_as<T>;
  { t.labels() } -> std::convertible_to<std::vector<std::string>>;
  { t.describe() } -> std::convertible_to<std::string>;
  { t.overview() } -> std::convertible_to<std::string>;
  { t.prompt_words() } -> std::convertible_to<std::vector<std::string>>;
  { t.max_prompts() } -> std::convertible_to<std::int64_t>;
  { t.prompts(r) } -> std::same_as<std::vector<TaskPrompt>>;
  { t.predict(texts, answer) } -> std::same_as<std::vector<typename T::Prediction>>;
  { t.score(gold, predictions) } -> std::same_as<typename T::Score>;
  { t.prediction_json(p) } -> std::convertible_to<std::string>;
};

/// The texts, ids and lines of records of any task (what predict reads).
template <std::ranges::input_range Records>
requires std::derived_from<std::ranges::range_value_t<Records>, TextRecord> std::vector<TextRecord>
texts_of(const Records& records) {
  return {std::ranges::begin(records), std::ranges::end(records)};
}

namespace detail {

/// The answers of `answer` to `prompts`, checked to be one a prompt.
inline std::vector<std::string> ask(const AnswerFn& answer,
                                    const std::vector<std::string>& prompts) {
  if (prompts.empty()) return {};
  std::vector<std::string> a = answer(prompts);
  SEQPAR_CHECK(a.size() == prompts.size(), "predict: the model gave ", a.size(), " answers to ",
               prompts.size(), " prompts");
  return a;
}

/// Predictions of `records` with their ids and texts, not yet answered.
inline std::vector<PredictionBase> unanswered(std::span<const TextRecord> records) {
  std::vector<PredictionBase> out(records.size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    out[i].id = records[i].id;
    out[i].text = records[i].text;
  }
  return out;
}

/// Throws unless prediction `i` is of annotated record `g`; counts it into `s`, and into
/// ScoreBase::unknown_gold when its gold names a label not in `labels` (the task's).
template <std::derived_from<TextRecord> R>
void count_scored(ScoreBase& s, const R& g, const PredictionBase& p, std::size_t i,
                  std::span<const std::string> labels) {
  SEQPAR_CHECK(g.id == p.id && g.text == p.text, "score: prediction ", i, " is of record ",
               p.id.text(), ", not of record ", g.id.text());
  SEQPAR_CHECK(g.labelled, "score: record ", g.id.text(), " (line ", g.line,
               ") has no annotation to score against");
  ++s.records;
  s.prompts += static_cast<std::int64_t>(p.answers.size());
  s.errors += p.errors;
  for (const auto& l : record_labels(g))
    if (std::find(labels.begin(), labels.end(), l) == labels.end()) {
      ++s.unknown_gold;
      break;
    }
}

/// Throws unless there is one prediction a gold record.
inline void check_scored_sizes(std::size_t gold, std::size_t predictions) {
  SEQPAR_CHECK(gold == predictions, "score: ", predictions, " predictions for ", gold, " records");
}

/// Throws unless a record to train has its annotation.
inline void require_annotation(const TextRecord& r) {
  SEQPAR_CHECK(r.labelled, "record ", r.id.text(), " (line ", r.line,
               ") has no annotation; training needs annotated records");
}

}  // namespace detail

/// The labels a task of training set `train` is trained on: `labels`, else the set's own
/// (`none` says why there are none); throws unless the set is annotated and each label is one
/// a prompt can list.
template <class R>
std::vector<std::string> training_labels(const Dataset<R>& train, std::vector<std::string> labels,
                                         std::string_view none) {
  if (labels.empty()) labels = train.labels();
  SEQPAR_CHECK(!labels.empty(), train.report.file, ": ", none);
  bool annotated = false;
  for (const auto& r : train.records) annotated = annotated || r.labelled;
  SEQPAR_CHECK(annotated, train.report.file,
               ": holds text only; a task is trained on annotated records");
  for (const auto& l : labels)
    SEQPAR_CHECK(detail::label_problem(l).empty(), train.report.file, ": label '", l, "' ",
                 detail::label_problem(l));
  return labels;
}

}  // namespace seqpar::inline v0

#pragma once
// The three tasks on one path (docs/tasks.md). A TaskSpec says what a model is trained for
// (the task, its labels and what the training set says of them); training_prompts gives a
// record's prompts with the answers that train them; predict asks a model (any function
// from prompts to answers: batched_answers makes one from a tokenizer and a decoder) and
// reads the answers back into predictions with character offsets; score_predictions scores
// them against the gold records, counting garbled answers.
//
//   task            prompts of a record                    the answer
//   ner             抽取, one per chunk of 6 labels         "label: span，span" lines
//   classification  分类 over every label                   one label
//   relation        分类 over the relations and 无关系,     relations joined by '，'
//                   then 抽取 "R的主体，R的客体" for each     "R的主体: heads" "R的客体: tails"
//                   relation R the first answer names

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <functional>
#include <iomanip>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "seqpar/core/batch.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/data/batching.hpp"
#include "seqpar/data/classification.hpp"
#include "seqpar/data/examples.hpp"
#include "seqpar/data/metrics.hpp"
#include "seqpar/data/prompt.hpp"
#include "seqpar/data/record.hpp"
#include "seqpar/data/relation.hpp"
#include "seqpar/data/spans.hpp"
#include "seqpar/data/task_spec.hpp"

namespace seqpar::inline v0 {

/// A mention a NER answer names, and where it is in the text (none: the text does not hold
/// it; counted in AnswerErrors::span_not_in_text).
struct PredictedMention {
  std::string label, text;
  std::optional<CharSpan> span;
};

/// What the model answered for one record, read back.
struct Prediction {
  RecordId id;
  std::string text;
  std::vector<std::string> answers;        // the answer to each of the record's prompts
  std::vector<PredictedMention> entities;  // ner: in answer order
  std::string label;                       // classification: empty when garbled
  std::vector<RelationTriple> relations;   // relation: canonical triples with their spans
  AnswerErrors errors;
};

/// A model as predict asks it: the answer to each prompt (one call per step, with every
/// record's prompts of that step).
using AnswerFn = std::function<std::vector<std::string>(std::span<const std::string> prompts)>;

namespace detail {
inline std::vector<std::string> ask(const AnswerFn& answer,
                                    const std::vector<std::string>& prompts) {
  if (prompts.empty()) return {};
  std::vector<std::string> a = answer(prompts);
  SEQPAR_CHECK(a.size() == prompts.size(), "predict: the model gave ", a.size(), " answers to ",
               prompts.size(), " prompts");
  return a;
}

// NER: the mentions of every chunk's answer, placed in the text all together.
inline void read_ner_answers(const TaskSpec& spec, Prediction& p) {
  const auto chunks = chunk_labels(spec.labels, spec.labels_per_prompt);
  std::vector<std::string> strings;
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    if (trim_answer(p.answers[c]).empty()) {
      ++p.errors.empty;
      continue;
    }
    const ParsedAnswer a = parse_answer(p.answers[c], chunks[c]);
    p.errors.malformed += a.bad_lines;
    p.errors.unknown_label += a.unknown_labels;
    for (const auto& m : a.mentions) {
      p.entities.push_back({m.label, m.text, std::nullopt});
      strings.push_back(m.text);
    }
  }
  const auto spans = place_spans(p.text, strings);
  for (std::size_t i = 0; i < spans.size(); ++i) {
    p.entities[i].span = spans[i];
    p.errors.span_not_in_text += !spans[i];
  }
}

// Relations: the pairs of each relation's answer as canonical triples; each distinct head
// or tail placed once, every triple naming it sharing its span.
inline void read_relation_pairs(const RelationSchema& s, const std::string& relation,
                                const std::string& answer, Prediction& p) {
  const RelationPairs a = parse_relation_answer(answer, relation);
  p.errors += a.errors;
  std::set<Triple> seen;
  for (const auto& t : p.relations) seen.insert(triple_of(t));
  for (const auto& [h, t] : a.pairs) {
    RelationTriple c = s.canonical(p.text, {h, relation, t, std::nullopt, std::nullopt});
    if (seen.insert(triple_of(c)).second) p.relations.push_back(std::move(c));
  }
}

inline void place_relation_entities(Prediction& p) {
  std::vector<std::string> entities;
  std::map<std::string, std::size_t> index;  // entity -> its place in `entities`
  for (const auto& t : p.relations)
    for (const std::string* e : {&t.head, &t.tail})
      if (index.try_emplace(*e, entities.size()).second) entities.push_back(*e);
  const auto spans = place_spans(p.text, entities);
  for (const auto& s : spans) p.errors.span_not_in_text += !s;
  for (auto& t : p.relations) {
    t.head_span = spans[index.at(t.head)];
    t.tail_span = spans[index.at(t.tail)];
  }
}
}  // namespace detail

/// Asks `answer` the prompts of every record and reads the answers back. NER and
/// classification take one step (one call); relations two: the first answers say which
/// relations each text states, the second ask for their heads and tails. Garbled answers
/// are counted in each prediction's errors, never taken for labels.
inline std::vector<Prediction> predict(const TaskSpec& spec, std::span<const TextRecord> records,
                                       const AnswerFn& answer) {
  std::vector<Prediction> out(records.size());
  std::vector<std::string> prompts;
  const auto chunks = chunk_labels(spec.labels, spec.labels_per_prompt);
  for (const auto& r : records) {
    if (spec.task == NluTask::ner)
      for (const auto& c : chunks) prompts.push_back(seqgpt_prompt(r.text, Task::extraction, c));
    else if (spec.task == NluTask::classification)
      prompts.push_back(classification_prompt(r.text, spec.labels));
    else
      prompts.push_back(relation_types_prompt(r.text, spec.relations));
  }
  const std::vector<std::string> first = detail::ask(answer, prompts);
  const std::size_t per_record = spec.task == NluTask::ner ? chunks.size() : 1;
  std::vector<std::pair<std::size_t, std::string>> second;  // (record, relation)
  for (std::size_t i = 0; i < records.size(); ++i) {
    Prediction& p = out[i];
    p.id = records[i].id;
    p.text = records[i].text;
    p.answers.assign(first.begin() + static_cast<std::ptrdiff_t>(i * per_record),
                     first.begin() + static_cast<std::ptrdiff_t>((i + 1) * per_record));
    if (spec.task == NluTask::ner) {
      detail::read_ner_answers(spec, p);
    } else if (spec.task == NluTask::classification) {
      const ClassAnswer a = parse_class_answer(p.answers[0], spec.labels);
      p.label = a.label;
      p.errors += a.errors;
    } else {
      const RelationTypes a = parse_relation_types(p.answers[0], spec.relations);
      p.errors += a.errors;
      for (const auto& rel : a.relations) second.emplace_back(i, rel);
    }
  }
  if (spec.task != NluTask::relation) return out;
  prompts.clear();
  for (const auto& [i, rel] : second) prompts.push_back(relation_prompt(records[i].text, rel));
  const std::vector<std::string> answers = detail::ask(answer, prompts);
  for (std::size_t k = 0; k < second.size(); ++k) {
    Prediction& p = out[second[k].first];
    p.answers.push_back(answers[k]);
    detail::read_relation_pairs(spec.relations, second[k].second, answers[k], p);
  }
  for (auto& p : out) detail::place_relation_entities(p);
  return out;
}

/// Scores of predictions against their gold records, by task.
struct TaskScore {
  NluTask task = NluTask::ner;
  std::int64_t records = 0, prompts = 0;
  AnswerErrors errors;
  NerScore ner;                  // ner: mention-level micro P/R/F1
  ClassificationScore classes;   // classification
  ClassificationScore baseline;  // classification: the majority class answered every time
  std::string majority_label;    // classification: that class
  RelationScore relations;       // relation: triple-level P/R/F1

  /// One line: the task's scores, the baseline's, the garbled answers.
  std::string summary() const {
    std::ostringstream os;
    os << nlu_task_name(task) << ": ";
    if (task == NluTask::ner) os << ner.summary();
    if (task == NluTask::classification)
      os << classes.summary() << "; majority class '" << majority_label << "' "
         << baseline.summary();
    if (task == NluTask::relation) os << "triples " << relations.summary();
    os << "; " << records << " records, " << prompts << " prompts, garbled answers "
       << errors.summary();
    return os.str();
  }
};

/// Scores `predictions` (predict's, in the order of `gold`) against `gold`: NER mentions as
/// (label, text) multisets (docs/ner.md, "Metric"), classes (with the spec's majority class
/// as the baseline), canonical triples as sets. Throws when the two lists do not match.
inline TaskScore score_predictions(const TaskSpec& spec, std::span<const TextRecord> gold,
                                   std::span<const Prediction> predictions) {
  SEQPAR_CHECK(gold.size() == predictions.size(), "score_predictions: ", predictions.size(),
               " predictions for ", gold.size(), " records");
  TaskScore s;
  s.task = spec.task;
  s.majority_label = spec.majority_label;
  for (std::size_t i = 0; i < gold.size(); ++i) {
    const TextRecord& g = gold[i];
    const Prediction& p = predictions[i];
    SEQPAR_CHECK(g.id == p.id && g.text == p.text, "score_predictions: prediction ", i,
                 " is of record ", p.id.text(), ", not of record ", g.id.text());
    SEQPAR_CHECK(g.labelled, "score_predictions: record ", g.id.text(), " (line ", g.line,
                 ") has no annotation to score against");
    ++s.records;
    s.prompts += static_cast<std::int64_t>(p.answers.size());
    s.errors += p.errors;
    if (spec.task == NluTask::ner) {
      std::vector<NerMention> predicted;
      for (const auto& m : p.entities) predicted.push_back({m.label, m.text});
      s.ner.add(predicted, gold_mentions(g, spec.labels));
    } else if (spec.task == NluTask::classification) {
      s.classes.add(p.label, g.label);
      if (!spec.majority_label.empty()) s.baseline.add(spec.majority_label, g.label);
    } else {
      std::vector<Triple> predicted, wanted;
      for (const auto& t : p.relations) predicted.push_back(triple_of(t));
      for (const auto& t : spec.relations.canonical_relations(g.text, g.relations))
        wanted.push_back(triple_of(t));
      s.relations.add(predicted, wanted);
    }
  }
  return s;
}

/// Turns UTF-8 text into tokens and back (seqpar::Tokenizer is one).
template <class T>
concept TextCodec = TextEncoder<T> && requires(const T& t, std::span<const std::int32_t> ids) {
  { t.decode(ids, true) } -> std::convertible_to<std::string>;
};

/// An AnswerFn over a model: each prompt encoded with `tok` and cut to its last
/// `max_prompt_tokens` tokens (SeqGPT's inference truncates on the left; 0: no limit), the
/// prompts batched `rows` at a time, longest first, left-padded with tok's pad id, and each
/// row's new tokens (as `generate` returns them for a batch, without the eos) decoded without
/// special tokens. `tok` must outlive the function.
template <TextCodec Codec, class Generate>
requires std::invocable<Generate&, const Batch&> AnswerFn batched_answers(
    const Codec& tok, Generate generate, std::int64_t rows, std::int64_t max_prompt_tokens) {
  SEQPAR_CHECK(rows > 0, "batched_answers: rows must be positive (got ", rows, ")");
  return [&tok, generate = std::move(generate), rows,
          max_prompt_tokens](std::span<const std::string> prompts) mutable {
    std::vector<std::vector<std::int32_t>> ids(prompts.size());
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      ids[i] = tok.encode(prompts[i]);
      if (max_prompt_tokens > 0 && static_cast<std::int64_t>(ids[i].size()) > max_prompt_tokens)
        ids[i].erase(ids[i].begin(), ids[i].end() - max_prompt_tokens);
    }
    std::vector<std::size_t> order(prompts.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return ids[a].size() > ids[b].size(); });
    std::vector<std::string> out(prompts.size());
    for (std::size_t b = 0; b < order.size(); b += static_cast<std::size_t>(rows)) {
      const std::size_t n = std::min(order.size() - b, static_cast<std::size_t>(rows));
      std::vector<std::vector<std::int32_t>> batch;
      for (std::size_t k = 0; k < n; ++k) batch.push_back(std::move(ids[order[b + k]]));
      const std::vector<std::vector<std::int32_t>> tokens = generate(left_pad(batch, tok.pad_id()));
      SEQPAR_CHECK(tokens.size() == n, "batched_answers: the decoder gave ", tokens.size(),
                   " rows for a batch of ", n);
      for (std::size_t k = 0; k < n; ++k) out[order[b + k]] = tok.decode(tokens[k], true);
    }
    return out;
  };
}

}  // namespace seqpar::inline v0

#pragma once
// RelationTask: relation extraction in SeqGPT's two steps (data/relation.hpp): 分类 over the
// schema's relations and 无关系, then for each relation the first answer names 抽取 of its
// heads and tails; scored on canonical triples.
// Its JSON (score and prediction lines): data/impl/relation_task.hpp
// (core/separate_compilation.hpp).

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/core/separate_compilation.hpp"
#include "seqpar/data/json_records.hpp"
#include "seqpar/data/relation.hpp"
#include "seqpar/data/spans.hpp"
#include "seqpar/data/task.hpp"
#include "seqpar/data/task_json.hpp"

namespace seqpar::inline v0 {

/// Relation extraction over the relations of a schema.
class RelationTask {
 public:
  using Record = RelationRecord;

  /// The canonical triples the answers name, with their spans.
  struct Prediction : PredictionBase {
    std::vector<RelationTriple> relations;
  };

  /// Triple-level P/R/F1, and per relation.
  struct Score : ScoreBase {
    RelationScore relations;

    std::string summary() const {
      return "relation: triples " + relations.summary() + "; " + counts();
    }
    std::string headline() const { return summary(); }
    std::string details() const { return detail::prf_lines(relations.by_relation()); }
    std::string json() const;
  };

  static constexpr std::string_view name = "relation";

  /// The task of `labels` (the data's relation names, passives included) folded by `schema`.
  RelationTask(std::vector<std::string> labels, RelationSchema schema)
      : labels_(std::move(labels)), schema_(std::move(schema)) {
    check_label_list(labels_, "RelationTask: labels");
  }

  /// Relation JSON records.
  static RelationDataset read(const std::filesystem::path& path, const ReadOptions& options) {
    return read_relations(path, options);
  }

  /// The task of training set `train`: `labels`, else its relations (sorted), and the schema
  /// its triples say.
  static RelationTask of(const RelationDataset& train, std::vector<std::string> labels) {
    labels = training_labels(train, std::move(labels), "no label to train (relation)");
    RelationSchema schema = RelationSchema::of(labels, train.records);
    return RelationTask(std::move(labels), std::move(schema));
  }

  const std::vector<std::string>& labels() const { return labels_; }
  const RelationSchema& schema() const { return schema_; }

  /// The task without its training data (AnyTask::state: the labels and which relations the
  /// training set showed symmetric), and back.
  nlohmann::json state() const { return {{"labels", labels_}, {"symmetric", schema_.symmetric}}; }
  static RelationTask from_state(const nlohmann::json& j) {
    auto labels = j.at("labels").get<std::vector<std::string>>();
    RelationSchema schema = RelationSchema::of(labels, {});
    for (const auto& r : j.at("symmetric").get<std::vector<std::string>>()) {
      SEQPAR_CHECK(
          std::find(schema.relations.begin(), schema.relations.end(), r) != schema.relations.end(),
          "RelationTask state: symmetric relation '", r, "' is not one of its relations");
      schema.symmetric.insert(r);
    }
    return RelationTask(std::move(labels), std::move(schema));
  }

  /// "task=relation;labels=...;relations=...;passive=...;symmetric=..." (a cache key's part).
  std::string describe() const {
    std::string s = "task=relation;labels=";
    for (std::size_t i = 0; i < labels_.size(); ++i) s += (i ? "," : "") + labels_[i];
    return s + ";" + schema_.describe();
  }
  std::string overview() const {
    std::string s = "  task relation, relations (" + std::to_string(labels_.size()) + "): ";
    for (std::size_t i = 0; i < labels_.size(); ++i) s += (i ? "," : "") + labels_[i];
    return s + "\n  prompts per sentence: 1 (分类 over " +
           std::to_string(schema_.relations.size()) + " relations and " + std::string(no_relation) +
           ") + 1 per relation it names (抽取 of heads and tails)\n";
  }
  /// The labels, and each relation with its head and tail roles (the words of its answers).
  std::vector<std::string> prompt_words() const {
    std::vector<std::string> w = labels_;
    for (const auto& r : schema_.type_labels()) {
      w.push_back(r);
      w.push_back(head_role(r));
      w.push_back(tail_role(r));
    }
    return w;
  }
  std::int64_t max_prompts() const {
    return static_cast<std::int64_t>(schema_.relations.size()) + 1;
  }

  /// The 分类 prompt of the relations, then one 抽取 prompt per relation the record states.
  std::vector<TaskPrompt> prompts(const RelationRecord& r) const {
    detail::require_annotation(r);
    const auto triples = schema_.canonical_relations(r.text, r.relations);
    std::vector<TaskPrompt> out;
    out.push_back(
        {relation_types_prompt(r.text, schema_), relation_types_answer(schema_, triples), 0});
    for (std::size_t i = 0; i < schema_.relations.size(); ++i)
      if (std::any_of(triples.begin(), triples.end(),
                      [&](const RelationTriple& t) { return t.relation == schema_.relations[i]; }))
        out.push_back({relation_prompt(r.text, schema_.relations[i]),
                       relation_answer(schema_.relations[i], triples),
                       static_cast<std::int32_t>(1 + i)});
    return out;
  }

  /// Two steps: the first answers say which relations each text states, the second ask for
  /// their heads and tails; each distinct head or tail placed in the text once.
  std::vector<Prediction> predict(std::span<const TextRecord> records,
                                  const AnswerFn& answer) const {
    std::vector<std::string> prompts;
    for (const auto& r : records) prompts.push_back(relation_types_prompt(r.text, schema_));
    const std::vector<std::string> first = detail::ask(answer, prompts);
    std::vector<Prediction> out;
    std::vector<std::pair<std::size_t, std::string>> second;  // (record, relation)
    for (std::size_t i = 0; i < records.size(); ++i) {
      Prediction p;
      static_cast<PredictionBase&>(p) = detail::unanswered(records.subspan(i, 1))[0];
      p.answers = {first[i]};
      const RelationTypes a = parse_relation_types(first[i], schema_);
      p.errors += a.errors;
      for (const auto& rel : a.relations) second.emplace_back(i, rel);
      out.push_back(std::move(p));
    }
    prompts.clear();
    for (const auto& [i, rel] : second) prompts.push_back(relation_prompt(records[i].text, rel));
    const std::vector<std::string> answers = detail::ask(answer, prompts);
    for (std::size_t k = 0; k < second.size(); ++k) {
      Prediction& p = out[second[k].first];
      p.answers.push_back(answers[k]);
      read_pairs(second[k].second, answers[k], p);
    }
    for (auto& p : out) place_entities(p);
    return out;
  }

  /// Canonical triples as sets, per record.
  Score score(std::span<const RelationRecord> gold, std::span<const Prediction> predictions) const {
    detail::check_scored_sizes(gold.size(), predictions.size());
    Score s;
    for (std::size_t i = 0; i < gold.size(); ++i) {
      detail::count_scored(s, gold[i], predictions[i], i, labels_);
      std::vector<Triple> predicted, wanted;
      for (const auto& t : predictions[i].relations) predicted.push_back(triple_of(t));
      for (const auto& t : schema_.canonical_relations(gold[i].text, gold[i].relations))
        wanted.push_back(triple_of(t));
      s.relations.add(predicted, wanted);
    }
    return s;
  }

  /// {"id", "task": "relation", "text", "answer", "relations": [{"head", "head_span",
  /// "relation", "tail", "tail_span"}] (as the data lists them), "errors"}.
  std::string prediction_json(const Prediction& p) const;

 private:
  // The pairs of one relation's answer as canonical triples, each triple once.
  void read_pairs(const std::string& relation, const std::string& answer, Prediction& p) const {
    const RelationPairs a = parse_relation_answer(answer, relation);
    p.errors += a.errors;
    std::set<Triple> seen;
    for (const auto& t : p.relations) seen.insert(triple_of(t));
    for (const auto& [h, t] : a.pairs) {
      RelationTriple c = schema_.canonical(p.text, {h, relation, t, std::nullopt, std::nullopt});
      if (seen.insert(triple_of(c)).second) p.relations.push_back(std::move(c));
    }
  }

  // Each distinct head or tail placed once; every triple naming it shares its span.
  static void place_entities(Prediction& p) {
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

  std::vector<std::string> labels_;
  RelationSchema schema_;
};

static_assert(NluTask<RelationTask>);

}  // namespace seqpar::inline v0

#if !defined(SEQPAR_SEPARATE_COMPILATION)
#include "seqpar/data/impl/relation_task.hpp"
#endif

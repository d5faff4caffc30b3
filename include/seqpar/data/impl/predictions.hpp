#pragma once
// The definitions of data/predictions.hpp: in its headers' units, or compiled once
// (core/separate_compilation.hpp).

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/data/predictions.hpp"
#include "seqpar/data/record.hpp"
#include "seqpar/data/tasks.hpp"

namespace seqpar::inline v0 {

namespace detail {

inline nlohmann::json id_json(const RecordId& id) {
  return id.is_string ? nlohmann::json(id.string) : nlohmann::json(id.number);
}

inline nlohmann::json span_json(const std::optional<CharSpan>& s) {
  return s ? nlohmann::json::array({s->start, s->end}) : nlohmann::json();
}

inline nlohmann::json errors_json(const AnswerErrors& e) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [kind, n] : e.counts()) j[kind] = n;
  return j;
}

/// Sets precision, recall, F1 and the counts behind them in `j`.
template <class Json>
void add_prf(Json& j, const PrfCounts& c) {
  j["precision"] = c.precision();
  j["recall"] = c.recall();
  j["f1"] = c.f1();
  j["correct"] = c.correct;
  j["predicted"] = c.predicted;
  j["gold"] = c.gold;
}

inline nlohmann::json by_label_json(const std::map<std::string, PrfCounts>& by) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [label, c] : by) add_prf(j[label], c);
  return j;
}

inline std::string joined_answers(const std::vector<std::string>& answers) {
  std::string s;
  for (std::size_t i = 0; i < answers.size(); ++i) s += (i ? "\n" : "") + answers[i];
  return s;
}

}  // namespace detail

SEQPAR_DECL std::string prediction_json(const TaskSpec& spec, const Prediction& p) {
  nlohmann::ordered_json j;
  j["id"] = detail::id_json(p.id);
  j["task"] = std::string(nlu_task_name(spec.task));
  j["text"] = p.text;
  j["answer"] = detail::joined_answers(p.answers);
  if (spec.task == NluTask::ner) {
    nlohmann::ordered_json entities = nlohmann::ordered_json::array();
    for (const auto& m : p.entities) {
      nlohmann::ordered_json e;
      e["label"] = m.label;
      e["text"] = m.text;
      e["start"] = m.span ? nlohmann::ordered_json(m.span->start) : nlohmann::ordered_json();
      e["end"] = m.span ? nlohmann::ordered_json(m.span->end) : nlohmann::ordered_json();
      entities.push_back(std::move(e));
    }
    j["entities"] = std::move(entities);
  } else if (spec.task == NluTask::classification) {
    j["label"] = p.label.empty() ? nlohmann::json() : nlohmann::json(p.label);
  } else {
    nlohmann::json relations = nlohmann::json::array();
    for (const auto& c : p.relations)
      for (const auto& t : spec.relations.listed(c))
        relations.push_back({{"head", t.head},
                             {"head_span", detail::span_json(t.head_span)},
                             {"relation", t.relation},
                             {"tail", t.tail},
                             {"tail_span", detail::span_json(t.tail_span)}});
    j["relations"] = std::move(relations);
  }
  j["errors"] = detail::errors_json(p.errors);
  // Answers are decoded with invalid bytes replaced (U+FFFD), so the dump cannot fail on them.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

SEQPAR_DECL void write_predictions(const std::filesystem::path& path, const TaskSpec& spec,
                                   std::span<const Prediction> predictions) {
  std::string out;
  for (const auto& p : predictions) out += prediction_json(spec, p) + "\n";
  detail::write_file_atomic(path, out);
}

SEQPAR_DECL void write_cluener_submission(const std::filesystem::path& path,
                                          std::span<const Prediction> predictions) {
  std::string out;
  for (const auto& p : predictions) {
    SEQPAR_CHECK(p.id.from_file, path.string(), ": the prediction of the record at line ",
                 p.id.number,
                 " has no \"id\" from its file; CLUENER's submission names each record by the "
                 "\"id\" of test.json");
    nlohmann::json label = nlohmann::json::object();
    for (const auto& m : p.entities) {
      if (!m.span) continue;
      nlohmann::json& spans = label[m.label][m.text];
      const nlohmann::json s = nlohmann::json::array({m.span->start, m.span->end});
      if (std::find(spans.begin(), spans.end(), s) == spans.end()) spans.push_back(s);
    }
    out += nlohmann::json{{"id", detail::id_json(p.id)}, {"label", std::move(label)}}.dump(
               -1, ' ', false, nlohmann::json::error_handler_t::replace) +
           "\n";
  }
  detail::write_file_atomic(path, out);
}

SEQPAR_DECL std::string score_json(const TaskScore& s) {
  nlohmann::ordered_json j;
  j["task"] = std::string(nlu_task_name(s.task));
  j["records"] = s.records;
  j["prompts"] = s.prompts;
  j["garbled"] = s.errors.total();
  j["errors"] = detail::errors_json(s.errors);
  if (s.task == NluTask::ner) {
    detail::add_prf(j, s.ner.micro());
    j["by_label"] = detail::by_label_json(s.ner.by_label());
  } else if (s.task == NluTask::classification) {
    j["accuracy"] = s.classes.accuracy();
    j["macro_f1"] = s.classes.macro_f1();
    j["correct"] = s.classes.correct();
    nlohmann::json by = nlohmann::json::object();
    for (const auto& [label, c] : s.classes.by_label())
      by[label] = {{"precision", c.precision()},
                   {"recall", c.recall()},
                   {"f1", c.f1()},
                   {"support", c.gold},
                   {"predicted", c.predicted}};
    j["by_label"] = std::move(by);
    j["baseline"] = {{"label", s.majority_label},
                     {"accuracy", s.baseline.accuracy()},
                     {"macro_f1", s.baseline.macro_f1()}};
  } else {
    detail::add_prf(j, s.relations.micro());
    j["by_relation"] = detail::by_label_json(s.relations.by_relation());
  }
  return j.dump();
}

}  // namespace seqpar::inline v0

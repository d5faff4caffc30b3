#pragma once
// The definitions of data/ner_task.hpp that write JSON (its score and its prediction lines): in
// its headers' units, or compiled once (core/separate_compilation.hpp).

#include <nlohmann/json.hpp>
#include <string>

#include "seqpar/data/ner_task.hpp"
#include "seqpar/data/task_json.hpp"

namespace seqpar::inline v0 {

SEQPAR_DECL std::string NerTask::Score::json() const {
  nlohmann::ordered_json j = detail::score_head(name, *this);
  detail::add_prf(j, ner.micro());
  j["by_label"] = detail::by_label_json(ner.by_label());
  return j.dump();
}

SEQPAR_DECL std::string NerTask::prediction_json(const Prediction& p) const {
  nlohmann::ordered_json j = detail::prediction_head(name, p);
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
  return detail::prediction_line(std::move(j), p);
}

}  // namespace seqpar::inline v0

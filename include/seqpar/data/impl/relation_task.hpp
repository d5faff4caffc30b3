#pragma once
// The definitions of data/relation_task.hpp that write JSON (its score and its prediction lines):
// in its headers' units, or compiled once (core/separate_compilation.hpp).

#include <nlohmann/json.hpp>
#include <string>

#include "seqpar/data/relation_task.hpp"
#include "seqpar/data/task_json.hpp"

namespace seqpar::inline v0 {

SEQPAR_DECL std::string RelationTask::Score::json() const {
  nlohmann::ordered_json j = detail::score_head(name, *this);
  detail::add_prf(j, relations.micro());
  j["by_relation"] = detail::by_label_json(relations.by_relation());
  return j.dump();
}

SEQPAR_DECL std::string RelationTask::prediction_json(const Prediction& p) const {
  nlohmann::ordered_json j = detail::prediction_head(name, p);
  nlohmann::json relations = nlohmann::json::array();
  for (const auto& c : p.relations)
    for (const auto& t : schema_.listed(c))
      relations.push_back({{"head", t.head},
                           {"head_span", detail::span_json(t.head_span)},
                           {"relation", t.relation},
                           {"tail", t.tail},
                           {"tail_span", detail::span_json(t.tail_span)}});
  j["relations"] = std::move(relations);
  return detail::prediction_line(std::move(j), p);
}

}  // namespace seqpar::inline v0

#pragma once
// The definitions of data/classification_task.hpp that write JSON (its score and its prediction
// lines): in its headers' units, or compiled once (core/separate_compilation.hpp).

#include <nlohmann/json.hpp>
#include <string>

#include "seqpar/data/classification_task.hpp"
#include "seqpar/data/task_json.hpp"

namespace seqpar::inline v0 {

SEQPAR_DECL std::string ClassificationTask::Score::json() const {
  nlohmann::ordered_json j = detail::score_head(name, *this);
  j["accuracy"] = classes.accuracy();
  j["macro_f1"] = classes.macro_f1();
  j["correct"] = classes.correct();
  nlohmann::json by = nlohmann::json::object();
  for (const auto& [label, c] : classes.by_label())
    by[label] = {{"precision", c.precision()},
                 {"recall", c.recall()},
                 {"f1", c.f1()},
                 {"support", c.gold},
                 {"predicted", c.predicted}};
  j["by_label"] = std::move(by);
  if (!majority_label.empty())
    j["baseline"] = {{"label", majority_label},
                     {"accuracy", baseline.accuracy()},
                     {"macro_f1", baseline.macro_f1()}};
  return j.dump();
}

SEQPAR_DECL std::string ClassificationTask::prediction_json(const Prediction& p) const {
  nlohmann::ordered_json j = detail::prediction_head(name, p);
  j["label"] = p.label.empty() ? nlohmann::json() : nlohmann::json(p.label);
  return detail::prediction_line(std::move(j), p);
}

}  // namespace seqpar::inline v0

#pragma once
// The JSON pieces every task's predictions and scores are written with (docs/tasks.md,
// "Files"): ids as read, spans as [start, end], errors by kind, precision/recall/F1 with
// their counts.

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "seqpar/data/metrics.hpp"
#include "seqpar/data/prompt.hpp"
#include "seqpar/data/record.hpp"
#include "seqpar/data/task.hpp"

namespace seqpar::inline v0::detail {

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

/// The start of a prediction line: id, task, text and the answers joined by newlines.
inline nlohmann::ordered_json prediction_head(std::string_view task, const PredictionBase& p) {
  nlohmann::ordered_json j;
  j["id"] = id_json(p.id);
  j["task"] = std::string(task);
  j["text"] = p.text;
  std::string answers;
  for (std::size_t i = 0; i < p.answers.size(); ++i) answers += (i ? "\n" : "") + p.answers[i];
  j["answer"] = answers;
  return j;
}

/// The end of a prediction line: the errors, and the line (answers are decoded with invalid
/// bytes replaced, U+FFFD, so the dump cannot fail on them).
inline std::string prediction_line(nlohmann::ordered_json j, const PredictionBase& p) {
  j["errors"] = errors_json(p.errors);
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// The start of a score object: task, records, prompts, records whose gold the task lacks
/// and the garbled answers by kind.
inline nlohmann::ordered_json score_head(std::string_view task, const ScoreBase& s) {
  nlohmann::ordered_json j;
  j["task"] = std::string(task);
  j["records"] = s.records;
  j["prompts"] = s.prompts;
  j["unknown_gold"] = s.unknown_gold;
  j["garbled"] = s.errors.total();
  j["errors"] = errors_json(s.errors);
  return j;
}

/// Per-label lines "  label  F1 0.5000  P 0.5000  R 0.5000  gold 2".
/// Labels are padded to one display width (a CJK character takes two columns).
inline std::string prf_lines(const std::map<std::string, PrfCounts>& by) {
  std::int64_t width = 14;
  for (const auto& [label, c] : by) width = std::max(width, display_width(label));
  std::string out;
  char line[256];
  for (const auto& [label, c] : by) {
    std::snprintf(line, sizeof line, " F1 %.4f  P %.4f  R %.4f  gold %lld\n", c.f1(), c.precision(),
                  c.recall(), static_cast<long long>(c.gold));
    out += "  " + padded(label, width) + line;
  }
  return out;
}

}  // namespace seqpar::inline v0::detail

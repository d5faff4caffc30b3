#pragma once
// The definitions of data/predictions.hpp: in its headers' units, or compiled once
// (core/separate_compilation.hpp).

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "seqpar/core/error.hpp"
#include "seqpar/data/predictions.hpp"
#include "seqpar/data/record.hpp"
#include "seqpar/data/task_json.hpp"

namespace seqpar::inline v0 {

SEQPAR_DECL void write_prediction_lines(const std::filesystem::path& path,
                                        std::span<const std::string> lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  detail::write_file_atomic(path, out);
}

SEQPAR_DECL void write_cluener_submission(const std::filesystem::path& path,
                                          std::span<const NerTask::Prediction> predictions) {
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

}  // namespace seqpar::inline v0

#pragma once
// Writing predictions (docs/tasks.md, "Files"): a task's predictions as JSON lines (each its
// task's prediction_json), and NER predictions as CLUENER's submission file.

#include <algorithm>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/core/separate_compilation.hpp"
#include "seqpar/data/ner_task.hpp"
#include "seqpar/data/record.hpp"
#include "seqpar/data/task.hpp"
#include "seqpar/data/task_json.hpp"

namespace seqpar::inline v0 {

/// Writes `lines` (one JSON object each) to `path`, atomically (a temporary file renamed
/// over it).
SEQPAR_DECL void write_prediction_lines(const std::filesystem::path& path,
                                        std::span<const std::string> lines);

/// Writes `predictions` of `task` as JSON lines to `path`, atomically.
template <NluTask T>
void write_predictions(const std::filesystem::path& path, const T& task,
                       std::span<const typename T::Prediction> predictions) {
  std::vector<std::string> lines;
  for (const auto& p : predictions) lines.push_back(task.prediction_json(p));
  write_prediction_lines(path, lines);
}

/// Writes NER predictions in CLUENER's submission format (CLUE's cluener_predict.json): one
/// line per record, in order, {"id": <the record's id>, "label": {type: {entity: [[start,
/// end], ...]}}}, "label" empty ({}) for a record without mentions. Every record needs the
/// "id" of its file (CLUENER's test.json has them); mentions without offsets are left out.
/// Atomic, as write_predictions.
SEQPAR_DECL void write_cluener_submission(const std::filesystem::path& path,
                                          std::span<const NerTask::Prediction> predictions);

/// CLUENER's submission file is NER's.
inline void write_submission(const std::filesystem::path& path, const NerTask&,
                             std::span<const NerTask::Prediction> predictions) {
  write_cluener_submission(path, predictions);
}

}  // namespace seqpar::inline v0

#if !defined(SEQPAR_SEPARATE_COMPILATION)
#include "seqpar/data/impl/predictions.hpp"
#endif

#pragma once
// Writing what predict (data/tasks.hpp) read back: prediction records as JSON lines, CLUENER's
// submission file, and a task's scores as one JSON object (docs/tasks.md, "Files").
//
//   {"id": 7, "task": "ner", "text": ..., "answer": ..., "errors": {...},
//    "entities": [{"label": "name", "text": "张三", "start": 0, "end": 1}, ...]}
//   {"id": 7, "task": "classification", ..., "label": "体育"}            (null: garbled)
//   {"id": 7, "task": "relation", ..., "relations": [{"head", "head_span": [s, e] | null,
//    "relation", "tail", "tail_span"}, ...]}                           (as the data lists them)
//
// Offsets are CLUENER's (code points, 0-based, end inclusive); a mention the text does not
// hold has null offsets (and is counted in "errors"). Definitions:
// data/impl/predictions.hpp (core/separate_compilation.hpp).

#include <filesystem>
#include <span>
#include <string>

#include "seqpar/core/separate_compilation.hpp"
#include "seqpar/data/tasks.hpp"

namespace seqpar::inline v0 {

/// One prediction of a `spec` task as a JSON object on one line (no newline).
SEQPAR_DECL std::string prediction_json(const TaskSpec& spec, const Prediction& p);

/// Writes `predictions` as JSON lines to `path`, atomically (a temporary file renamed over it).
SEQPAR_DECL void write_predictions(const std::filesystem::path& path, const TaskSpec& spec,
                                   std::span<const Prediction> predictions);

/// Writes NER predictions in CLUENER's submission format (CLUE's cluener_predict.json): one
/// line per record, in order, {"id": <the record's id>, "label": {type: {entity: [[start,
/// end], ...]}}}, "label" empty ({}) for a record without mentions. Every record needs the
/// "id" of its file (CLUENER's test.json has them); mentions without offsets are left out.
/// Atomic, as write_predictions.
SEQPAR_DECL void write_cluener_submission(const std::filesystem::path& path,
                                          std::span<const Prediction> predictions);

/// A task's scores as one JSON object on one line: task, records, prompts, errors by kind,
/// and by task precision/recall/F1 with per-label counts (ner, relation) or accuracy,
/// macro-F1, the per-label table and the majority-class baseline (classification).
SEQPAR_DECL std::string score_json(const TaskScore& s);

}  // namespace seqpar::inline v0

#if !defined(SEQPAR_SEPARATE_COMPILATION)
#include "seqpar/data/impl/predictions.hpp"
#endif

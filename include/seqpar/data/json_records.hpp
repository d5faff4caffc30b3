#pragma once
// Reading JSON records of every task, one reader for all shapes:
//   NER (CLUENER):   {"text": ..., "label": {type: {entity: [[start, end], ...]}}}
//   classification:  {"text": ..., "label": "体育"}
//   relations:       {"text": ..., "relations": [{"head": ..., "head_span": [s, e] | null,
//                     "relation": ..., "tail": ..., "tail_span": [s, e] | null}, ...]}
//   text only:       {"id": 0, "text": ...} (a test split: labelled == false)
// each with an optional "id" (an integer or a string). Spans are code points, end inclusive.
// Two layouts: one object per line (.jsonl) and concatenated, possibly pretty-printed objects
// (.json); a top-level array works too. The task is named, or recognised from the first
// annotated record; a record of another task's shape is refused, naming the file, the line
// and what it contradicts. Each record is checked (JSON syntax, field types, allowed labels,
// spans inside the text and reading their strings, the length limit, ids unique); a bad
// record is skipped and counted in the ReadReport, or with OnBadRecord::fail throws naming
// file, line and record. Definitions: data/impl/json_records.hpp
// (core/separate_compilation.hpp).

#include <cstdint>
#include <filesystem>
#include <optional>

#include "seqpar/core/separate_compilation.hpp"
#include "seqpar/data/record.hpp"

namespace seqpar::inline v0 {

/// How records are laid out in a JSON file.
enum class JsonLayout : std::uint8_t {
  automatic,     // .jsonl: lines; otherwise by the first character ('[' array, '{' objects)
  lines,         // one object per line
  concatenated,  // objects one after another, any whitespace or commas between them
};

/// Reads the records of `task`, or (std::nullopt) of the task the first annotated record's
/// shape says; the result's task() is that task (none when every record is text only).
/// Throws seqpar::Error for a file that cannot be read or is not JSON records at all
/// (binary, not starting with '{' or '[', no readable record), and for a record whose shape
/// is another task's; bad records are skipped and counted in the result's report (or throw,
/// with OnBadRecord::fail).
SEQPAR_DECL TextDataset read_records(const std::filesystem::path& path, std::optional<NluTask> task,
                                     const ReadOptions& options = {},
                                     JsonLayout layout = JsonLayout::automatic);

/// Classification records {"text", "label": "class"} (read_records for that task).
SEQPAR_DECL TextDataset read_classification(const std::filesystem::path& path,
                                            const ReadOptions& options = {},
                                            JsonLayout layout = JsonLayout::automatic);

/// Relation records {"text", "relations": [...]} (read_records for that task).
SEQPAR_DECL TextDataset read_relations(const std::filesystem::path& path,
                                       const ReadOptions& options = {},
                                       JsonLayout layout = JsonLayout::automatic);

/// The texts and ids of JSON records, for prediction: a test split of {"id", "text"}
/// records (CLUENER's test.json), or records of any task, whose annotation is not read
/// (every record has labelled == false).
SEQPAR_DECL TextDataset read_texts(const std::filesystem::path& path,
                                   const ReadOptions& options = {},
                                   JsonLayout layout = JsonLayout::automatic);

}  // namespace seqpar::inline v0

#if !defined(SEQPAR_SEPARATE_COMPILATION)
#include "seqpar/data/impl/json_records.hpp"
#endif

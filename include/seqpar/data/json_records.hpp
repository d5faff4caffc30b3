#pragma once
// Reading the JSON records of the library's tasks (the reader itself: data/json_reader.hpp):
//   NER (CLUENER):   {"text": ..., "label": {type: {entity: [[start, end], ...]}}}
//   classification:  {"text": ..., "label": "体育"}
//   relations:       {"text": ..., "relations": [{"head": ..., "head_span": [s, e] | null,
//                     "relation": ..., "tail": ..., "tail_span": [s, e] | null}, ...]}
//   text only:       {"id": 0, "text": ...} (a test split: labelled == false)
// each with an optional "id" (an integer or a string). Spans are code points, end inclusive.
// A record of another task's shape is refused, naming the file, the line and what it
// contradicts. Definitions: data/impl/json_records.hpp (core/separate_compilation.hpp).

#include <array>
#include <filesystem>

#include "seqpar/core/separate_compilation.hpp"
#include "seqpar/data/classification.hpp"
#include "seqpar/data/json_reader.hpp"
#include "seqpar/data/ner_record.hpp"
#include "seqpar/data/record.hpp"
#include "seqpar/data/relation.hpp"

namespace seqpar::inline v0 {

/// CLUENER's NER records: "label" an object of types.
inline constexpr JsonShape ner_json_shape{
    "ner",
    "label",
    JsonValue::object,
    "its \"label\" is an object",
    "{type: {entity: [[start, end], ...]}}",
    "NER records ({\"text\": ..., \"label\": {type: {entity: [[start, end], ...]}}})"};

/// Classification records: "label" a string.
inline constexpr JsonShape classification_json_shape{
    "classification",     "label",
    JsonValue::string,    "its \"label\" is a string",
    "a class (a string)", "classification records ({\"text\": ..., \"label\": class})"};

/// Relation records: "relations" a list of triples.
inline constexpr JsonShape relation_json_shape{
    "relation",
    "relations",
    JsonValue::any,
    "it has \"relations\"",
    "[{\"head\", \"relation\", \"tail\", ...}, ...]",
    "relation records ({\"text\": ..., \"relations\": [{\"head\", \"relation\", "
    "\"tail\", ...}, ...]})"};

/// The shapes of the library's JSON records: what a reader knows to name a record of
/// another task.
inline constexpr std::array<JsonShape, 3> builtin_json_shapes{
    ner_json_shape, classification_json_shape, relation_json_shape};

/// Classification records {"text", "label": "class"}.
SEQPAR_DECL ClassDataset read_classification(const std::filesystem::path& path,
                                             const ReadOptions& options = {},
                                             JsonLayout layout = JsonLayout::automatic);

/// Relation records {"text", "relations": [...]}.
SEQPAR_DECL RelationDataset read_relations(const std::filesystem::path& path,
                                           const ReadOptions& options = {},
                                           JsonLayout layout = JsonLayout::automatic);

/// The texts and ids of JSON records, for prediction: a test split of {"id", "text"}
/// records (CLUENER's test.json), or records of any task, whose annotation is not read
/// (every record has labelled == false).
SEQPAR_DECL TextDataset read_texts(const std::filesystem::path& path,
                                   const ReadOptions& options = {},
                                   JsonLayout layout = JsonLayout::automatic);

/// The texts of a plain text file, one per non-empty line (a '\r' before the '\n' dropped),
/// for prediction: each record text only, its line its id. An empty line is skipped and
/// counted ("empty_line", whatever OnBadRecord says). A line that is not UTF-8
/// ("invalid_utf8", naming file, line and byte) or too long is a bad record: skipped and
/// counted, or with OnBadRecord::fail thrown. Throws for a file that cannot be read, is
/// binary or holds no readable line.
SEQPAR_DECL TextDataset read_text_lines(const std::filesystem::path& path,
                                        const ReadOptions& options = {});

}  // namespace seqpar::inline v0

#if !defined(SEQPAR_SEPARATE_COMPILATION)
#include "seqpar/data/impl/json_records.hpp"
#endif

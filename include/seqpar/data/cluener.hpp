#pragma once
// Reading CLUENER-style NER JSON:
//   {"text": "...", "label": {type: {entity: [[start, end], ...]}}}
// with end inclusive and indices in code points: the JSON record reader
// (data/json_records.hpp) held to NER records. Two layouts: one object per line (.jsonl) and
// concatenated, possibly pretty-printed objects (.json); a top-level array works too. Each
// record is checked (JSON syntax, field types, allowed labels, spans inside the text and
// reading the entity string, the length limit, a unique id); a bad record is skipped and
// counted in the ReadReport, or with OnBadRecord::fail throws naming file, line and record.
// Definitions: data/impl/cluener.hpp (core/separate_compilation.hpp).

#include <filesystem>

#include "seqpar/core/separate_compilation.hpp"
#include "seqpar/data/json_records.hpp"
#include "seqpar/data/ner_record.hpp"

namespace seqpar::inline v0 {

/// Reads a CLUENER NER file (.json: concatenated objects; .jsonl: one object per line).
/// Throws seqpar::Error for a file that cannot be read or is not CLUENER JSON at all
/// (binary, not starting with '{' or '[', no readable record, a record of another task);
/// bad records are skipped and counted in the result's report (or throw, with
/// OnBadRecord::fail). A record without "label" is read as unlabelled (CLUENER's test split).
SEQPAR_DECL NerDataset read_cluener(const std::filesystem::path& path,
                                    const ReadOptions& options = {},
                                    JsonLayout layout = JsonLayout::automatic);

}  // namespace seqpar::inline v0

#if !defined(SEQPAR_SEPARATE_COMPILATION)
#include "seqpar/data/impl/cluener.hpp"
#endif

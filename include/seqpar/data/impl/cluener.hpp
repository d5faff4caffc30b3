#pragma once
// The definitions of data/cluener.hpp: in its headers' units, or compiled once
// (core/separate_compilation.hpp).

#include <filesystem>

#include "seqpar/data/cluener.hpp"
#include "seqpar/data/impl/json_records.hpp"

namespace seqpar::inline v0 {

SEQPAR_DECL NerDataset read_cluener(const std::filesystem::path& path, const ReadOptions& options,
                                    JsonLayout layout) {
  NerDataset d = detail::read_json_records<NerRecord>(
      path, &ner_json_shape, builtin_json_shapes, detail::parse_ner_label, options, layout,
      "CLUENER JSON ({\"text\": ..., \"label\": {type: {entity: [[start, end]]}}} records)");
  d.report.counted = "mentions";
  return d;
}

}  // namespace seqpar::inline v0

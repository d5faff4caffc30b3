#pragma once
// The definitions of data/cluener.hpp: in its headers' units, or compiled once
// (core/separate_compilation.hpp).

#include <filesystem>

#include "seqpar/data/cluener.hpp"
#include "seqpar/data/impl/json_records.hpp"

namespace seqpar::inline v0 {

SEQPAR_DECL NerDataset read_cluener(const std::filesystem::path& path, const ReadOptions& options,
                                    JsonLayout layout) {
  return detail::read_json_records(
      path, NluTask::ner, false, options, layout,
      "CLUENER JSON ({\"text\": ..., \"label\": {type: {entity: [[start, end]]}}} records)");
}

}  // namespace seqpar::inline v0

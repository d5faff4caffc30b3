#pragma once
// NerRecord: a text and its labelled mentions (CLUENER JSON, CoNLL BIO).

#include <string>
#include <vector>

#include "seqpar/data/record.hpp"

namespace seqpar::inline v0 {

/// A text and its mentions, sorted by (start, end, label).
struct NerRecord : TextRecord {
  std::vector<NerSpan> spans;
  bool same_content(const NerRecord& o) const { return text == o.text && spans == o.spans; }
};

/// The labels of a record's mentions.
inline std::vector<std::string> record_labels(const NerRecord& r) {
  std::vector<std::string> out;
  for (const auto& s : r.spans) out.push_back(s.label);
  return out;
}

/// NER records read from one file.
using NerDataset = Dataset<NerRecord>;

}  // namespace seqpar::inline v0

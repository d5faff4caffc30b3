#pragma once
// The names the NER code gives the records of data/record.hpp: a NerRecord is a TextRecord
// whose annotation is its mentions (TextRecord::spans).

#include "seqpar/data/record.hpp"

namespace seqpar::inline v0 {

using NerRecord = TextRecord;
using NerDataset = TextDataset;

}  // namespace seqpar::inline v0

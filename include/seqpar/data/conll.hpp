#pragma once
// CoNLL-style BIO files: one "token tag" line per token (tab or spaces between), a blank
// line between sentences, tags O, B-<label>, I-<label>. A sentence's text is its tokens
// joined without a separator (the character-per-line layout of Chinese NER corpora), and
// its mentions are code-point spans of that text, as in CLUENER.
// Definitions: data/impl/conll.hpp (core/separate_compilation.hpp).

#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "seqpar/core/separate_compilation.hpp"
#include "seqpar/data/ner_record.hpp"

namespace seqpar::inline v0 {

/// One BIO tag per code point of r.text ("O", "B-x", "I-x"). Throws when two mentions
/// overlap: BIO cannot say that.
SEQPAR_DECL std::vector<std::string> bio_tags(const NerRecord& r);

/// Writes records as a character-per-line BIO file; atomic (a temporary file renamed over
/// `path`).
SEQPAR_DECL void write_conll(const std::filesystem::path& path, std::span<const NerRecord> records);

/// Reads a CoNLL-style BIO file. Throws seqpar::Error for a file that cannot be read or
/// is not BIO text (binary, JSON, no readable sentence); a bad sentence (a line that is
/// not "token tag", an unknown tag or label, an I- tag that continues nothing, too long)
/// is skipped and counted in the report (or throws, with OnBadRecord::fail).
SEQPAR_DECL NerDataset read_conll(const std::filesystem::path& path,
                                  const ReadOptions& options = {});

}  // namespace seqpar::inline v0

#if !defined(SEQPAR_SEPARATE_COMPILATION)
#include "seqpar/data/impl/conll.hpp"
#endif

#pragma once
// A character-level tokenizer built from a corpus, written as a tokenizer.json that
// seqpar::Tokenizer (and Hugging Face tokenizers) load: BLOOM's pipeline (Split +
// ByteLevel pre-tokenizer, byte-level BPE, ByteLevel decoder) with a vocabulary of the
// 256 bytes, the corpus's characters and a few whole words. Each multi-byte character is
// made by merging its UTF-8 bytes left to right; no merge crosses a character, so every
// character in the vocabulary is one token and any other text falls back to bytes.
// Words (prompt words, label names) are added tokens, cut out before the pre-tokenizer.
// Definitions: data/impl/char_tokenizer.hpp (core/separate_compilation.hpp).

#include <cstdint>
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <vector>

#include "seqpar/core/separate_compilation.hpp"

namespace seqpar::inline v0 {

/// What a character-level tokenizer holds.
struct CharTokenizerOptions {
  std::int64_t max_vocab = 4608;   // ids in all; the rarest characters are left to bytes
  std::int64_t min_count = 1;      // characters seen fewer times are left to bytes
  std::vector<std::string> words;  // made single tokens wherever they occur
};

/// The fixed words of SeqGPT prompts and answers.
SEQPAR_DECL std::vector<std::string> seqgpt_prompt_words();

/// The tokenizer.json of a character-level tokenizer for `texts`. Ids 0..3 are <unk> <s>
/// </s> <pad> (as in BLOOM), then the 256 bytes, then characters by falling frequency
/// (ties by code point) with the byte prefixes their merges need, then the words.
SEQPAR_DECL nlohmann::ordered_json char_tokenizer_json(std::span<const std::string> texts,
                                                       const CharTokenizerOptions& o = {});

/// Writes char_tokenizer_json(texts, o) to `path` (atomically).
SEQPAR_DECL void write_char_tokenizer(const std::filesystem::path& path,
                                      std::span<const std::string> texts,
                                      const CharTokenizerOptions& o = {});

}  // namespace seqpar::inline v0

#if !defined(SEQPAR_SEPARATE_COMPILATION)
#include "seqpar/data/impl/char_tokenizer.hpp"
#endif

#pragma once
// Tokenizer: byte-level BPE from a Hugging Face tokenizer.json, giving the ids and text of HF's
// encode(text, add_special_tokens=False) and decode(ids) (docs/tokenizer.md). Needs Oniguruma
// (the seqpar::tokenizer target); definitions in io/impl/tokenizer.hpp.

#if !defined(SEQPAR_WITH_ONIGURUMA)
#error "seqpar/io/tokenizer.hpp needs Oniguruma: link the seqpar::tokenizer CMake target"
#endif

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "seqpar/core/separate_compilation.hpp"

namespace seqpar::inline v0 {

namespace detail {
struct TokenizerModel;
}  // namespace detail

/// A byte-level BPE tokenizer loaded from a Hugging Face tokenizer.json (BLOOM's
/// pipeline: no normalizer, Split + ByteLevel pre-tokenizer, BPE, ByteLevel
/// decoder). Cheap to copy (copies share the loaded tables); encode and decode
/// may be called from several threads at once.
class Tokenizer {
 public:
  /// Loads tokenizer.json; throws seqpar::Error naming the file and the field
  /// for anything unreadable or unsupported.
  SEQPAR_DECL static Tokenizer from_file(const std::filesystem::path& tokenizer_json);
  /// The same from a tokenizer.json's text (one not yet written); `name` names it in
  /// messages.
  SEQPAR_DECL static Tokenizer from_json(std::string_view text, const std::string& name);

  /// Token ids of `utf8_text`, no special tokens added (BLOOM adds none). Each
  /// maximal invalid UTF-8 subpart is first replaced by U+FFFD, as Python's
  /// bytes.decode('utf-8', 'replace') would before Hugging Face tokenizers sees it.
  SEQPAR_DECL std::vector<std::int32_t> encode(std::string_view utf8_text) const;

  /// The pieces the BPE model sees, in their byte-level spelling (what Hugging
  /// Face's pre_tokenizer.pre_tokenize_str shows); added tokens appear as themselves.
  SEQPAR_DECL std::vector<std::string> pre_tokenize(std::string_view utf8_text) const;

  /// Text of `ids`: the tokens' bytes joined, invalid UTF-8 replaced by U+FFFD.
  /// Ids that name no token are skipped, as Hugging Face tokenizers does; with
  /// skip_special_tokens, so are the special added tokens.
  SEQPAR_DECL std::string decode(std::span<const std::int32_t> ids,
                                 bool skip_special_tokens = false) const;

  /// Id of a token in its tokenizer.json spelling ("Ġhello", "<s>"), -1 when absent.
  SEQPAR_DECL std::int32_t token_to_id(std::string_view token) const;

  /// The token with `id` in its tokenizer.json spelling; empty when no token has that id.
  SEQPAR_DECL std::string_view id_to_token(std::int32_t id) const;

  /// Number of ids: one more than the largest id of the model or the added tokens
  /// (250680 for BLOOM's tokenizer; the model's embedding is padded beyond it).
  SEQPAR_DECL std::size_t vocab_size() const;

  /// Ids of the added tokens <pad>, </s>, <s> and <unk>; -1 when the file has none.
  SEQPAR_DECL std::int32_t pad_id() const;
  SEQPAR_DECL std::int32_t eos_id() const;
  SEQPAR_DECL std::int32_t bos_id() const;
  SEQPAR_DECL std::int32_t unk_id() const;

 private:
  explicit Tokenizer(std::shared_ptr<const detail::TokenizerModel> m) : model_(std::move(m)) {}
  std::shared_ptr<const detail::TokenizerModel> model_;
};

}  // namespace seqpar::inline v0

#if !defined(SEQPAR_SEPARATE_COMPILATION)
#include "seqpar/io/impl/tokenizer.hpp"
#endif

#pragma once
// The definitions of io/tokenizer.hpp: in its headers' units, or compiled once
// (core/separate_compilation.hpp).

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/io/detail/tokenizer_bpe.hpp"
#include "seqpar/io/detail/tokenizer_byte_level.hpp"
#include "seqpar/io/detail/tokenizer_json.hpp"
#include "seqpar/io/detail/tokenizer_regex.hpp"
#include "seqpar/io/detail/tokenizer_split.hpp"
#include "seqpar/io/detail/tokenizer_tables.hpp"
#include "seqpar/io/detail/utf8.hpp"
#include "seqpar/io/tokenizer.hpp"

namespace seqpar::inline v0 {

namespace detail {

/// The pattern ByteLevel splits with when its use_regex is true (GPT-2's).
inline constexpr std::string_view byte_level_pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

/// Finds added tokens in text, leftmost first and, among those starting at the
/// same byte, longest first (the aho-corasick LeftmostLongest that Hugging Face
/// tokenizers uses).
class AddedTokenMatcher {
 public:
  void add(std::string_view content, std::int32_t id) {
    if (content.empty()) return;
    tokens_.emplace_back(std::string(content), id);
  }

  void finish() {
    for (auto& list : by_first_) list.clear();
    for (std::uint32_t i = 0; i < tokens_.size(); ++i)
      by_first_[static_cast<unsigned char>(tokens_[i].first[0])].push_back(i);
    for (auto& list : by_first_)
      std::stable_sort(list.begin(), list.end(), [&](std::uint32_t a, std::uint32_t b) {
        return tokens_[a].first.size() > tokens_[b].first.size();
      });
    distinct_first_ = 0;
    for (unsigned b = 0; b < 256; ++b)
      if (!by_first_[b].empty()) {
        ++distinct_first_;
        only_first_ = static_cast<char>(b);
      }
  }

  bool empty() const { return tokens_.empty(); }

  /// Position of the first match in s at or after `from` (npos when none), its
  /// length and token id.
  std::size_t find(std::string_view s, std::size_t from, std::size_t& length,
                   std::int32_t& id) const {
    std::size_t i = from;
    while (i < s.size()) {
      if (distinct_first_ == 1) {
        const void* p = std::memchr(s.data() + i, only_first_, s.size() - i);
        if (p == nullptr) return std::string_view::npos;
        i = static_cast<std::size_t>(static_cast<const char*>(p) - s.data());
      }
      for (std::uint32_t t : by_first_[static_cast<unsigned char>(s[i])]) {
        const std::string& c = tokens_[t].first;
        if (s.compare(i, c.size(), c) == 0) {
          length = c.size();
          id = tokens_[t].second;
          return i;
        }
      }
      ++i;
    }
    return std::string_view::npos;
  }

 private:
  std::vector<std::pair<std::string, std::int32_t>> tokens_;
  std::array<std::vector<std::uint32_t>, 256> by_first_;
  int distinct_first_ = 0;
  char only_first_ = 0;
};

/// One pre-tokenizer step: a Split (pattern set) or the ByteLevel step (which
/// splits only when its use_regex is true).
struct PreTokenizerStep {
  std::unique_ptr<OnigPattern> split;  // null: no splitting
  bool bloom_split = false;            // split is BLOOM's pattern: run it by hand
  bool add_prefix_space = false;
  bool byte_level = false;
};

/// Hash of std::string keys that also looks up std::string_view ones.
struct TextHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

/// Scratch space of one encode call.
struct EncodeScratch {
  OnigMatchRegion region;
  BpeScratch bpe;
};

/// Everything a Tokenizer knows; immutable after loading except the word cache,
/// which is internally synchronised.
struct TokenizerModel {
  std::string file;
  TokenIndex vocab;                          // the BPE model's vocabulary
  PairTable merges;                          // (left, right) -> (rank, merged id)
  std::array<std::int32_t, 256> byte_ids{};  // id of each byte's one-character token, -1 if none
  std::int32_t model_unk = -1;               // model.unk_token, for bytes without a token
  bool fuse_unk = false;
  bool ignore_merges = false;
  std::vector<PreTokenizerStep> steps;
  AddedTokenMatcher added_raw;         // added tokens with normalized = false, matched first
  AddedTokenMatcher added_normalized;  // then those with normalized = true
  // Added token text -> id, and id -> text.
  std::unordered_map<std::string, std::int32_t, TextHash, std::equal_to<>> added_ids;
  std::unordered_map<std::int32_t, std::string> added_text;
  std::vector<std::uint8_t> is_added;    // per id
  std::vector<std::uint8_t> is_special;  // per id
  std::size_t id_count = 0;
  std::int32_t pad = -1, eos = -1, bos = -1, unk = -1;
  mutable WordCache cache{1u << 14};

  std::string_view token(std::int32_t id) const {
    if (id < 0 || static_cast<std::size_t>(id) >= id_count) return {};
    if (is_added[id]) return added_text.find(id)->second;
    return vocab.has(id) ? vocab.token(id) : std::string_view{};
  }
  bool has(std::int32_t id) const {
    return id >= 0 && static_cast<std::size_t>(id) < id_count && (is_added[id] || vocab.has(id));
  }

  /// Cuts `s` at added tokens: calls piece(text, -1) for text between them and
  /// piece(text, id) for each added token.
  template <class F>
  void split_added(std::string_view s, F&& piece) const {
    split_with(added_raw, s, [&](std::string_view text, std::int32_t id) {
      if (id >= 0) {
        piece(text, id);
        return;
      }
      split_with(added_normalized, text, piece);
    });
  }

  /// Cuts `s` at added tokens and pre-tokenizes the text between them: added(text, id) for
  /// each added token, word(piece) for each word.
  template <class A, class W>
  void split_words(std::string_view s, EncodeScratch& scratch, A&& added, W&& word) const {
    split_added(s, [&](std::string_view text, std::int32_t id) {
      if (id >= 0)
        added(text, id);
      else
        pre_tokenize(text, 0, scratch, word);
    });
  }

  template <class F>
  static void split_with(const AddedTokenMatcher& m, std::string_view s, F&& piece) {
    if (s.empty()) return;
    if (m.empty()) {
      piece(s, -1);
      return;
    }
    std::size_t from = 0;
    while (from < s.size()) {
      std::size_t length = 0;
      std::int32_t id = -1;
      const std::size_t at = m.find(s, from, length, id);
      if (at == std::string_view::npos) break;
      if (at > from) piece(s.substr(from, at - from), -1);
      piece(s.substr(at, length), id);
      from = at + length;
    }
    if (from < s.size()) piece(s.substr(from), -1);
  }

  /// Runs the pre-tokenizer from `step` on `text`; calls word(piece) for each
  /// final piece (raw bytes, before the byte-level spelling).
  template <class F>
  void pre_tokenize(std::string_view text, std::size_t step, EncodeScratch& scratch,
                    F&& word) const {
    if (text.empty()) return;
    if (step == steps.size()) {
      word(text);
      return;
    }
    const PreTokenizerStep& st = steps[step];
    if (st.add_prefix_space && text.front() != ' ') {
      std::string spaced;
      spaced.reserve(text.size() + 1);
      spaced.push_back(' ');
      spaced.append(text);
      split_step(st, spaced, step, scratch, word);
      return;
    }
    split_step(st, text, step, scratch, word);
  }

  template <class F>
  void split_step(const PreTokenizerStep& st, std::string_view text, std::size_t step,
                  EncodeScratch& scratch, F&& word) const {
    if (!st.split) {
      pre_tokenize(text, step + 1, scratch, word);
      return;
    }
    const auto next = [&](std::size_t b, std::size_t e, bool) {
      pre_tokenize(text.substr(b, e - b), step + 1, scratch, word);
    };
    if (st.bloom_split) {
      bloom_split(text, next);
    } else {
      st.split->split(text, scratch.region, next);
    }
  }

  /// Appends the BPE ids of one pre-tokenized piece.
  void encode_word(std::string_view w, EncodeScratch& scratch,
                   std::vector<std::int32_t>& out) const {
    if (w.size() == 1 && !ignore_merges) {
      const std::int32_t id = byte_ids[static_cast<unsigned char>(w[0])];
      if (id >= 0) {
        out.push_back(id);
      } else if (model_unk >= 0) {
        out.push_back(model_unk);
      }
      return;
    }
    if (cache.lookup(w, out)) return;
    const std::size_t first = out.size();
    if (ignore_merges) {
      // Hugging Face tokenizers' ignore_merges: a word that is itself a token is one id.
      const std::int32_t id = vocab.find(byte_level_encode(w));
      if (id >= 0) {
        out.push_back(id);
        cache.insert(w, std::span<const std::int32_t>(out).subspan(first));
        return;
      }
    }
    auto& symbols = scratch.bpe.symbols;
    symbols.clear();
    std::int32_t unk_run = 0;  // bytes waiting to become one unknown-token symbol
    for (unsigned char b : w) {
      const std::int32_t id = byte_ids[b];
      if (id >= 0) {
        if (unk_run > 0) bpe_push_symbol(symbols, model_unk, unk_run);
        unk_run = 0;
        bpe_push_symbol(symbols, id, 1);
      } else if (model_unk >= 0) {
        if (unk_run > 0 && !fuse_unk) {
          bpe_push_symbol(symbols, model_unk, unk_run);
          unk_run = 0;
        }
        ++unk_run;
      }
    }
    if (unk_run > 0) bpe_push_symbol(symbols, model_unk, unk_run);
    bpe_merge(scratch.bpe, merges, out);
    cache.insert(w, std::span<const std::int32_t>(out).subspan(first));
  }
};

// ---- reading tokenizer.json -------------------------------------------------

/// Reads and checks the settings in tokenizer.json; `where` is the JSON path for messages.
class JsonFields {
 public:
  explicit JsonFields(const std::string& file) : file_(file) {}

  const nlohmann::json* get(const nlohmann::json& obj, const char* name) const {
    const auto it = obj.find(name);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
  }
  bool boolean(const nlohmann::json& obj, const std::string& where, const char* name,
               bool fallback) const {
    const nlohmann::json* v = get(obj, name);
    if (!v) return fallback;
    SEQPAR_CHECK(v->is_boolean(), file_, ": ", where, ".", name, " is ", v->dump(),
                 "; expected true or false");
    return v->get<bool>();
  }
  std::string string(const nlohmann::json& obj, const std::string& where, const char* name) const {
    const nlohmann::json* v = get(obj, name);
    SEQPAR_CHECK(v != nullptr, file_, ": ", where, ".", name, " is missing");
    SEQPAR_CHECK(v->is_string(), file_, ": ", where, ".", name, " is ", v->dump(),
                 "; expected a string");
    return v->get<std::string>();
  }
  const nlohmann::json& object(const nlohmann::json& obj, const std::string& where,
                               const char* name) const {
    const nlohmann::json* v = get(obj, name);
    SEQPAR_CHECK(v != nullptr, file_, ": ", where.empty() ? "" : where + ".", name, " is missing");
    SEQPAR_CHECK(v->is_object(), file_, ": ", where.empty() ? "" : where + ".", name, " is ",
                 v->dump(), "; expected an object");
    return *v;
  }
  std::string type(const nlohmann::json& obj, const std::string& where) const {
    SEQPAR_CHECK(obj.is_object(), file_, ": ", where, " is ", obj.dump(), "; expected an object");
    return string(obj, where, "type");
  }
  const std::string& file() const { return file_; }

 private:
  const std::string& file_;
};

inline void read_pre_tokenizer_step(const JsonFields& f, const nlohmann::json& node,
                                    const std::string& where,
                                    std::vector<PreTokenizerStep>& steps) {
  const std::string& file = f.file();
  const std::string type = f.type(node, where);
  if (type == "Split") {
    const nlohmann::json& pattern = f.object(node, where, "pattern");
    const std::string behavior = f.string(node, where, "behavior");
    SEQPAR_CHECK(behavior == "Isolated", file, ": ", where, ".behavior is '", behavior,
                 "'; only Isolated (BLOOM's) is supported");
    SEQPAR_CHECK(!f.boolean(node, where, "invert", false), file, ": ", where,
                 ".invert is true; only false (BLOOM's) is supported");
    PreTokenizerStep step;
    if (pattern.contains("Regex")) {
      const std::string re = f.string(pattern, where + ".pattern", "Regex");
      step.split = std::make_unique<OnigPattern>(re, file + ": " + where + ".pattern.Regex");
      step.bloom_split = re == bloom_split_pattern;
    } else if (pattern.contains("String")) {
      const std::string lit = f.string(pattern, where + ".pattern", "String");
      SEQPAR_CHECK(!lit.empty(), file, ": ", where, ".pattern.String is empty");
      step.split =
          std::make_unique<OnigPattern>(lit, file + ": " + where + ".pattern.String", true);
    } else {
      detail::fail(file, ": ", where, ".pattern is ", pattern.dump(),
                   "; expected {\"Regex\": ...} or {\"String\": ...}");
    }
    steps.push_back(std::move(step));
  } else if (type == "ByteLevel") {
    SEQPAR_CHECK(f.get(node, "add_prefix_space") != nullptr, file, ": ", where,
                 ".add_prefix_space is missing");
    PreTokenizerStep step;
    step.byte_level = true;
    step.add_prefix_space = f.boolean(node, where, "add_prefix_space", false);
    // Hugging Face tokenizers reads a missing use_regex as true.
    if (f.boolean(node, where, "use_regex", true))
      step.split = std::make_unique<OnigPattern>(byte_level_pattern,
                                                 file + ": " + where + " (ByteLevel regex)");
    steps.push_back(std::move(step));
  } else {
    detail::fail(file, ": ", where, ".type is '", type,
                 "'; supported pre-tokenizers are Split (Isolated) and ByteLevel, as BLOOM uses");
  }
}

// An entry of added_tokens, as read (read_added_tokens).
struct AddedToken {
  std::string content;
  std::int32_t id;
  bool special;
  bool normalized;
};

// The model: BPE only, deterministic, byte-level.
inline void read_bpe_model(const JsonFields& f, const nlohmann::json& model,
                           const RawTokenizerJson& raw, TokenizerModel& m) {
  const std::string& file = m.file;
  if (const nlohmann::json* t = f.get(model, "type")) {
    SEQPAR_CHECK(t->is_string() && t->get<std::string>() == "BPE", file, ": model.type is ",
                 t->dump(), "; only BPE models (as BLOOM's) are supported");
  }
  if (const nlohmann::json* d = f.get(model, "dropout")) {
    SEQPAR_CHECK(d->is_number() && d->get<double>() == 0.0, file, ": model.dropout is ", d->dump(),
                 "; BPE dropout is not supported (expected null)");
  }
  for (const char* name : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (const nlohmann::json* v = f.get(model, name)) {
      SEQPAR_CHECK(v->is_string() && v->get<std::string>().empty(), file, ": model.", name, " is ",
                   v->dump(), "; not supported for byte-level BPE (expected null)");
    }
  }
  SEQPAR_CHECK(!f.boolean(model, "model", "byte_fallback", false), file,
               ": model.byte_fallback is true; not supported for byte-level BPE (expected false)");
  m.fuse_unk = f.boolean(model, "model", "fuse_unk", false);
  m.ignore_merges = f.boolean(model, "model", "ignore_merges", false);
  SEQPAR_CHECK(raw.has_vocab, file, ": model.vocab is missing or not an object of token -> id");
  SEQPAR_CHECK(raw.has_merges, file, ": model.merges is missing or not an array");
}

// Settings seqpar does not implement must be absent: a normalizer, a decoder but ByteLevel.
inline void check_unsupported_settings(const JsonFields& f, const nlohmann::json& root,
                                       const std::string& file) {
  if (const nlohmann::json* n = f.get(root, "normalizer")) {
    const bool empty_sequence = n->is_object() && n->value("type", "") == "Sequence" &&
                                n->contains("normalizers") && (*n)["normalizers"].is_array() &&
                                (*n)["normalizers"].empty();
    SEQPAR_CHECK(empty_sequence, file, ": normalizer is ", n->dump(),
                 "; normalizers are not supported (BLOOM's tokenizer has none: expected null)");
  }
  const nlohmann::json* decoder = f.get(root, "decoder");
  SEQPAR_CHECK(decoder != nullptr, file,
               ": decoder is missing; expected {\"type\": \"ByteLevel\"}");
  const std::string decoder_type = f.type(*decoder, "decoder");
  SEQPAR_CHECK(decoder_type == "ByteLevel", file, ": decoder.type is '", decoder_type,
               "'; only the ByteLevel decoder (BLOOM's) is supported");
}

// pre_tokenizer: Split steps, then ByteLevel last.
inline void read_pre_tokenizer(const JsonFields& f, const nlohmann::json& root, TokenizerModel& m) {
  const std::string& file = m.file;
  const nlohmann::json* pre = f.get(root, "pre_tokenizer");
  SEQPAR_CHECK(pre != nullptr, file,
               ": pre_tokenizer is missing; byte-level BPE needs a ByteLevel pre-tokenizer");
  if (f.type(*pre, "pre_tokenizer") == "Sequence") {
    const nlohmann::json* list = f.get(*pre, "pretokenizers");
    SEQPAR_CHECK(list != nullptr && list->is_array(), file,
                 ": pre_tokenizer.pretokenizers is missing or not an array");
    for (std::size_t i = 0; i < list->size(); ++i)
      read_pre_tokenizer_step(f, (*list)[i],
                              "pre_tokenizer.pretokenizers[" + std::to_string(i) + "]", m.steps);
  } else {
    read_pre_tokenizer_step(f, *pre, "pre_tokenizer", m.steps);
  }
  std::size_t byte_level_steps = 0;
  for (const PreTokenizerStep& st : m.steps) byte_level_steps += st.byte_level;
  SEQPAR_CHECK(byte_level_steps == 1 && !m.steps.empty() && m.steps.back().byte_level, file,
               ": pre_tokenizer must end with exactly one ByteLevel step, as BLOOM's does; the "
               "BPE model works on bytes");
}

// added_tokens, checked one by one.
inline std::vector<AddedToken> read_added_tokens(const JsonFields& f, const nlohmann::json& root,
                                                 const std::string& file) {
  const nlohmann::json* added = f.get(root, "added_tokens");
  SEQPAR_CHECK(added == nullptr || added->is_array(), file, ": added_tokens is ",
               added ? added->dump() : "", "; expected an array");
  std::vector<AddedToken> added_tokens;
  if (added) {
    for (std::size_t i = 0; i < added->size(); ++i) {
      const nlohmann::json& t = (*added)[i];
      const std::string where = "added_tokens[" + std::to_string(i) + "]";
      SEQPAR_CHECK(t.is_object(), file, ": ", where, " is ", t.dump(), "; expected an object");
      const nlohmann::json* id = f.get(t, "id");
      SEQPAR_CHECK(
          id != nullptr && id->is_number_unsigned() && id->get<std::uint64_t>() < INT32_MAX, file,
          ": ", where, ".id is ", id ? id->dump() : "missing", "; expected a non-negative integer");
      AddedToken a{f.string(t, where, "content"),
                   static_cast<std::int32_t>(id->get<std::uint64_t>()),
                   f.boolean(t, where, "special", false), false};
      a.normalized = f.boolean(t, where, "normalized", !a.special);
      for (const char* name : {"single_word", "lstrip", "rstrip"}) {
        SEQPAR_CHECK(!f.boolean(t, where, name, false), file, ": ", where, ".", name,
                     " is true for '", a.content,
                     "'; only false (as in BLOOM's added tokens) is supported");
      }
      SEQPAR_CHECK(!a.content.empty(), file, ": ", where, ".content is empty");
      added_tokens.push_back(std::move(a));
    }
  }
  return added_tokens;
}

// Vocabulary: ids 0..id_count-1 across the model and the added tokens; the model's unk.
inline void read_vocab(const JsonFields& f, const nlohmann::json& model, RawTokenizerJson& raw,
                       const std::vector<AddedToken>& added_tokens, TokenizerModel& m) {
  const std::string& file = m.file;
  std::int64_t max_id = -1;
  for (const RawVocabEntry& e : raw.vocab) max_id = std::max<std::int64_t>(max_id, e.id);
  for (const AddedToken& a : added_tokens) max_id = std::max<std::int64_t>(max_id, a.id);
  // Tables are sized by the largest id: ids far above the number of entries would make a
  // small file ask for gigabytes. Real files number their tokens densely (BLOOM: 250680
  // entries, ids 0..250679); a gap of up to the entry count plus 1024 is accepted.
  const auto entries = static_cast<std::int64_t>(raw.vocab.size() + added_tokens.size());
  SEQPAR_CHECK(max_id < 2 * entries + 1024, file, ": the largest token id is ", max_id,
               " but the file has only ", entries,
               " entries (model.vocab and added_tokens); expected ids below ", 2 * entries + 1024,
               " (twice the entries plus 1024)");
  m.id_count = static_cast<std::size_t>(max_id + 1);

  m.vocab.reset(m.id_count, std::move(raw.vocab_text));
  for (const RawVocabEntry& e : raw.vocab) {
    if (!m.vocab.set(e.id, e.begin, e.length)) {
      detail::fail(file, ": model.vocab gives id ", e.id, " to two tokens ('", m.vocab.token(e.id),
                   "' and '", m.vocab.text().substr(e.begin, e.length), "')");
    }
  }
  if (const std::int32_t dup = m.vocab.build_index(); dup >= 0)
    detail::fail(file, ": model.vocab lists the token '", m.vocab.token(dup), "' twice");

  if (const nlohmann::json* u = f.get(model, "unk_token")) {
    SEQPAR_CHECK(u->is_string(), file, ": model.unk_token is ", u->dump(),
                 "; expected a string or null");
    m.model_unk = m.vocab.find(u->get<std::string>());
    SEQPAR_CHECK(m.model_unk >= 0, file, ": model.unk_token '", u->get<std::string>(),
                 "' is not in model.vocab");
  }
}

// Merges: rank = position in the list. Each rule needs three lookups that miss the cache;
// hashing a few rules ahead and prefetching overlaps them.
inline void read_merges(const RawTokenizerJson& raw, TokenizerModel& m) {
  const std::string& file = m.file;
  const std::string_view merge_text(raw.merge_text);
  const auto parts = [&](std::size_t r) {
    const RawMerge& mg = raw.merges[r];
    return std::array<std::string_view, 3>{
        merge_text.substr(mg.begin, mg.left_length),
        merge_text.substr(mg.begin + mg.left_length, mg.right_length),
        merge_text.substr(mg.begin, mg.left_length + mg.right_length)};
  };
  constexpr std::size_t ahead = 8;
  std::array<std::array<std::size_t, 3>, ahead> hashes{};
  const std::size_t merge_count = raw.merges.size();
  const auto start = [&](std::size_t r) {
    const auto p = parts(r);
    for (int k = 0; k < 3; ++k) {
      hashes[r % ahead][k] = TokenIndex::hash(p[k]);
      m.vocab.prefetch(hashes[r % ahead][k]);
    }
  };
  for (std::size_t r = 0; r < std::min(ahead, merge_count); ++r) start(r);
  m.merges.reserve(merge_count);
  for (std::size_t r = 0; r < merge_count; ++r) {
    const auto p = parts(r);
    const auto h = hashes[r % ahead];
    if (r + ahead < merge_count) start(r + ahead);
    const std::int32_t left = m.vocab.find_hashed(p[0], h[0]);
    const std::int32_t right = m.vocab.find_hashed(p[1], h[1]);
    const std::int32_t merged = m.vocab.find_hashed(p[2], h[2]);
    SEQPAR_CHECK(left >= 0, file, ": model.merges[", r, "] uses '", p[0],
                 "', which is not in model.vocab");
    SEQPAR_CHECK(right >= 0, file, ": model.merges[", r, "] uses '", p[1],
                 "', which is not in model.vocab");
    SEQPAR_CHECK(merged >= 0, file, ": model.merges[", r, "] makes '", p[2],
                 "', which is not in model.vocab");
    m.merges.insert(left, right, PairMerge{static_cast<std::uint32_t>(r), merged});
  }
}

// The id of each byte's byte-level spelling.
inline void set_byte_ids(TokenizerModel& m) {
  for (unsigned b = 0; b < 256; ++b) {
    std::string spelled;
    utf8_append(byte_level_chars[b], spelled);
    m.byte_ids[b] = m.vocab.find(spelled);
  }
}

// Added tokens take precedence over the model vocabulary for both lookups.
inline void set_added_tokens(const std::vector<AddedToken>& added_tokens, TokenizerModel& m) {
  const std::string& file = m.file;
  m.is_added.assign(m.id_count, 0);
  m.is_special.assign(m.id_count, 0);
  for (const AddedToken& a : added_tokens) {
    SEQPAR_CHECK(!m.is_added[a.id], file, ": added_tokens gives id ", a.id, " to two tokens ('",
                 m.added_text[a.id], "' and '", a.content, "')");
    m.is_added[a.id] = 1;
    m.added_text[a.id] = a.content;
    m.added_ids.try_emplace(a.content, a.id);
    (a.normalized ? m.added_normalized : m.added_raw).add(a.content, a.id);
  }
  // Hugging Face tokenizers tells a special token by its text, so a model token
  // spelled like a special added token is skipped too.
  for (const AddedToken& a : added_tokens) {
    if (!a.special) continue;
    for (const AddedToken& b : added_tokens)
      if (b.content == a.content) m.is_special[b.id] = 1;
    const std::int32_t id = m.vocab.find(a.content);
    if (id >= 0 && !m.is_added[id]) m.is_special[id] = 1;
  }
  m.added_raw.finish();
  m.added_normalized.finish();
  const auto added_id = [&](std::string_view text) {
    const auto it = m.added_ids.find(text);
    return it == m.added_ids.end() ? -1 : it->second;
  };
  m.pad = added_id("<pad>");
  m.eos = added_id("</s>");
  m.bos = added_id("<s>");
  m.unk = added_id("<unk>");
}

inline std::shared_ptr<TokenizerModel> build_tokenizer(RawTokenizerJson raw,
                                                       const std::string& file) {
  auto m = std::make_shared<TokenizerModel>();
  m->file = file;
  const JsonFields f(m->file);
  const nlohmann::json& root = raw.rest;
  const nlohmann::json& model = f.object(root, "", "model");
  read_bpe_model(f, model, raw, *m);
  check_unsupported_settings(f, root, file);
  read_pre_tokenizer(f, root, *m);
  const std::vector<AddedToken> added_tokens = read_added_tokens(f, root, file);
  read_vocab(f, model, raw, added_tokens, *m);
  read_merges(raw, *m);
  set_byte_ids(*m);
  set_added_tokens(added_tokens, *m);
  return m;
}

}  // namespace detail

SEQPAR_DECL Tokenizer Tokenizer::from_file(const std::filesystem::path& tokenizer_json) {
  return Tokenizer(detail::build_tokenizer(detail::read_tokenizer_json(tokenizer_json),
                                           tokenizer_json.string()));
}

SEQPAR_DECL Tokenizer Tokenizer::from_json(std::string_view text, const std::string& name) {
  return Tokenizer(detail::build_tokenizer(detail::parse_tokenizer_json(text, name), name));
}

SEQPAR_DECL std::vector<std::int32_t> Tokenizer::encode(std::string_view utf8_text) const {
  std::string repaired;
  if (!detail::utf8_valid(utf8_text)) {
    repaired = detail::utf8_lossy(utf8_text);
    utf8_text = repaired;
  }
  std::vector<std::int32_t> ids;
  ids.reserve(utf8_text.size() / 3 + 4);
  detail::EncodeScratch scratch;
  const detail::TokenizerModel& m = *model_;
  m.split_words(
      utf8_text, scratch, [&](std::string_view, std::int32_t id) { ids.push_back(id); },
      [&](std::string_view w) { m.encode_word(w, scratch, ids); });
  return ids;
}

SEQPAR_DECL std::vector<std::string> Tokenizer::pre_tokenize(std::string_view utf8_text) const {
  const std::string text =
      detail::utf8_valid(utf8_text) ? std::string(utf8_text) : detail::utf8_lossy(utf8_text);
  std::vector<std::string> pieces;
  detail::EncodeScratch scratch;
  const detail::TokenizerModel& m = *model_;
  m.split_words(
      text, scratch, [&](std::string_view t, std::int32_t) { pieces.emplace_back(t); },
      [&](std::string_view w) { pieces.push_back(detail::byte_level_encode(w)); });
  return pieces;
}

SEQPAR_DECL std::string Tokenizer::decode(std::span<const std::int32_t> ids,
                                          bool skip_special_tokens) const {
  const detail::TokenizerModel& m = *model_;
  std::string bytes;
  bytes.reserve(ids.size() * 4);
  for (const std::int32_t id : ids) {
    if (!m.has(id)) continue;
    if (skip_special_tokens && m.is_special[id]) continue;
    detail::byte_level_decode_append(m.token(id), bytes);
  }
  if (detail::utf8_valid(bytes)) return bytes;
  return detail::utf8_lossy(bytes);
}

SEQPAR_DECL std::int32_t Tokenizer::token_to_id(std::string_view token) const {
  const detail::TokenizerModel& m = *model_;
  if (!m.added_ids.empty()) {
    const auto it = m.added_ids.find(token);
    if (it != m.added_ids.end()) return it->second;
  }
  return m.vocab.find(token);
}

SEQPAR_DECL std::string_view Tokenizer::id_to_token(std::int32_t id) const {
  return model_->token(id);
}

SEQPAR_DECL std::size_t Tokenizer::vocab_size() const { return model_->id_count; }

SEQPAR_DECL std::int32_t Tokenizer::pad_id() const { return model_->pad; }

SEQPAR_DECL std::int32_t Tokenizer::eos_id() const { return model_->eos; }

SEQPAR_DECL std::int32_t Tokenizer::bos_id() const { return model_->bos; }

SEQPAR_DECL std::int32_t Tokenizer::unk_id() const { return model_->unk; }

}  // namespace seqpar::inline v0

#pragma once
// The two hash tables behind the tokenizer: token text -> id over the model
// vocabulary, and (left id, right id) -> (merge rank, merged id) over the BPE merges.
// Both are open-addressing tables with linear probing, built once at load time.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace seqpar::inline v0::detail {

/// Token texts by id in one buffer, with a hash index from text to id. A slot
/// holds the id, where its text lies and 32 bits of its hash, so a probe reads
/// one slot and, on a likely hit, the text. Loading BLOOM's vocabulary does
/// about a million lookups, each a cache miss; find_hashed() and prefetch() let
/// the loader overlap them.
class TokenIndex {
 public:
  /// Makes room for ids 0..id_count-1; no id has a token until set() gives it one.
  void reset(std::size_t id_count, std::string text) {
    text_ = std::move(text);
    spans_.assign(id_count, Span{0, -1});
    count_ = 0;
    slots_.clear();
  }

  /// Gives `id` the token text()[begin, begin + length). Returns false when the
  /// id already has one.
  bool set(std::int32_t id, std::uint32_t begin, std::uint32_t length) {
    if (spans_[id].length >= 0) return false;
    spans_[id] = Span{begin, static_cast<std::int32_t>(length)};
    ++count_;
    return true;
  }

  /// Builds the hash index. Returns the id of a token whose text another id
  /// already has, or -1 when all texts are distinct.
  std::int32_t build_index() {
    const std::size_t capacity = std::bit_ceil(std::max<std::size_t>(16, count_ * 2));
    slots_.assign(capacity, Slot{0, -1, 0, 0});
    mask_ = capacity - 1;
    constexpr std::size_t ahead = 8;
    const std::size_t n = spans_.size();
    for (std::size_t id = 0; id < n; ++id) {
      if (id + ahead < n && spans_[id + ahead].length >= 0)
        prefetch(hash(token(static_cast<std::int32_t>(id + ahead))));
      if (spans_[id].length < 0) continue;
      const std::string_view t = token(static_cast<std::int32_t>(id));
      const std::size_t h = hash(t);
      const auto tag = static_cast<std::uint32_t>(h >> 32);
      std::size_t s = h & mask_;
      while (slots_[s].id >= 0) {
        if (slots_[s].tag == tag && text_of(slots_[s]) == t) return static_cast<std::int32_t>(id);
        s = (s + 1) & mask_;
      }
      slots_[s] = Slot{tag, static_cast<std::int32_t>(id), spans_[id].begin,
                       static_cast<std::uint32_t>(t.size())};
    }
    return -1;
  }

  static std::size_t hash(std::string_view t) { return std::hash<std::string_view>{}(t); }

  /// Starts loading the slot where a lookup with hash `h` begins.
  void prefetch(std::size_t h) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[h & mask_]);
  }

  /// Id of `t`, whose hash is `h`, or -1.
  std::int32_t find_hashed(std::string_view t, std::size_t h) const {
    if (slots_.empty()) return -1;
    const auto tag = static_cast<std::uint32_t>(h >> 32);
    std::size_t s = h & mask_;
    while (slots_[s].id >= 0) {
      if (slots_[s].tag == tag && text_of(slots_[s]) == t) return slots_[s].id;
      s = (s + 1) & mask_;
    }
    return -1;
  }

  /// Id of `t`, or -1.
  std::int32_t find(std::string_view t) const { return find_hashed(t, hash(t)); }

  bool has(std::int32_t id) const {
    return id >= 0 && static_cast<std::size_t>(id) < spans_.size() && spans_[id].length >= 0;
  }
  std::string_view token(std::int32_t id) const {
    return std::string_view(text_).substr(spans_[id].begin,
                                          static_cast<std::size_t>(spans_[id].length));
  }
  std::string_view text() const { return text_; }
  std::size_t id_count() const { return spans_.size(); }

 private:
  struct Span {
    std::uint32_t begin;
    std::int32_t length;  // -1: no token has this id
  };
  struct Slot {
    std::uint32_t tag;
    std::int32_t id;  // -1: empty
    std::uint32_t begin;
    std::uint32_t length;
  };
  std::string_view text_of(const Slot& s) const {
    return std::string_view(text_).substr(s.begin, s.length);
  }

  std::string text_;
  std::vector<Span> spans_;
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::size_t count_ = 0;
};

/// A merge rule as the merge loop sees it.
struct PairMerge {
  std::uint32_t rank;
  std::int32_t new_id;
};

/// (left, right) -> PairMerge. Inserting a pair again overwrites it, so the last
/// duplicate in the merges list wins, as when Hugging Face tokenizers collects
/// the list into its map.
class PairTable {
 public:
  void reserve(std::size_t n) {
    const std::size_t capacity = std::bit_ceil(std::max<std::size_t>(16, n * 2));
    slots_.assign(capacity, Slot{empty_key, {0, -1}});
    mask_ = capacity - 1;
    shift_ = 64 - std::countr_zero(capacity);
    size_ = 0;
  }

  /// Starts loading the slot of (left, right).
  void prefetch(std::int32_t left, std::int32_t right) const {
    __builtin_prefetch(&slots_[slot_of(key(left, right))]);
  }

  void insert(std::int32_t left, std::int32_t right, PairMerge m) {
    const std::uint64_t k = key(left, right);
    std::size_t s = slot_of(k);
    while (slots_[s].key != empty_key && slots_[s].key != k) s = (s + 1) & mask_;
    if (slots_[s].key == empty_key) ++size_;
    slots_[s] = Slot{k, m};
  }

  /// The merge of (left, right), or nullptr.
  const PairMerge* find(std::int32_t left, std::int32_t right) const {
    const std::uint64_t k = key(left, right);
    std::size_t s = slot_of(k);
    while (true) {
      const Slot& slot = slots_[s];
      if (slot.key == k) return &slot.merge;
      if (slot.key == empty_key) return nullptr;
      s = (s + 1) & mask_;
    }
  }

  std::size_t size() const { return size_; }

 private:
  struct Slot {
    std::uint64_t key;
    PairMerge merge;
  };
  static constexpr std::uint64_t empty_key = ~std::uint64_t{0};
  static std::uint64_t key(std::int32_t l, std::int32_t r) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(l)) << 32) |
           static_cast<std::uint32_t>(r);
  }
  // Fibonacci hashing: the top bits of key * 2^64/phi spread consecutive ids.
  std::size_t slot_of(std::uint64_t k) const {
    return static_cast<std::size_t>((k * 0x9E3779B97F4A7C15ull) >> shift_) & mask_;
  }
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  int shift_ = 63;
  std::size_t size_ = 0;
};

}  // namespace seqpar::inline v0::detail

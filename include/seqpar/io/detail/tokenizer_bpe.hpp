#pragma once
// The BPE merge loop and the word cache.
//
// Merge order is the one of Hugging Face tokenizers: a min-heap of candidate
// pairs keyed by (merge rank, position); the lowest rank merges first and, among
// equal ranks, the leftmost. Merging updates the neighbours' candidate pairs in
// place, so a word of n symbols costs O(n log n) instead of the O(n^2) of
// rescanning for the best pair after every merge.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/io/detail/tokenizer_tables.hpp"

namespace seqpar::inline v0::detail {

/// One symbol of a word being merged; a doubly linked list over the array.
struct BpeSymbol {
  std::int32_t id;
  std::int32_t prev;  // -1 at the start
  std::int32_t next;  // -1 at the end
  std::int32_t len;   // bytes covered; 0 once merged into its left neighbour
};

/// A candidate merge of the symbol at `pos` with the one after it.
struct BpeCandidate {
  std::uint32_t rank;
  std::int32_t pos;
  std::int32_t new_id;
};

/// Scratch space reused across the words of one encode call.
struct BpeScratch {
  std::vector<BpeSymbol> symbols;
  std::vector<BpeCandidate> heap;
};

/// Appends a symbol for `id` covering `len` bytes to the end of the word.
inline void bpe_push_symbol(std::vector<BpeSymbol>& symbols, std::int32_t id, std::int32_t len) {
  const auto n = static_cast<std::int32_t>(symbols.size());
  if (n > 0) symbols.back().next = n;
  symbols.push_back(BpeSymbol{id, n - 1, -1, len});
}

/// Merges the symbols of one word by the rules in `pairs` and appends the
/// resulting ids to `out`.
inline void bpe_merge(BpeScratch& scratch, const PairTable& pairs, std::vector<std::int32_t>& out) {
  auto& sym = scratch.symbols;
  auto& heap = scratch.heap;
  // std::push_heap keeps the largest on top; "larger" here is lower (rank, pos).
  const auto later = [](const BpeCandidate& a, const BpeCandidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  heap.clear();
  for (std::size_t i = 0; i + 1 < sym.size(); ++i) {
    if (const PairMerge* m = pairs.find(sym[i].id, sym[i + 1].id))
      heap.push_back(BpeCandidate{m->rank, static_cast<std::int32_t>(i), m->new_id});
  }
  std::make_heap(heap.begin(), heap.end(), later);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const BpeCandidate top = heap.back();
    heap.pop_back();
    BpeSymbol& left = sym[top.pos];
    if (left.len == 0 || left.next < 0) continue;
    const BpeSymbol right = sym[left.next];
    // A stale candidate: one side has merged with something else since.
    const PairMerge* now = pairs.find(left.id, right.id);
    if (now == nullptr || now->new_id != top.new_id) continue;

    sym[left.next].len = 0;
    left.id = top.new_id;
    left.len += right.len;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = top.pos;

    if (left.prev >= 0) {
      if (const PairMerge* m = pairs.find(sym[left.prev].id, left.id)) {
        heap.push_back(BpeCandidate{m->rank, left.prev, m->new_id});
        std::push_heap(heap.begin(), heap.end(), later);
      }
    }
    if (left.next >= 0) {
      if (const PairMerge* m = pairs.find(left.id, sym[left.next].id)) {
        heap.push_back(BpeCandidate{m->rank, top.pos, m->new_id});
        std::push_heap(heap.begin(), heap.end(), later);
      }
    }
  }
  for (const BpeSymbol& s : sym)
    if (s.len != 0) out.push_back(s.id);
}

/// A quick hash for short byte strings (words of a few bytes): eight bytes per
/// multiply-xorshift round.
inline std::uint64_t word_hash(std::string_view s) {
  const std::size_t n = s.size();
  std::uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  if (i < n) {
    std::uint64_t w = 0;
    std::memcpy(&w, s.data() + i, n - i);
    h = (h ^ w) * 0x94D049BB133111EBull;
    h ^= h >> 29;
  }
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 32);
}

/// Remembers the ids of recently encoded words: an open-addressing table over
/// one arena that holds each word's bytes followed by its ids. Shared by all
/// threads that encode with one tokenizer; a thread that finds it locked by
/// another does the merge itself instead of waiting. When full it starts over
/// empty, so it follows the words of the current text.
class WordCache {
 public:
  static constexpr std::size_t max_word_bytes = 256;

  /// Room for `capacity` words (rounded up to a power of two).
  explicit WordCache(std::size_t capacity)
      : slots_(std::bit_ceil(std::max<std::size_t>(16, capacity * 2))),
        max_words_(slots_.size() / 2) {}

  /// Appends the ids of `word` to `out` when cached; returns whether it was.
  bool lookup(std::string_view word, std::vector<std::int32_t>& out) const {
    if (word.size() > max_word_bytes) return false;
    const std::uint64_t h = word_hash(word) | 1;  // 0 marks an empty slot
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t s = h & mask;; s = (s + 1) & mask) {
      const Slot& slot = slots_[s];
      if (slot.hash == 0) return false;
      if (slot.hash != h || slot.word_bytes != word.size()) continue;
      const char* rec = arena_.data() + slot.offset;
      if (std::memcmp(rec, word.data(), word.size()) != 0) continue;
      const std::size_t at = out.size();
      out.resize(at + slot.id_count);
      std::memcpy(out.data() + at, rec + ids_offset(word.size()),
                  slot.id_count * sizeof(std::int32_t));
      return true;
    }
  }

  void insert(std::string_view word, std::span<const std::int32_t> ids) {
    if (word.size() > max_word_bytes || ids.size() > 0xFFFF) return;
    const std::uint64_t h = word_hash(word) | 1;
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock()) return;
    if (words_ >= max_words_) {
      std::fill(slots_.begin(), slots_.end(), Slot{});
      arena_.clear();
      words_ = 0;
    }
    const std::size_t mask = slots_.size() - 1;
    std::size_t s = h & mask;
    while (slots_[s].hash != 0) {
      if (slots_[s].hash == h && slots_[s].word_bytes == word.size() &&
          std::memcmp(arena_.data() + slots_[s].offset, word.data(), word.size()) == 0)
        return;  // another thread cached it meanwhile
      s = (s + 1) & mask;
    }
    const std::size_t offset = arena_.size();
    arena_.resize(offset + ids_offset(word.size()) + ids.size() * sizeof(std::int32_t));
    std::memcpy(arena_.data() + offset, word.data(), word.size());
    std::memcpy(arena_.data() + offset + ids_offset(word.size()), ids.data(),
                ids.size() * sizeof(std::int32_t));
    slots_[s] = Slot{h, static_cast<std::uint32_t>(offset), static_cast<std::uint16_t>(word.size()),
                     static_cast<std::uint16_t>(ids.size())};
    ++words_;
  }

 private:
  struct Slot {
    std::uint64_t hash = 0;
    std::uint32_t offset = 0;  // of the record in arena_
    std::uint16_t word_bytes = 0;
    std::uint16_t id_count = 0;
  };
  // The ids of a record start at the next multiple of 4 after its word.
  static std::size_t ids_offset(std::size_t word_bytes) {
    return (word_bytes + 3) & ~std::size_t{3};
  }

  mutable std::mutex mutex_;
  std::vector<Slot> slots_;
  std::vector<char> arena_;
  std::size_t max_words_;
  std::size_t words_ = 0;
};

}  // namespace seqpar::inline v0::detail

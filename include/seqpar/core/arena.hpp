#pragma once
// Arena and Buffer: every allocation of a rank, counted by category (current and peak bytes).

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <new>
#include <utility>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/core/omp.hpp"
#include "seqpar/core/profile.hpp"

namespace seqpar::inline v0 {

/// What a block of memory holds; the trainer reports and the plan model predicts each.
/// `gathered_parameters`: ZeRO-3's full parameters of a unit in use (its shard is a
/// `parameters` block). `unreduced_gradients`: ZeRO-2/3's full-size gradients of a unit
/// and the block a reduce-scatter makes of them, between the backward that writes them and
/// the reduction into the gradient shard. Both are transient: none is left after a step.
/// `host_optimizer` and `host_parameters`: state offloaded to host memory.
enum class Memory : std::uint8_t {
  parameters,
  gradients,
  optimizer,
  activations,
  buffers,
  gathered_parameters,
  unreduced_gradients,
  host_optimizer,
  host_parameters
};
inline constexpr std::size_t memory_kinds = 9;

/// The category's name as reports and the planner's JSON spell it.
constexpr const char* memory_name(Memory m) {
  constexpr const char* names[memory_kinds] = {
      "parameters",          "gradients",           "optimizer",      "activations",    "buffers",
      "gathered_parameters", "unreduced_gradients", "host_optimizer", "host_parameters"};
  return names[static_cast<std::size_t>(m)];
}

/// Whether a category is host memory (offloaded state) rather than the device's.
constexpr bool host_memory(Memory m) {
  return m == Memory::host_optimizer || m == Memory::host_parameters;
}

/// Current and peak bytes per category, and of all categories together.
struct MemoryStats {
  std::array<std::int64_t, memory_kinds> current{};
  std::array<std::int64_t, memory_kinds> peak{};
  std::int64_t total_current = 0;
  std::int64_t total_peak = 0;

  std::int64_t current_of(Memory m) const { return current[static_cast<std::size_t>(m)]; }
  std::int64_t peak_of(Memory m) const { return peak[static_cast<std::size_t>(m)]; }
};

/// Host memory, 64-byte aligned (a cache line; AVX-512 loads). Its arena keeps freed
/// blocks for reuse (the device allocator keeps its own cache).
struct HostAllocator {
  static constexpr std::size_t alignment = 64;
  static constexpr bool arena_caches = true;
  static void* allocate(std::size_t bytes) {
    return ::operator new (bytes, std::align_val_t{alignment});
  }
  static void deallocate(void* p, std::size_t) {
    ::operator delete (p, std::align_val_t{alignment});
  }
  /// Sets every byte to `byte`; large blocks by all threads (when built with OpenMP), in
  /// 1 MiB pieces.
  static void fill(void* p, unsigned char byte, std::size_t bytes) {
    constexpr std::size_t piece = std::size_t{1} << 20;
    const auto pieces = static_cast<std::int64_t>((bytes + piece - 1) / piece);
#ifdef _OPENMP  // core is also compiled without OpenMP, where an unknown pragma is a warning
SEQPAR_OMP(parallel for schedule(static) if (pieces > 1))
#endif
for (std::int64_t i = 0; i < pieces; ++i) {
  const std::size_t at = static_cast<std::size_t>(i) * piece;
  std::memset(static_cast<char*>(p) + at, byte, std::min(piece, bytes - at));
}
  }
};

/// A rank's allocator: forwards to `Alloc` and keeps the books. One arena per rank;
/// not shared between threads. Where the allocator asks for it (`Alloc::arena_caches`),
/// freed blocks are kept by size and handed out again, so that memory freed and asked for
/// again every step (activation records, gathered shards) does not go back to the system
/// and fault in anew each time; the blocks kept never take the arena past its peak
/// (`reserved_bytes() <= stats().total_peak`). The counts are of live blocks only.
template <class Alloc>
class BasicArena {
 public:
  using allocator = Alloc;

  BasicArena() = default;
  BasicArena(const BasicArena&) = delete;
  BasicArena& operator=(const BasicArena&) = delete;
  ~BasicArena() { release_cached(); }

  void* allocate(std::size_t bytes, Memory kind) {
    const profile::Scope timed(profile::Phase::arena);
    void* p = bytes ? take(bytes) : nullptr;
    account(kind, static_cast<std::int64_t>(bytes));
    return p;
  }
  void deallocate(void* p, std::size_t bytes, Memory kind) {
    const profile::Scope timed(profile::Phase::arena);
    if (p) {
      if constexpr (caches) {
        cached_[bytes].push_back(p);
        cached_bytes_ += static_cast<std::int64_t>(bytes);
      } else {
        Alloc::deallocate(p, bytes);
      }
    }
    account(kind, -static_cast<std::int64_t>(bytes));
  }
  const MemoryStats& stats() const { return stats_; }
  /// Starts a new peak window (peaks restart at the current values).
  void reset_peaks() {
    stats_.peak = stats_.current;
    stats_.total_peak = stats_.total_current;
  }
  /// Bytes held from the allocator: the live blocks and the freed ones kept for reuse.
  std::int64_t reserved_bytes() const { return stats_.total_current + cached_bytes_; }
  /// Returns every kept block to the allocator.
  void release_cached() {
    for (auto& [bytes, blocks] : cached_)
      for (void* p : blocks) Alloc::deallocate(p, bytes);
    cached_.clear();
    cached_bytes_ = 0;
  }

 private:
  static constexpr bool caches = requires { requires Alloc::arena_caches; };

  void* take(std::size_t bytes) {
    if constexpr (caches) {
      if (auto it = cached_.find(bytes); it != cached_.end()) {
        void* p = it->second.back();
        it->second.pop_back();
        if (it->second.empty()) cached_.erase(it);
        cached_bytes_ -= static_cast<std::int64_t>(bytes);
        return p;
      }
      // a new block: first give back kept ones (largest first) that would hold the arena
      // above the larger of its peak and what it is about to hold live
      const auto live_after = stats_.total_current + static_cast<std::int64_t>(bytes);
      const auto bound = std::max(stats_.total_peak, live_after);
      while (!cached_.empty() && live_after + cached_bytes_ > bound) {
        auto largest = std::prev(cached_.end());
        Alloc::deallocate(largest->second.back(), largest->first);
        cached_bytes_ -= static_cast<std::int64_t>(largest->first);
        largest->second.pop_back();
        if (largest->second.empty()) cached_.erase(largest);
      }
    }
    return Alloc::allocate(bytes);
  }
  void account(Memory kind, std::int64_t delta) {
    const auto k = static_cast<std::size_t>(kind);
    stats_.current[k] += delta;
    stats_.total_current += delta;
    if (stats_.current[k] > stats_.peak[k]) stats_.peak[k] = stats_.current[k];
    if (stats_.total_current > stats_.total_peak) stats_.total_peak = stats_.total_current;
  }
  MemoryStats stats_;
  std::map<std::size_t, std::vector<void*>> cached_;  // freed blocks by size
  std::int64_t cached_bytes_ = 0;
};

using Arena = BasicArena<HostAllocator>;

/// An owning array of T from an arena, zero-initialised, except activations: the op that
/// makes an activation writes all of it before anything reads it, so its Buffer is left as
/// the allocator hands it over (a program built with SEQPAR_POISON_ACTIVATIONS, as the
/// tests are, fills it with 0xFF bytes instead: NaN in every floating type, so a read
/// before the write shows). Move-only; an empty Buffer owns nothing.
template <class T, class ArenaT = Arena>
class Buffer {
 public:
  Buffer() = default;
  Buffer(ArenaT& arena, std::size_t n, Memory kind) : arena_(&arena), n_(n), kind_(kind) {
    data_ = static_cast<T*>(arena.allocate(n * sizeof(T), kind));
    if (n == 0) return;
    if (kind != Memory::activations) ArenaT::allocator::fill(data_, 0, n * sizeof(T));
#if defined(SEQPAR_POISON_ACTIVATIONS)
    else
      ArenaT::allocator::fill(data_, 0xFF, n * sizeof(T));
#endif
  }
  Buffer(Buffer&& o) noexcept { swap(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    Buffer(std::move(o)).swap(*this);
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  void reset() {
    if (arena_) arena_->deallocate(data_, n_ * sizeof(T), kind_);
    arena_ = nullptr;
    data_ = nullptr;
    n_ = 0;
  }
  void swap(Buffer& o) noexcept {
    std::swap(arena_, o.arena_);
    std::swap(data_, o.data_);
    std::swap(n_, o.n_);
    std::swap(kind_, o.kind_);
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }
  T* begin() { return data_; }
  T* end() { return data_ + n_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + n_; }

 private:
  ArenaT* arena_ = nullptr;
  T* data_ = nullptr;
  std::size_t n_ = 0;
  Memory kind_ = Memory::buffers;
};

}  // namespace seqpar::inline v0

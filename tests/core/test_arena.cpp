// The arena's books (live bytes by category, peaks) and its cache of freed host blocks.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "seqpar/core/arena.hpp"
#include "seqpar/core/rng.hpp"

using namespace seqpar;

namespace {
#if defined(SEQPAR_POISON_ACTIVATIONS)
constexpr bool poisoned = true;
#else
constexpr bool poisoned = false;
#endif
}  // namespace

TEST_CASE(
    "arena: live bytes and peaks by category; buffers come zeroed, activations (in tests) NaN") {
  static_assert(poisoned, "the tests are built with SEQPAR_POISON_ACTIVATIONS");
  Arena arena;
  {
    Buffer<float> a(arena, 100, Memory::activations);
    Buffer<double> g(arena, 10, Memory::gradients);
    CHECK(arena.stats().current_of(Memory::activations) == 400);
    CHECK(arena.stats().current_of(Memory::gradients) == 80);
    CHECK(arena.stats().total_current == 480);
    for (double x : g) REQUIRE(x == 0.0);
    for (float x : a) REQUIRE(std::isnan(x));  // written by the op that makes it, never read first
    a[3] = 7.0f;
  }
  CHECK(arena.stats().total_current == 0);
  CHECK(arena.stats().total_peak == 480);
  CHECK(arena.stats().peak_of(Memory::activations) == 400);
  // a block handed out again is zeroed again (the activation's block, 7 at [3])
  Buffer<float> again(arena, 100, Memory::buffers);
  for (float x : again) REQUIRE(x == 0.0f);
}

TEST_CASE(
    "arena: a freed host block is handed out again for the same size, and counted as live only") {
  Arena arena;
  void* first = nullptr;
  {
    Buffer<float> a(arena, 1 << 20, Memory::activations);
    first = a.data();
  }
  CHECK(arena.stats().total_current == 0);
  CHECK(arena.reserved_bytes() == 4 << 20);  // kept for reuse
  Buffer<float> b(arena, 1 << 20, Memory::buffers);
  CHECK(static_cast<void*>(b.data()) == first);
  CHECK(arena.stats().current_of(Memory::buffers) == 4 << 20);
  CHECK(arena.reserved_bytes() == 4 << 20);
  b.reset();
  arena.release_cached();
  CHECK(arena.reserved_bytes() == 0);
}

TEST_CASE("arena: the blocks kept never take it past its peak, whatever the sizes asked for") {
  Arena arena;
  const CounterRng rng(3, "arena sizes");
  std::vector<Buffer<float>> live;
  for (std::uint64_t i = 0; i < 2000; ++i) {
    // a varying working set of varying sizes, as variable-length batches give
    if (live.size() > 6 || (rng.bits(2 * i) % 3 == 0 && !live.empty()))
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(rng.bits(2 * i + 1) % live.size()));
    else
      live.emplace_back(arena, 1000 + rng.bits(2 * i + 1) % 20 * 1000, Memory::activations);
    REQUIRE(arena.reserved_bytes() <=
            std::max(arena.stats().total_peak, arena.stats().total_current));
    REQUIRE(arena.reserved_bytes() >= arena.stats().total_current);
  }
  live.clear();
  CHECK(arena.stats().total_current == 0);
  CHECK(arena.reserved_bytes() <= arena.stats().total_peak);
}

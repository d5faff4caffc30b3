#pragma once
// Seeded normal test inputs from the counter-based generator: the same values on every
// machine and thread count.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "seqpar/core/rng.hpp"

namespace seqpar::test {

/// n values scale * N(0, 1) from generator stream (seed, name), rounded once to T.
template <class T>
std::vector<T> normal_values(std::size_t n, std::uint64_t seed, double scale,
                             std::string_view name) {
  std::vector<T> v(n);
  const CounterRng rng(seed, name);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>(scale * rng.normal(i));
  return v;
}

}  // namespace seqpar::test

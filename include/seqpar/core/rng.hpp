#pragma once
// Counter-based random numbers: a value depends only on (seed, stream name, index), so
// any shard of any plan draws the same numbers for the same elements.

#include <cmath>
#include <cstdint>
#include <numbers>
#include <string_view>

namespace seqpar::inline v0 {

namespace detail {
constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
constexpr std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}
}  // namespace detail

/// A stream of independent draws keyed by (seed, name); draw i is a pure function of i.
class CounterRng {
 public:
  constexpr CounterRng(std::uint64_t seed, std::string_view name)
      : key_(detail::splitmix64(seed ^ detail::splitmix64(detail::fnv1a(name)))) {}

  constexpr std::uint64_t bits(std::uint64_t i, std::uint64_t lane = 0) const {
    return detail::splitmix64(key_ ^ detail::splitmix64(i * 2 + lane));
  }
  /// Uniform in (0, 1): never 0, so log() is safe.
  double uniform(std::uint64_t i, std::uint64_t lane = 0) const {
    return (static_cast<double>(bits(i, lane) >> 11) + 0.5) * 0x1.0p-53;
  }
  /// Standard normal by Box-Muller on two lanes of draw i.
  double normal(std::uint64_t i) const {
    const double r = std::sqrt(-2.0 * std::log(uniform(i, 0)));
    return r * std::cos(2.0 * std::numbers::pi * uniform(i, 1));
  }

 private:
  std::uint64_t key_;
};

}  // namespace seqpar::inline v0

#pragma once
// Character offsets for the strings an answer names. An answer carries no positions, so a
// string that occurs more than once in the text is placed by one rule (docs/tasks.md,
// "Offsets"): the strings of a record are placed longest first (ties in the order given);
// each takes the first occurrence of itself that overlaps no span placed before it, else
// its first occurrence. A string the text does not hold gets no span. Offsets are CLUENER's:
// code points, 0-based, end inclusive.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/data/record.hpp"

namespace seqpar::inline v0 {

/// The spans of `strings` in `text` by the rule above (std::nullopt: not in the text, or
/// empty), in the order of `strings`.
inline std::vector<std::optional<CharSpan>> place_spans(std::string_view text,
                                                        std::span<const std::string> strings) {
  const std::vector<std::size_t> offsets = detail::code_point_offsets(text);
  // The code point that starts at byte b, or -1 when b is inside a character.
  const auto code_point_at = [&](std::size_t b) -> std::int64_t {
    const auto it = std::lower_bound(offsets.begin(), offsets.end(), b);
    return it != offsets.end() && *it == b ? it - offsets.begin() : -1;
  };
  std::vector<std::size_t> order(strings.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return strings[a].size() > strings[b].size();
  });
  std::vector<std::optional<CharSpan>> out(strings.size());
  std::vector<CharSpan> placed;
  for (const std::size_t i : order) {
    const std::string& s = strings[i];
    if (s.empty()) continue;
    std::optional<CharSpan> first, free;
    for (std::size_t at = text.find(s); at != std::string_view::npos && !free;
         at = text.find(s, at + 1)) {
      const std::int64_t b = code_point_at(at), e = code_point_at(at + s.size());
      if (b < 0 || e < 0) continue;  // not on character boundaries
      const CharSpan c{b, e - 1};
      if (!first) first = c;
      if (std::none_of(placed.begin(), placed.end(),
                       [&](const CharSpan& p) { return c.start <= p.end && p.start <= c.end; }))
        free = c;
    }
    out[i] = free ? free : first;
    if (out[i]) placed.push_back(*out[i]);
  }
  return out;
}

}  // namespace seqpar::inline v0

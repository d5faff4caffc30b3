#pragma once
// BLOOM's Split pattern ` ?[^(\s|[.,!?…。，、।۔،])]+` matched by hand: Oniguruma's per-search
// setup was half the encode time. The bracket is one negated class, so ( | ) are members.

#include <array>
#include <cstddef>
#include <string_view>

#include "seqpar/io/detail/utf8.hpp"

namespace seqpar::inline v0::detail {

/// The Split regex of BLOOM's tokenizer.json.
inline constexpr std::string_view bloom_split_pattern = " ?[^(\\s|[.,!?…。，、।۔،])]+";

inline constexpr std::array<bool, 128> bloom_ascii_word = [] {
  std::array<bool, 128> t{};
  for (unsigned c = 0; c < 128; ++c) t[c] = true;
  for (unsigned c : {0x09u, 0x0Au, 0x0Bu, 0x0Cu, 0x0Du, 0x20u}) t[c] = false;
  for (char c : std::string_view("().,!?|")) t[static_cast<unsigned char>(c)] = false;
  return t;
}();

/// Code points above U+007F outside the class, besides U+2000..U+200A.
inline constexpr std::array<char32_t, 15> bloom_non_word = {0x0085, 0x00A0, 0x060C, 0x06D4, 0x0964,
                                                            0x1680, 0x2026, 0x2028, 0x2029, 0x202F,
                                                            0x205F, 0x3000, 0x3001, 0x3002, 0xFF0C};

/// Whether code point `cp` is in the class [^(\s|[.,!?…。，、।۔،])].
inline constexpr bool bloom_word_char(char32_t cp) {
  if (cp < 0x80) return bloom_ascii_word[cp];
  if ((cp > 0x3002 && cp < 0xFF0C) || cp > 0xFF0C) return true;  // CJK ideographs and most else
  if (cp >= 0x2000 && cp <= 0x200A) return false;
  for (const char32_t x : bloom_non_word)
    if (cp == x) return false;
  return true;
}

/// Calls piece(begin, end, is_match) for the matches of bloom_split_pattern in
/// `s` (well-formed UTF-8) and the gaps between them, in order, exactly as
/// OnigPattern::split does with that pattern.
template <class F>
void bloom_split(std::string_view s, F&& piece) {
  const std::size_t n = s.size();
  std::size_t prev = 0;  // end of the last match
  std::size_t i = 0;
  while (i < n) {
    std::size_t j = i;
    const char32_t cp = utf8_next(s, j);
    if (!bloom_word_char(cp)) {
      i = j;
      continue;
    }
    const std::size_t start = (i > prev && s[i - 1] == ' ') ? i - 1 : i;
    // Extend over the run of word characters; ASCII ones without decoding.
    while (j < n) {
      const auto b = static_cast<unsigned char>(s[j]);
      if (b < 0x80) {
        if (!bloom_ascii_word[b]) break;
        ++j;
        continue;
      }
      std::size_t k = j;
      if (!bloom_word_char(utf8_next(s, k))) break;
      j = k;
    }
    if (start > prev) piece(prev, start, false);
    piece(start, j, true);
    prev = j;
    i = j;
  }
  if (prev < n) piece(prev, n, false);
}

}  // namespace seqpar::inline v0::detail

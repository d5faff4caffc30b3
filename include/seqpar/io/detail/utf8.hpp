#pragma once
// UTF-8 helpers for the tokenizer: validity checks, code point decoding and
// encoding, and the lossy repair that replaces every maximal ill-formed subpart
// with U+FFFD (the Unicode "substitution of maximal subparts" practice, which
// Python's bytes.decode('utf-8', 'replace') and Rust's String::from_utf8_lossy follow).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace seqpar::inline v0::detail {

inline constexpr std::string_view utf8_replacement = "\xEF\xBF\xBD";  // U+FFFD

/// Length of the well-formed sequence that starts at s[i] (1..4), or 0 when the
/// bytes there are ill-formed; then `bad` is the length of the maximal subpart
/// (at least 1) that one U+FFFD replaces.
inline std::size_t utf8_sequence_at(std::string_view s, std::size_t i, std::size_t& bad) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  bad = 1;
  if (b0 < 0x80) return 1;
  std::size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;  // 80..C1 and F5..FF never start a sequence
  }
  std::size_t k = i + 1;
  if (k >= s.size() || byte(k) < lo || byte(k) > hi) return 0;
  for (++k; k < i + need; ++k) {
    if (k >= s.size() || byte(k) < 0x80 || byte(k) > 0xBF) {
      bad = k - i;
      return 0;
    }
  }
  return need;
}

/// True when `s` is well-formed UTF-8.
inline bool utf8_valid(std::string_view s) {
  std::size_t i = 0;
  const std::size_t n = s.size();
  while (i < n) {
    // ASCII runs are the common case: test 8 bytes at a time.
    while (i + 8 <= n) {
      std::uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    std::size_t bad;
    const std::size_t len = utf8_sequence_at(s, i, bad);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

/// Appends `s` to `out`, each maximal ill-formed subpart replaced by U+FFFD.
inline void utf8_append_lossy(std::string_view s, std::string& out) {
  std::size_t i = 0;
  std::size_t run = 0;  // start of the pending well-formed run
  while (i < s.size()) {
    std::size_t bad;
    const std::size_t len = utf8_sequence_at(s, i, bad);
    if (len > 0) {
      i += len;
      continue;
    }
    out.append(s.substr(run, i - run));
    out.append(utf8_replacement);
    i += bad;
    run = i;
  }
  out.append(s.substr(run));
}

/// `s` with each maximal ill-formed subpart replaced by U+FFFD.
inline std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  utf8_append_lossy(s, out);
  return out;
}

/// Appends the UTF-8 encoding of code point `cp` (at most U+10FFFF) to `out`.
inline void utf8_append(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

/// Decodes the code point at s[i] and advances i past it; `s` must be
/// well-formed at i (checked by the caller).
inline char32_t utf8_next(std::string_view s, std::size_t& i) {
  const auto byte = [&](std::size_t k) {
    return static_cast<char32_t>(static_cast<unsigned char>(s[k]));
  };
  const char32_t b0 = byte(i);
  if (b0 < 0x80) {
    i += 1;
    return b0;
  }
  if (b0 < 0xE0) {
    const char32_t cp = ((b0 & 0x1F) << 6) | (byte(i + 1) & 0x3F);
    i += 2;
    return cp;
  }
  if (b0 < 0xF0) {
    const char32_t cp = ((b0 & 0x0F) << 12) | ((byte(i + 1) & 0x3F) << 6) | (byte(i + 2) & 0x3F);
    i += 3;
    return cp;
  }
  const char32_t cp = ((b0 & 0x07) << 18) | ((byte(i + 1) & 0x3F) << 12) |
                      ((byte(i + 2) & 0x3F) << 6) | (byte(i + 3) & 0x3F);
  i += 4;
  return cp;
}

}  // namespace seqpar::inline v0::detail

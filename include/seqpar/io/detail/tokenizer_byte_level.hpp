#pragma once
// The byte-level alphabet of GPT-2-style BPE: every byte 0..255 gets a printable
// code point. Bytes that are printable Latin-1 ('!'..'~', U+00A1..U+00AC,
// U+00AE..U+00FF) stand for themselves; the other 68 bytes, in increasing order,
// take U+0100, U+0101, ... (so ' ' is U+0120 'Ġ' and '\n' is U+010A 'Ċ').

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "seqpar/io/detail/utf8.hpp"

namespace seqpar::inline v0::detail {

inline constexpr bool byte_level_is_printable(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

/// Code point that stands for each byte.
inline constexpr std::array<char32_t, 256> byte_level_chars = [] {
  std::array<char32_t, 256> table{};
  char32_t next = 0x100;
  for (unsigned b = 0; b < 256; ++b) table[b] = byte_level_is_printable(b) ? char32_t(b) : next++;
  return table;
}();

/// Highest code point of the alphabet, plus one.
inline constexpr char32_t byte_level_char_end = 0x100 + 68;

/// Byte that each code point below byte_level_char_end stands for, or -1.
inline constexpr std::array<std::int16_t, byte_level_char_end> byte_level_bytes = [] {
  std::array<std::int16_t, byte_level_char_end> table{};
  for (auto& v : table) v = -1;
  for (unsigned b = 0; b < 256; ++b) table[byte_level_chars[b]] = static_cast<std::int16_t>(b);
  return table;
}();

/// The byte-level spelling (as in tokenizer.json) of raw bytes.
inline std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) utf8_append(byte_level_chars[b], out);
  return out;
}

/// Appends the raw bytes a byte-level token stands for. A token with any
/// character outside the alphabet (an added token such as "你好") stands for its
/// own UTF-8 bytes, as the ByteLevel decoder of Hugging Face tokenizers does.
inline void byte_level_decode_append(std::string_view token, std::string& out) {
  const std::size_t start = out.size();
  std::size_t i = 0;
  while (i < token.size()) {
    std::size_t bad;
    if (utf8_sequence_at(token, i, bad) == 0) break;
    const char32_t cp = utf8_next(token, i);
    if (cp >= byte_level_char_end || byte_level_bytes[cp] < 0) {
      out.resize(start);
      out.append(token);
      return;
    }
    out.push_back(static_cast<char>(byte_level_bytes[cp]));
  }
  if (i != token.size()) {
    out.resize(start);
    out.append(token);
  }
}

}  // namespace seqpar::inline v0::detail

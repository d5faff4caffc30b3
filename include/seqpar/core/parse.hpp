#pragma once
// Strict numbers from text (file metadata, command lines): the whole text in plain
// decimal, in range, finite. std::stoll and std::stod accept leading blanks, trailing
// junk, hexadecimal, "inf" and "nan", and say only "stoll" when they fail.

#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

#include "seqpar/core/error.hpp"

namespace seqpar::inline v0::detail {

/// `text` as a T when all of it is one decimal number that T holds: integers without a
/// sign other than '-', floating point in plain or exponent notation and finite.
/// Hexadecimal, "inf", "nan", blanks, a '+' and values out of T's range give nullopt.
template <class T>
requires std::is_arithmetic_v<T> std::optional<T> parse_number(std::string_view text) {
  T v{};
  if (text.empty()) return std::nullopt;
  const char* end = text.data() + text.size();
  std::from_chars_result r;
  if constexpr (std::is_floating_point_v<T>)
    r = std::from_chars(text.data(), end, v, std::chars_format::general);
  else
    r = std::from_chars(text.data(), end, v, 10);
  if (r.ec != std::errc{} || r.ptr != end) return std::nullopt;
  if constexpr (std::is_floating_point_v<T>)
    if (!std::isfinite(v)) return std::nullopt;
  return v;
}

/// parse_number, or a seqpar::Error naming `where` (a file), the field and the value.
template <class T>
T parse_field(std::string_view text, const std::string& where, std::string_view field) {
  if (const auto v = parse_number<T>(text)) return *v;
  fail(where, ": ", field, " is '", text, "'; expected ",
       std::is_floating_point_v<T> ? "a finite number (plain decimal)"
       : std::is_signed_v<T>       ? "an integer (plain decimal, in range)"
                                   : "a non-negative integer (plain decimal, in range)");
}

}  // namespace seqpar::inline v0::detail

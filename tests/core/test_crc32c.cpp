// crc32c against the published check values (RFC 3720, appendix B.4; the "123456789" check
// of the CRC catalogue) and a bit-at-a-time reference; the hardware and table paths agree
// at every length, alignment and split.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/core/crc32c.hpp"

using namespace seqpar;

namespace {

std::span<const std::byte> bytes_of(std::string_view s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

std::span<const std::byte> bytes_of(const std::vector<std::uint8_t>& v) {
  return std::as_bytes(std::span<const std::uint8_t>(v));
}

// The definition, one bit at a time: reflected, initial and final value 0xFFFFFFFF.
std::uint32_t reference(std::span<const std::byte> bytes) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (const std::byte b : bytes) {
    c ^= std::to_integer<std::uint32_t>(b);
    for (int i = 0; i < 8; ++i) c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
  }
  return ~c;
}

std::vector<std::uint8_t> noise(std::size_t n) {
  std::vector<std::uint8_t> v(n);
  std::uint64_t x = 0x9e3779b97f4a7c15ull;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<std::uint8_t>(x >> 24);
  }
  return v;
}

}  // namespace

TEST_CASE("crc32c: the published check values") {
  CHECK(crc32c(bytes_of("123456789")) == 0xE3069283u);
  CHECK(crc32c({}) == 0u);
  // RFC 3720, B.4: 32 bytes of zeros, of ones, ascending and descending
  std::vector<std::uint8_t> zeros(32, 0), ones(32, 0xff), up(32), down(32);
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<std::uint8_t>(i);
    down[i] = static_cast<std::uint8_t>(31 - i);
  }
  CHECK(crc32c(bytes_of(zeros)) == 0x8A9136AAu);
  CHECK(crc32c(bytes_of(ones)) == 0x62A8AB43u);
  CHECK(crc32c(bytes_of(up)) == 0x46DD794Eu);
  CHECK(crc32c(bytes_of(down)) == 0x113FDB5Cu);
}

TEST_CASE("crc32c: both paths equal the bit-at-a-time definition at every length and offset") {
  namespace c = detail::castagnoli;
  // past two rounds of the three hardware streams, with every tail length around them
  const std::vector<std::uint8_t> data = noise(6 * c::stream_bytes + 64);
  MESSAGE("the SSE4.2 path is ", std::string(c::hardware_available() ? "" : "not "),
          "available here");
  std::vector<std::size_t> lengths;
  for (std::size_t n = 0; n <= 80; ++n) lengths.push_back(n);
  for (std::size_t k = 1; k <= 2; ++k)
    for (std::size_t d = 0; d <= 9; ++d) {
      lengths.push_back(3 * k * c::stream_bytes - d);
      lengths.push_back(3 * k * c::stream_bytes + d);
    }
  for (const std::size_t n : lengths)
    for (std::size_t offset : {0, 1, 3, 7}) {
      CAPTURE(n);
      CAPTURE(offset);
      const auto span = bytes_of(data).subspan(offset, n);
      const std::uint32_t want = reference(span);
      const auto* p = reinterpret_cast<const unsigned char*>(span.data());
      CHECK(~c::portable(0xFFFFFFFFu, p, n) == want);
      if (c::hardware_available()) CHECK(~c::hardware(0xFFFFFFFFu, p, n) == want);
      CHECK(crc32c(span) == want);
    }
}

TEST_CASE("crc32c continues over a split, and a flipped bit anywhere changes it") {
  const std::vector<std::uint8_t> data = noise(40000);
  const auto all = bytes_of(data);
  const std::uint32_t whole = crc32c(all);
  for (std::size_t cut : {std::size_t{0}, std::size_t{5}, std::size_t{12288}, std::size_t{39999}})
    CHECK(crc32c(all.subspan(cut), crc32c(all.first(cut))) == whole);
  std::vector<std::uint8_t> flipped = data;
  for (std::size_t at : {std::size_t{0}, std::size_t{4095}, std::size_t{20000}, data.size() - 1})
    for (int bit = 0; bit < 8; ++bit) {
      flipped[at] ^= static_cast<std::uint8_t>(1u << bit);
      CHECK(crc32c(bytes_of(flipped)) != whole);
      flipped[at] ^= static_cast<std::uint8_t>(1u << bit);
    }
  CHECK(crc32c(bytes_of(flipped)) == whole);
}

#pragma once
// crc32c: the CRC-32C (Castagnoli polynomial, as iSCSI, ext4 and Btrfs use it) of a byte
// range, the checksum seqpar stores with every tensor it saves. Where the CPU has SSE4.2
// (asked at run time, so no -msse4.2 is needed) it runs the crc32 instruction on three
// interleaved streams, whose results one table lookup per byte joins: about 8 bytes a
// cycle. Elsewhere a table-driven loop, eight bytes a step.
//
// Why this checksum: every single-bit error, every burst up to 32 bits and every error of
// up to three bits in a message below 2^31 bits is detected, and readers in other languages
// have it at hand (Python: `crc32c` or `google-crc32c`; Rust: `crc32c`).

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(__CUDA_ARCH__)
#define SEQPAR_CRC32C_X86 1
#include "seqpar/core/x86_intrinsics.hpp"
#else
#define SEQPAR_CRC32C_X86 0
#endif

namespace seqpar::inline v0 {

namespace detail::castagnoli {

inline constexpr std::uint32_t polynomial = 0x82F63B78u;  // 0x1EDC6F41 bit-reversed

// The hardware path's stream length: three streams of this many bytes a round, joined by
// shifting the first two over the bytes that follow them.
inline constexpr std::size_t stream_bytes = 4096;

// bytewise[k][b]: the register after byte b entered it and k zero bytes followed;
// shift[k][b]: byte k of the register, value b, moved over stream_bytes zero bytes.
struct Tables {
  std::array<std::array<std::uint32_t, 256>, 8> bytewise{};
  std::array<std::array<std::uint32_t, 256>, 4> shift{};
};

inline Tables make_tables() {
  Tables t;
  for (std::uint32_t b = 0; b < 256; ++b) {
    std::uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c >> 1) ^ (polynomial & (0u - (c & 1u)));
    t.bytewise[0][b] = c;
  }
  for (std::size_t k = 1; k < 8; ++k)
    for (std::uint32_t b = 0; b < 256; ++b) {
      const std::uint32_t prev = t.bytewise[k - 1][b];
      t.bytewise[k][b] = (prev >> 8) ^ t.bytewise[0][prev & 0xffu];
    }
  // Moving a register over zero bytes is linear in its bits: find the image of each bit,
  // then of each byte value as the sum (xor) of its bits' images.
  std::array<std::uint32_t, 32> bit_image{};
  for (int i = 0; i < 32; ++i) {
    std::uint32_t c = 1u << i;
    for (std::size_t z = 0; z < stream_bytes; ++z) c = (c >> 8) ^ t.bytewise[0][c & 0xffu];
    bit_image[static_cast<std::size_t>(i)] = c;
  }
  for (std::size_t k = 0; k < 4; ++k)
    for (std::uint32_t b = 0; b < 256; ++b) {
      std::uint32_t c = 0;
      for (int i = 0; i < 8; ++i)
        if (b & (1u << i)) c ^= bit_image[k * 8 + static_cast<std::size_t>(i)];
      t.shift[k][b] = c;
    }
  return t;
}

inline const Tables& tables() {
  static const Tables t = make_tables();
  return t;
}

// The register `c` moved over stream_bytes zero bytes.
inline std::uint32_t shift_over_stream(const Tables& t, std::uint32_t c) {
  return t.shift[0][c & 0xffu] ^ t.shift[1][(c >> 8) & 0xffu] ^ t.shift[2][(c >> 16) & 0xffu] ^
         t.shift[3][c >> 24];
}

// The register (not inverted) after `n` bytes at `p`, eight at a time.
inline std::uint32_t portable(std::uint32_t c, const unsigned char* p, std::size_t n) {
  const Tables& t = tables();
  for (; n >= 8; n -= 8, p += 8) {
    const auto le32 = [](const unsigned char* q) {  // the bytes' order, whatever the CPU's
      return std::uint32_t{q[0]} | std::uint32_t{q[1]} << 8 | std::uint32_t{q[2]} << 16 |
             std::uint32_t{q[3]} << 24;
    };
    const std::uint32_t lo = le32(p) ^ c, hi = le32(p + 4);
    c = t.bytewise[7][lo & 0xffu] ^ t.bytewise[6][(lo >> 8) & 0xffu] ^
        t.bytewise[5][(lo >> 16) & 0xffu] ^ t.bytewise[4][lo >> 24] ^ t.bytewise[3][hi & 0xffu] ^
        t.bytewise[2][(hi >> 8) & 0xffu] ^ t.bytewise[1][(hi >> 16) & 0xffu] ^
        t.bytewise[0][hi >> 24];
  }
  for (; n > 0; --n, ++p) c = (c >> 8) ^ t.bytewise[0][(c ^ *p) & 0xffu];
  return c;
}

#if SEQPAR_CRC32C_X86 && defined(__x86_64__)
inline bool hardware_available() { return __builtin_cpu_supports("sse4.2"); }

__attribute__((target("sse4.2"))) inline std::uint32_t one_stream(std::uint32_t c,
                                                                  const unsigned char* p,
                                                                  std::size_t n) {
  std::uint64_t c64 = c;
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    c64 = _mm_crc32_u64(c64, w);
  }
  c = static_cast<std::uint32_t>(c64);
  for (; n > 0; --n, ++p) c = _mm_crc32_u8(c, *p);
  return c;
}

// The crc32 instruction takes three cycles and can start one a cycle: three independent
// streams keep it busy. Stream a continues the register; b and c start from 0 and are
// joined by linearity: crc(a b c) = shift(shift(crc(a)) ^ crc(b)) ^ crc(c).
__attribute__((target("sse4.2"))) inline std::uint32_t hardware(std::uint32_t c,
                                                                const unsigned char* p,
                                                                std::size_t n) {
  const Tables& t = tables();
  constexpr std::size_t words = stream_bytes / 8;
  for (; n >= 3 * stream_bytes; n -= 3 * stream_bytes, p += 3 * stream_bytes) {
    std::uint64_t a = c, b = 0, d = 0;
    for (std::size_t i = 0; i < words; ++i) {
      std::uint64_t wa, wb, wd;
      std::memcpy(&wa, p + 8 * i, 8);
      std::memcpy(&wb, p + stream_bytes + 8 * i, 8);
      std::memcpy(&wd, p + 2 * stream_bytes + 8 * i, 8);
      a = _mm_crc32_u64(a, wa);
      b = _mm_crc32_u64(b, wb);
      d = _mm_crc32_u64(d, wd);
    }
    c = shift_over_stream(t, shift_over_stream(t, static_cast<std::uint32_t>(a)) ^
                                 static_cast<std::uint32_t>(b)) ^
        static_cast<std::uint32_t>(d);
  }
  return one_stream(c, p, n);
}
#else
inline bool hardware_available() { return false; }
inline std::uint32_t hardware(std::uint32_t c, const unsigned char* p, std::size_t n) {
  return portable(c, p, n);
}
#endif

}  // namespace detail::castagnoli

/// The CRC-32C of `bytes` following bytes whose CRC-32C is `crc` (0 for none), so that
/// crc32c(b, crc32c(a)) is the CRC-32C of a then b. crc32c("123456789") is 0xE3069283.
inline std::uint32_t crc32c(std::span<const std::byte> bytes, std::uint32_t crc = 0) {
  namespace c = detail::castagnoli;
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::uint32_t reg = ~crc;
  return ~(c::hardware_available() ? c::hardware(reg, p, bytes.size())
                                   : c::portable(reg, p, bytes.size()));
}

}  // namespace seqpar::inline v0

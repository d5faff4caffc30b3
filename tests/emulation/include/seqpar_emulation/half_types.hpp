#pragma once
// __half and __nv_bfloat16 of the emulated device: the toolkit's layout (the 16 bits in one
// unsigned short), conversions from float rounding to nearest even and to float exactly, NaNs
// made canonical as the device's conversions make them (0x7fff; a half NaN widens to
// 0x7fffffff, a bf16 one keeps its bits). A double is rounded once (through float rounded to
// odd, which then rounds to 16 bits as the double would).

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace seqpar::emu::bits16 {

inline std::uint16_t float_to_bf16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float bf16_to_float(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

inline std::uint16_t float_to_half(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t x = u & 0x7fffffffu;
  if (x > 0x7f800000u) return 0x7fffu;                                      // NaN
  if (x >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // 65520 and up: inf
  if (x >= 0x38800000u)                                                     // a normal half
    return static_cast<std::uint16_t>(sign |
                                      ((x - 0x38000000u + 0x0fffu + ((x >> 13) & 1u)) >> 13));
  if (x < 0x33000000u) return sign;  // below 2^-25: zero (2^-25 itself ties to zero)
  // A subnormal half: units of 2^-24, rounded to nearest even.
  const std::uint32_t e = x >> 23, m = (x & 0x7fffffu) | 0x800000u, shift = 126 - e;
  std::uint32_t r = m >> shift;
  const std::uint32_t rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rest > half || (rest == half && (r & 1u))) ++r;
  return static_cast<std::uint16_t>(sign | r);
}

inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f)
    return std::bit_cast<float>(m ? 0x7fffffffu : sign | 0x7f800000u);  // NaN: canonical
  if (e != 0) return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
  const float v = static_cast<float>(m) * 0x1p-24f;  // subnormal (or zero): exact
  return sign ? -v : v;
}

// d rounded to float toward odd: a later rounding to fewer bits is then d's own rounding.
inline float round_to_odd(double d) {
  float f = static_cast<float>(d);
  if (!std::isfinite(f) || static_cast<double>(f) == d) return f;
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) --u;  // rounded away from zero: back
  return std::bit_cast<float>(u | 1u);
}

}  // namespace seqpar::emu::bits16

struct __half_raw {
  unsigned short x;
};
struct __nv_bfloat16_raw {
  unsigned short x;
};

struct __half {
  __half() = default;
  __half(const __half_raw& r) : __x(r.x) {}
  __half(float f) : __x(seqpar::emu::bits16::float_to_half(f)) {}
  __half(double d)
      : __x(seqpar::emu::bits16::float_to_half(seqpar::emu::bits16::round_to_odd(d))) {}
  template <class I>
  requires std::is_integral_v<I> __half(I i) : __half(static_cast<double>(i)) {}
  operator float() const { return seqpar::emu::bits16::half_to_float(__x); }
  operator __half_raw() const { return {__x}; }
  unsigned short __x;
};

struct __nv_bfloat16 {
  __nv_bfloat16() = default;
  __nv_bfloat16(const __nv_bfloat16_raw& r) : __x(r.x) {}
  __nv_bfloat16(float f) : __x(seqpar::emu::bits16::float_to_bf16(f)) {}
  __nv_bfloat16(double d)
      : __x(seqpar::emu::bits16::float_to_bf16(seqpar::emu::bits16::round_to_odd(d))) {}
  template <class I>
  requires std::is_integral_v<I> __nv_bfloat16(I i) : __nv_bfloat16(static_cast<double>(i)) {}
  operator float() const { return seqpar::emu::bits16::bf16_to_float(__x); }
  operator __nv_bfloat16_raw() const { return {__x}; }
  unsigned short __x;
};

static_assert(sizeof(__half) == 2 && std::is_trivially_copyable_v<__half>);
static_assert(sizeof(__nv_bfloat16) == 2 && std::is_trivially_copyable_v<__nv_bfloat16>);

inline __half __float2half_rn(float f) { return __half(f); }
inline __half __float2half(float f) { return __half(f); }
inline float __half2float(__half h) { return static_cast<float>(h); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline float __bfloat162float(__nv_bfloat16 b) { return static_cast<float>(b); }
inline __half __double2half(double d) { return __half(d); }
inline __nv_bfloat16 __double2bfloat16(double d) { return __nv_bfloat16(d); }
inline bool __hisnan(__half h) { return std::isnan(static_cast<float>(h)); }
inline bool __hisnan(__nv_bfloat16 b) { return std::isnan(static_cast<float>(b)); }

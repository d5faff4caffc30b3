#pragma once
// Storage dtypes (f32, f16, bf16, ...) and exact host conversions of the 16-bit floats.

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "seqpar/core/error.hpp"

namespace seqpar::inline v0 {

/// Element types that appear in checkpoint files and device buffers.
enum class DType : std::uint8_t { f64, f32, f16, bf16, i64, i32, i16, i8, u8, boolean };

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f64:
    case DType::i64: return 8;
    case DType::f32:
    case DType::i32: return 4;
    case DType::f16:
    case DType::bf16:
    case DType::i16: return 2;
    case DType::i8:
    case DType::u8:
    case DType::boolean: return 1;
  }
  return 0;
}

/// The safetensors spelling ("F32", "BF16", ...).
constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f64: return "F64";
    case DType::f32: return "F32";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::i64: return "I64";
    case DType::i32: return "I32";
    case DType::i16: return "I16";
    case DType::i8: return "I8";
    case DType::u8: return "U8";
    case DType::boolean: return "BOOL";
  }
  return "?";
}

/// bfloat16 bits -> float (exact).
inline float bf16_to_float(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

/// float -> bfloat16 bits, round to nearest even; NaN stays NaN.
inline std::uint16_t float_to_bf16(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

/// IEEE half bits -> float (exact, subnormals included).
inline float f16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t man = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while ((man & 0x400u) == 0) {
        man <<= 1;
        --exp;
      }
      man &= 0x3ffu;
      bits = sign | (exp << 23) | (man << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  return std::bit_cast<float>(bits);
}

/// float -> IEEE half bits, round to nearest even, overflow to infinity.
inline std::uint16_t float_to_f16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520: inf
  if (abs < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    // value * 2^24 rounded to nearest even gives the subnormal mantissa.
    const float scaled = std::bit_cast<float>(abs) * 16777216.0f;
    const auto m = static_cast<std::uint32_t>(scaled);
    const float frac = scaled - static_cast<float>(m);
    std::uint32_t r = m + ((frac > 0.5f || (frac == 0.5f && (m & 1u))) ? 1u : 0u);
    return static_cast<std::uint16_t>(sign | r);
  }
  std::uint32_t r = abs - ((127 - 15) << 23);
  r += 0xfffu + ((r >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | (r >> 13));
}

// The CUDA backend's own conversions (cvt.rn.bf16.f32, cvt.rn.f16.f32, cvt.f32.f16 and
// bf16's shift), bit for bit on the host: what an offloaded 16-bit model's gradients are
// widened and its weights narrowed with on the host, so that they equal the device's.
// They differ from the conversions above only in NaNs, which CUDA makes canonical.

/// float -> bfloat16 bits as the device rounds: to nearest even, every NaN to 0x7fff.
inline std::uint16_t device_float_to_bf16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
  return float_to_bf16(f);
}

/// float -> IEEE half bits as the device rounds: to nearest even (65520 and above to
/// infinity), subnormals included, every NaN to 0x7fff.
inline std::uint16_t device_float_to_f16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
  return float_to_f16(f);
}

/// bfloat16 bits -> float as the device widens: exact, NaN payloads kept.
inline float device_bf16_to_float(std::uint16_t bits) { return bf16_to_float(bits); }

/// IEEE half bits -> float as the device widens: exact, every NaN to 0x7fffffff.
inline float device_f16_to_float(std::uint16_t h) {
  if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0)
    return std::bit_cast<float>(std::uint32_t{0x7fffffffu});
  return f16_to_float(h);
}

/// A 16-bit float in host code: its bits, with the layout of CUDA's __nv_bfloat16 (D =
/// bf16) or __half (D = f16), so that device buffers of those types cross communicators
/// as these; and the CPU's 16-bit storage (StorageOf<Cpu, bf16 | f16>). As CUDA's types it
/// is made from a number (explicitly: float, double or an integer, rounded once to nearest
/// even) and converts to float (exactly); arithmetic goes through float. Bits are given by
/// from_bits: Float16{0x3f80} is the number 16256.
template <DType D>
struct Float16 {
  static_assert(D == DType::bf16 || D == DType::f16, "Float16: bf16 or f16");
  static constexpr DType dtype = D;
  std::uint16_t bits = 0;

  Float16() = default;
  explicit Float16(float f) : bits(D == DType::bf16 ? float_to_bf16(f) : float_to_f16(f)) {}
  /// d rounded once: through float rounded to odd, which keeps every bit a 16-bit rounding
  /// of d needs (float has at least two more), so no tie is made or lost on the way.
  explicit Float16(double d) : Float16(round_to_odd(d)) {}
  template <class I>
  requires std::is_integral_v<I>
  explicit Float16(I i) : Float16(static_cast<double>(i)) {}

  static Float16 from_bits(std::uint16_t b) {
    Float16 h;
    h.bits = b;
    return h;
  }
  static Float16 from_float(float f) { return Float16(f); }
  float to_float() const { return D == DType::bf16 ? bf16_to_float(bits) : f16_to_float(bits); }
  operator float() const { return to_float(); }     // NOLINT: as CUDA's 16-bit types
  bool operator==(const Float16&) const = default;  // bitwise

 private:
  static float round_to_odd(double d) {
    const auto f = static_cast<float>(d);
    if (static_cast<double>(f) == d || f != f) return f;
    std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    if (std::fabs(static_cast<double>(f)) > std::fabs(d)) --u;  // the neighbour towards zero
    return std::bit_cast<float>(u | 1u);
  }
};
using Bf16Bits = Float16<DType::bf16>;
using F16Bits = Float16<DType::f16>;

/// Whether T is one of the host's 16-bit floats (Float16<bf16 | f16>).
template <class T>
inline constexpr bool is_float16 = false;
template <DType D>
inline constexpr bool is_float16<Float16<D>> = true;

/// The type values of storage type T are computed, reduced and kept in: float for a 16-bit
/// float (the host's or a device's), T itself otherwise.
template <class T>
using WideType = std::conditional_t<(sizeof(T) < sizeof(float)), float, T>;

/// x as its WideType: a 16-bit float widened exactly to float, anything else unchanged.
template <class T>
requires(std::is_arithmetic_v<T> || is_float16<T>) WideType<T> widen(T x) {
  if constexpr (is_float16<T>)
    return x.to_float();
  else
    return x;
}

/// x as T: to a 16-bit float rounded to nearest even (NaN stays NaN), anything else unchanged.
template <class T>
requires(std::is_arithmetic_v<T> || is_float16<T>) T narrow(WideType<T> x) {
  if constexpr (is_float16<T>)
    return T(x);
  else
    return x;
}

}  // namespace seqpar::inline v0

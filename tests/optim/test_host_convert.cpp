// The host's 16-bit widening and narrowing (optim/host_convert.hpp, core/dtype.hpp's
// device_* conversions) against an independent reference of what the CUDA backend does:
// IEEE round to nearest even found by searching the 16-bit values themselves (ties to the
// even pattern, overflow to infinity at the midpoint beyond the largest finite value),
// exact widening by ldexp, and CUDA's canonical NaNs (0x7fff; 0x7fffffff from a half).
// The inputs are every bf16 and fp16 pattern (normals, subnormals, zeros, infinities, NaNs
// with their payloads), the midpoint between each pair of neighbours (the ties) and the
// floats either side of it, float subnormals, overflow thresholds and random floats.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "seqpar/optim/host_convert.hpp"

using namespace seqpar;

namespace {

struct Format {
  DType dt;
  int mantissa_bits;       // stored mantissa bits: 7 (bf16), 10 (fp16)
  int exponent_bias;       // 127, 15
  std::uint16_t inf_bits;  // +infinity: 0x7f80, 0x7c00
};
constexpr Format kBf16{DType::bf16, 7, 127, 0x7f80};
constexpr Format kF16{DType::f16, 10, 15, 0x7c00};

// The exact value of a finite, non-negative pattern (sign bit clear) below infinity, or,
// for the infinity pattern, the power of two one step beyond the largest finite value
// (IEEE rounds to infinity exactly when the nearest in that widened range is it).
double value_of(const Format& f, std::uint16_t bits) {
  const int e = bits >> f.mantissa_bits;
  const int m = bits & ((1 << f.mantissa_bits) - 1);
  if (e == 0) return std::ldexp(m, 1 - f.exponent_bias - f.mantissa_bits);
  return std::ldexp((1 << f.mantissa_bits) + m, e - f.exponent_bias - f.mantissa_bits);
}

bool is_nan(const Format& f, std::uint16_t bits) { return (bits & 0x7fffu) > f.inf_bits; }

// The reference narrowing of x: a binary search for the largest pattern not above |x|,
// then the nearer of it and the next one, a tie to the even one.
std::uint16_t reference_narrow(const Format& f, float x) {
  if (std::isnan(x)) return 0x7fffu;
  const std::uint16_t sign = std::signbit(x) ? 0x8000u : 0u;
  const double a = std::fabs(static_cast<double>(x));
  if (std::isinf(x) || a >= value_of(f, f.inf_bits)) return sign | f.inf_bits;
  std::uint32_t lo = 0, hi = f.inf_bits;  // value(lo) <= a < value(hi)
  while (hi - lo > 1) {
    const std::uint32_t mid = (lo + hi) / 2;
    (value_of(f, static_cast<std::uint16_t>(mid)) <= a ? lo : hi) = mid;
  }
  const double dlo = a - value_of(f, static_cast<std::uint16_t>(lo));
  const double dhi = value_of(f, static_cast<std::uint16_t>(hi)) - a;
  const std::uint32_t r = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
  return static_cast<std::uint16_t>(sign | r);
}

// The reference widening: the exact value; a half NaN is CUDA's canonical float NaN.
std::uint32_t reference_widen(const Format& f, std::uint16_t bits) {
  if (is_nan(f, bits))
    return f.dt == DType::bf16 ? static_cast<std::uint32_t>(bits) << 16 : 0x7fffffffu;
  const std::uint16_t mag = bits & 0x7fffu;
  const double v = mag == f.inf_bits ? std::numeric_limits<double>::infinity() : value_of(f, mag);
  return std::bit_cast<std::uint32_t>(static_cast<float>((bits & 0x8000u) ? -v : v));
}

// Every pattern's value, the midpoints to its neighbour and the floats beside them, both
// signs; float subnormals, the overflow thresholds, NaNs of several payloads, random floats.
std::vector<float> narrowing_inputs(const Format& f) {
  std::vector<float> xs;
  const auto both = [&](float v) {
    xs.push_back(v);
    xs.push_back(-v);
  };
  for (std::uint32_t b = 0; b < f.inf_bits; ++b) {
    const double v = value_of(f, static_cast<std::uint16_t>(b));
    const double next = value_of(f, static_cast<std::uint16_t>(b + 1));
    const auto mid = static_cast<float>((v + next) / 2);  // exact: fewer bits than a float's
    both(static_cast<float>(v));
    both(mid);
    both(std::nextafter(mid, 0.0f));
    both(std::nextafter(mid, std::numeric_limits<float>::infinity()));
  }
  for (std::uint32_t b = 1; b < 64; ++b) both(std::bit_cast<float>(b));  // float subnormals
  both(std::bit_cast<float>(0x007fffffu));
  both(std::numeric_limits<float>::max());
  both(std::numeric_limits<float>::infinity());
  for (const std::uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7fbfffffu, 0x7fffffffu, 0x7fd23456u})
    both(std::bit_cast<float>(nan));
  std::uint64_t s = 88172645463325252ull;  // xorshift: any float pattern
  for (int i = 0; i < 200000; ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    xs.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(s)));
  }
  return xs;
}

void check_format(const Format& f) {
  CAPTURE(dtype_name(f.dt));
  // narrowing
  const auto xs = narrowing_inputs(f);
  std::vector<std::uint16_t> got(xs.size());
  host_narrow(got.data(), xs.data(), static_cast<std::int64_t>(xs.size()), f.dt, 2);
  std::int64_t wrong = 0, inexact = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const std::uint16_t want = reference_narrow(f, xs[i]);
    if (got[i] != want && wrong++ < 5) {
      CAPTURE(std::bit_cast<std::uint32_t>(xs[i]));
      CHECK(got[i] == want);
    }
    const double a = std::fabs(static_cast<double>(xs[i]));
    if (!std::isnan(xs[i]) && a < value_of(f, f.inf_bits) && a != 0 &&
        static_cast<double>(std::bit_cast<float>(reference_widen(f, want & 0x7fffu))) != a)
      ++inexact;
  }
  CHECK(wrong == 0);
  CHECK(inexact > 100000);  // the rounding paths ran, not only exact values

  // widening: every pattern
  std::vector<std::uint16_t> all(65536);
  for (std::uint32_t b = 0; b < 65536; ++b) all[b] = static_cast<std::uint16_t>(b);
  std::vector<float> wide(all.size());
  host_widen(wide.data(), all.data(), 65536, f.dt, 2);
  wrong = 0;
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    if (std::bit_cast<std::uint32_t>(wide[b]) != reference_widen(f, bits) && wrong++ < 5) {
      CAPTURE(b);
      CHECK(std::bit_cast<std::uint32_t>(wide[b]) == reference_widen(f, bits));
    }
    // what is widened narrows back to itself (NaNs to the canonical one)
    const std::uint16_t back =
        f.dt == DType::bf16 ? device_float_to_bf16(wide[b]) : device_float_to_f16(wide[b]);
    if (back != (is_nan(f, bits) ? 0x7fffu : bits) && wrong++ < 5) {
      CAPTURE(b);
      CHECK(back == bits);
    }
  }
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("host narrowing and widening of bf16 are the device's, for every pattern class") {
  check_format(kBf16);
  // the classes by hand: a tie to even either way, the smallest subnormal, overflow, NaN
  CHECK(device_float_to_bf16(std::bit_cast<float>(0x3f808000u)) == 0x3f80u);  // tie, even below
  CHECK(device_float_to_bf16(std::bit_cast<float>(0x3f818000u)) == 0x3f82u);  // tie, even above
  CHECK(device_float_to_bf16(std::bit_cast<float>(0x00010000u)) == 0x0001u);
  CHECK(device_float_to_bf16(std::bit_cast<float>(0x7f7fffffu)) == 0x7f80u);  // to infinity
  CHECK(device_float_to_bf16(std::bit_cast<float>(0xffc12345u)) == 0x7fffu);  // canonical NaN
}

TEST_CASE("host narrowing and widening of fp16 are the device's, for every pattern class") {
  check_format(kF16);
  CHECK(device_float_to_f16(65519.996f) == 0x7bffu);  // below the midpoint: the largest half
  CHECK(device_float_to_f16(65520.0f) == 0x7c00u);    // the midpoint ties to infinity (even)
  CHECK(device_float_to_f16(std::ldexp(1.0f, -24)) == 0x0001u);  // the smallest subnormal
  CHECK(device_float_to_f16(std::ldexp(1.0f, -25)) == 0x0000u);  // its half ties to zero
  CHECK(device_float_to_f16(std::ldexp(3.0f, -26)) == 0x0001u);  // above the tie
  CHECK(std::bit_cast<std::uint32_t>(device_f16_to_float(0xfe01u)) == 0x7fffffffu);
}

TEST_CASE("host_widen and host_narrow refuse a dtype that is not 16-bit, naming it") {
  std::uint16_t h = 0;
  float x = 1;
  CHECK_THROWS_WITH_AS(host_narrow(&h, &x, 1, DType::f32), doctest::Contains("dtype F32"), Error);
  CHECK_THROWS_WITH_AS(host_widen(&x, &h, 1, DType::i16), doctest::Contains("dtype I16"), Error);
}

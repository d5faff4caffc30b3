#pragma once
// F32x8: eight floats in an AVX2 register, so that Ops<Cpu> evaluates backend/kernels.hpp's shared
// element bodies eight at a time (exp_of, tanh_of, sqrt_of by ADL); exp is within 2 ulp and tanh
// within 4e-7 relative of std.

#if !defined(__AVX2__) || !defined(__FMA__)
#error \
    "simd_avx2.hpp needs AVX2 and FMA; include backend/cpu/ops.hpp, which picks it when they are on"
#endif

#include "seqpar/core/x86_intrinsics.hpp"

#include <cstdint>
#include <limits>

#include "seqpar/core/dtype.hpp"

namespace seqpar::inline v0::detail {

// Eight 16-bit values widened to floats, and eight floats rounded to them (as Float16).
inline __m256 load8(const Bf16Bits* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline void store8(Bf16Bits* p, __m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r =
      _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  r = _mm256_blendv_epi8(r, quiet, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                   _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1)));
}
inline __m256 load8(const F16Bits* p) {
#ifdef __F16C__
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#else
  alignas(32) float f[8];
  for (int i = 0; i < 8; ++i) f[i] = p[i].to_float();
  return _mm256_load_ps(f);
#endif
}
inline void store8(F16Bits* p, __m256 v) {
#ifdef __F16C__
  // F16C keeps a NaN's payload; core/dtype.hpp's float_to_f16 makes it sign | 0x7e00
  const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256i nan = _mm256_or_si256(
      _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(v), 16), _mm256_set1_epi32(0x8000)),
      _mm256_set1_epi32(0x7e00));
  const __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  const __m128i nan16 =
      _mm_packus_epi32(_mm256_castsi256_si128(nan), _mm256_extracti128_si256(nan, 1));
  const __m128i mask16 =
      _mm_packs_epi32(_mm256_castsi256_si128(is_nan), _mm256_extracti128_si256(is_nan, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm_blendv_epi8(h, nan16, mask16));
#else
  alignas(32) float f[8];
  _mm256_store_ps(f, v);
  for (int i = 0; i < 8; ++i) p[i] = F16Bits(f[i]);
#endif
}
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline void store8(float* p, __m256 v) { _mm256_storeu_ps(p, v); }

struct F32x8 {
  static constexpr int lanes = 8;
  __m256 v;

  F32x8() = default;
  F32x8(__m256 x) : v(x) {}
  F32x8(float x) : v(_mm256_set1_ps(x)) {}  // NOLINT: the bodies write T(0.5) for constants

  static F32x8 load(const float* p) { return _mm256_loadu_ps(p); }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
  static F32x8 load(const Bf16Bits* p) { return load8(p); }
  void store(Bf16Bits* p) const { store8(p, v); }
  static F32x8 load(const F16Bits* p) { return load8(p); }
  void store(F16Bits* p) const { store8(p, v); }
  /// The sum of the eight lanes.
  float sum() const {
    const __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(q, _mm_shuffle_ps(q, q, 1)));
  }
  float max() const {
    const __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 q = _mm_max_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_max_ss(q, _mm_shuffle_ps(q, q, 1)));
  }

  friend F32x8 operator+(F32x8 a, F32x8 b) { return _mm256_add_ps(a.v, b.v); }
  friend F32x8 operator-(F32x8 a, F32x8 b) { return _mm256_sub_ps(a.v, b.v); }
  friend F32x8 operator*(F32x8 a, F32x8 b) { return _mm256_mul_ps(a.v, b.v); }
  friend F32x8 operator/(F32x8 a, F32x8 b) { return _mm256_div_ps(a.v, b.v); }
  friend F32x8 operator-(F32x8 a) { return _mm256_xor_ps(a.v, _mm256_set1_ps(-0.0f)); }
  F32x8& operator+=(F32x8 b) { return *this = *this + b; }
  F32x8& operator-=(F32x8 b) { return *this = *this - b; }
  F32x8& operator*=(F32x8 b) { return *this = *this * b; }
  /// a * b + c in one rounding.
  friend F32x8 fma(F32x8 a, F32x8 b, F32x8 c) { return _mm256_fmadd_ps(a.v, b.v, c.v); }
  friend F32x8 fma_of(F32x8 a, F32x8 b, F32x8 c) { return fma(a, b, c); }
  /// kernels::mul_of's product: rounded on its own, never contracted into a later sum.
  friend F32x8 mul_of(F32x8 a, F32x8 b) {
    __m256 p = _mm256_mul_ps(a.v, b.v);
    asm("" : "+x"(p));
    return p;
  }
  friend F32x8 max(F32x8 a, F32x8 b) { return _mm256_max_ps(a.v, b.v); }
  /// Correctly rounded, as std::sqrt.
  friend F32x8 sqrt_of(F32x8 x) { return _mm256_sqrt_ps(x.v); }

  friend F32x8 exp_of(F32x8 x) {
    constexpr float lo = -87.33654f, hi = 88.72283f;
    // x as the second operand: min/max return it when it is NaN, so NaN goes through
    const __m256 xc = _mm256_max_ps(_mm256_set1_ps(lo), _mm256_min_ps(_mm256_set1_ps(hi), x.v));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    // r = x - n ln2, ln2 in two parts so that n ln2_hi is exact
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    // times 2^n as 2^(n/2) 2^(n - n/2): n spans [-126, 128], past the exponent field at both ends
    const __m256i ni = _mm256_cvtps_epi32(n), n1 = _mm256_srai_epi32(ni, 1),
                  n2 = _mm256_sub_epi32(ni, n1);
    const auto pow2 = [](__m256i k) {
      return _mm256_castsi256_ps(
          _mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23));
    };
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, pow2(n1)), pow2(n2));
    y = _mm256_blendv_ps(y, _mm256_setzero_ps(),
                         _mm256_cmp_ps(x.v, _mm256_set1_ps(lo), _CMP_LT_OQ));
    y = _mm256_blendv_ps(y, _mm256_set1_ps(std::numeric_limits<float>::infinity()),
                         _mm256_cmp_ps(x.v, _mm256_set1_ps(hi), _CMP_GT_OQ));
    return y;
  }

  friend F32x8 tanh_of(F32x8 x) {
    // |x| < 0.4: x + x^3 (c3 + x^2 (c5 + ...)), the Taylor series of tanh to x^13
    const F32x8 x2 = x * x;
    F32x8 p = 21844.0f / 6081075;
    p = fma(p, x2, -1382.0f / 155925);
    p = fma(p, x2, 62.0f / 2835);
    p = fma(p, x2, -17.0f / 315);
    p = fma(p, x2, 2.0f / 15);
    p = fma(p, x2, -1.0f / 3);
    const F32x8 small = fma(p * x2, x, x);
    // elsewhere: 1 - 2 / (e^2x + 1), which saturates to +-1 through exp's 0 and inf
    const F32x8 large = F32x8(1.0f) - F32x8(2.0f) / (exp_of(x + x) + F32x8(1.0f));
    const __m256 abs = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x.v);
    return _mm256_blendv_ps(large.v, small.v, _mm256_cmp_ps(abs, _mm256_set1_ps(0.4f), _CMP_LT_OQ));
  }
};

}  // namespace seqpar::inline v0::detail

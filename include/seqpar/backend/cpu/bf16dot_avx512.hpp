#pragma once
// The lanes of bf16dot_gemm.hpp on AVX512_BF16: sixteen fp32 sums in a zmm register, each
// VDPBF16PS adding the two products of a k pair (the odd one first, each an fp32 fused
// multiply-add rounded to nearest even; subnormal inputs read as zero, subnormal results
// flushed to zero: the instruction's definition). Ops<Cpu>::gemm takes it for bf16 operands
// where the unit is compiled for AVX512_BF16; tests/backend/dot_bf16 holds it to the scalar
// model of that arithmetic on a CPU that has the instruction.

#if !defined(__AVX512F__) || !defined(__AVX512BF16__) || !defined(__AVX2__) || !defined(__FMA__)
#error \
    "bf16dot_avx512.hpp needs AVX-512F and AVX512_BF16; include backend/cpu/ops.hpp, which picks it when they are on"
#endif

#include "seqpar/core/x86_intrinsics.hpp"

#include <cstdint>

#include "seqpar/backend/cpu/bf16dot_gemm.hpp"
#include "seqpar/backend/cpu/simd_avx2.hpp"
#include "seqpar/core/dtype.hpp"

namespace seqpar::inline v0::detail::bf16dot {

struct Avx512Dot {
  using Vec = __m512;

  static Vec zero() { return _mm512_setzero_ps(); }
  static __m512i load_pairs(const std::uint32_t* b) { return _mm512_load_si512(b); }
  // acc[i] += a.hi b[i].hi, then += a.lo b[i].lo
  static Vec dot(Vec acc, std::uint32_t a, __m512i b) {
    const __m512i pair = _mm512_set1_epi32(static_cast<int>(a));
    return _mm512_dpbf16_ps(acc, (__m512bh)pair, (__m512bh)b);
  }
  // out[0, 16) = alpha acc (+ beta in, one fma when beta != 0)
  template <class In, class Out>
  static void put(Out* out, Vec acc, float alpha, float beta, const In* in) {
    Vec v = _mm512_mul_ps(_mm512_set1_ps(alpha), acc);
    if (beta != 0.0f) v = _mm512_fmadd_ps(_mm512_set1_ps(beta), load16(in), v);
    store16(out, v);
  }

  // d[q * ldd + c] = the pair q of row c (rows[c * ld + 2 q], rows[c * ld + 2 q + 1]), q, c <
  // 16: a 16 x 16 transposition of 32-bit words in four rounds of shuffles
  static void transpose_pairs(std::uint32_t* d, std::int64_t ldd, const Bf16Bits* rows,
                              std::int64_t ld) {
    __m512i r[16], t[16], u[16];
    for (int c = 0; c < 16; ++c) r[c] = _mm512_loadu_si512(rows + c * ld);
    // per 128-bit lane: t[2i] = (r2i.0, r2i+1.0, r2i.1, r2i+1.1), t[2i + 1] the words 2 and 3
    for (int i = 0; i < 8; ++i) {
      t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    // u[4 g + w]: word w of each lane of rows 4g..4g+3, per 128-bit lane l: pair w + 4 l
    for (int g = 0; g < 4; ++g) {
      u[4 * g + 0] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
      u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
      u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
      u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
    }
    // the lanes of the four row groups put together: pairs w, w + 4, w + 8, w + 12
    for (int w = 0; w < 4; ++w) {
      const __m512i v0 = _mm512_shuffle_i32x4(u[w], u[4 + w], 0x88),
                    v1 = _mm512_shuffle_i32x4(u[w], u[4 + w], 0xdd),
                    w0 = _mm512_shuffle_i32x4(u[8 + w], u[12 + w], 0x88),
                    w1 = _mm512_shuffle_i32x4(u[8 + w], u[12 + w], 0xdd);
      _mm512_storeu_si512(d + w * ldd, _mm512_shuffle_i32x4(v0, w0, 0x88));
      _mm512_storeu_si512(d + (w + 8) * ldd, _mm512_shuffle_i32x4(v0, w0, 0xdd));
      _mm512_storeu_si512(d + (w + 4) * ldd, _mm512_shuffle_i32x4(v1, w1, 0x88));
      _mm512_storeu_si512(d + (w + 12) * ldd, _mm512_shuffle_i32x4(v1, w1, 0xdd));
    }
  }

 private:
  static __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 load16(const Bf16Bits* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static void store16(float* p, __m512 v) { _mm512_storeu_ps(p, v); }
  // rounded as core/dtype.hpp's float_to_bf16 (not VCVTNEPS2BF16, which flushes subnormals)
  static void store16(Bf16Bits* p, __m512 v) {
    store8(p, _mm512_castps512_ps256(v));
    store8(p + 8, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  }
};

}  // namespace seqpar::inline v0::detail::bf16dot

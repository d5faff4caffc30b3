#pragma once
// A scalar model of the bf16 dot-product GEMM (backend/cpu/bf16dot_gemm.hpp), element by
// element, from the instruction's definition rather than the kernel's code: VDPBF16PS adds
// to an fp32 sum the product of the odd bf16 pair elements, then of the even ones, each an
// fp32 fused multiply-add rounded to nearest even, inputs that are subnormal read as zero
// (DAZ), subnormal results flushed to zero (FTZ), MXCSR not consulted (Intel SDM, VDPBF16PS).
// The GEMM sums each block of 1024 k (512 pairs) from zero, scales it by alpha and adds it to
// beta C (first block) or to the running sum (one fma, in float under the default MXCSR);
// a bf16 C is rounded once at the end.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "seqpar/core/dtype.hpp"

namespace seqpar::test {

/// The depth of one K block of the dot-product GEMM.
inline constexpr std::int64_t kDotBlock = 1024;

/// x, or a zero of its sign when it is subnormal (DAZ on an input, FTZ on a result).
inline float flush_subnormal(float x) {
  return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x;
}

/// One lane of VDPBF16PS: acc + a_hi b_hi, then + a_lo b_lo.
inline float dot_pair(float acc, Bf16Bits a_lo, Bf16Bits a_hi, Bf16Bits b_lo, Bf16Bits b_hi) {
  const auto in = [](Bf16Bits x) { return flush_subnormal(x.to_float()); };
  acc = flush_subnormal(std::fma(in(a_hi), in(b_hi), flush_subnormal(acc)));
  return flush_subnormal(std::fma(in(a_lo), in(b_lo), acc));
}

/// C[M, N] = alpha op(A) op(B) + beta C as the dot-product GEMM computes it (C float or bf16;
/// the layout of Ops<Cpu>::gemm).
template <class Out>
void dot_gemm_model(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
                    const Bf16Bits* A, std::int64_t lda, const Bf16Bits* B, std::int64_t ldb,
                    float beta, Out* C, std::int64_t ldc) {
  const auto a = [&](std::int64_t i, std::int64_t k) {
    return ta ? A[k * lda + i] : A[i * lda + k];
  };
  const auto b = [&](std::int64_t k, std::int64_t j) {
    return tb ? B[j * ldb + k] : B[k * ldb + j];
  };
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      float total = 0;
      for (std::int64_t k0 = 0; k0 < K; k0 += kDotBlock) {
        const std::int64_t k1 = std::min(K, k0 + kDotBlock);
        float acc = 0;
        for (std::int64_t k = k0; k < k1; k += 2) {
          const bool pair = k + 1 < k1;
          acc = dot_pair(acc, a(i, k), pair ? a(i, k + 1) : Bf16Bits{}, b(k, j),
                         pair ? b(k + 1, j) : Bf16Bits{});
        }
        float v = alpha * acc;
        if (k0 > 0)
          v = std::fma(1.0f, total, v);
        else if (beta != 0.0f)
          v = std::fma(beta, static_cast<float>(C[i * ldc + j]), v);
        total = v;
      }
      if (K == 0) total = beta == 0.0f ? 0.0f : beta * static_cast<float>(C[i * ldc + j]);
      if constexpr (std::is_same_v<Out, float>)
        C[i * ldc + j] = total;
      else
        C[i * ldc + j] = Out(total);
    }
}

/// The lanes of backend/cpu/bf16dot_gemm.hpp in scalar code, with dot_pair's arithmetic:
/// the dot-product GEMM's driver (packing, blocking, edge tiles, C's rounding) on every
/// machine, held to dot_gemm_model where the instruction itself is not there.
struct EmulatedDot {
  struct Vec {
    float x[16];
  };
  struct Pairs {
    std::uint32_t p[16];
  };
  static Vec zero() { return {}; }
  static Pairs load_pairs(const std::uint32_t* b) {
    Pairs r;
    std::memcpy(r.p, b, sizeof r.p);
    return r;
  }
  static Vec dot(Vec acc, std::uint32_t a, const Pairs& b) {
    const auto lo = [](std::uint32_t w) {
      return Bf16Bits::from_bits(static_cast<std::uint16_t>(w));
    };
    const auto hi = [](std::uint32_t w) {
      return Bf16Bits::from_bits(static_cast<std::uint16_t>(w >> 16));
    };
    for (int i = 0; i < 16; ++i)
      acc.x[i] = dot_pair(acc.x[i], lo(a), hi(a), lo(b.p[i]), hi(b.p[i]));
    return acc;
  }
  template <class In, class Out>
  static void put(Out* out, const Vec& acc, float alpha, float beta, const In* in) {
    for (int i = 0; i < 16; ++i) {
      float v = alpha * acc.x[i];
      if (beta != 0.0f) v = std::fma(beta, static_cast<float>(in[i]), v);
      if constexpr (std::is_same_v<Out, float>)
        out[i] = v;
      else
        out[i] = Out(v);
    }
  }
};

}  // namespace seqpar::test

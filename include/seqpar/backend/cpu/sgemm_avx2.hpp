#pragma once
// Single-precision GEMM for AVX2 + FMA (Goto/BLIS packing, a 6 x 16 tile), also the path of
// 16-bit operands widened as they are packed, because Eigen's float GEMM is slower (docs/cpu.md).

#if !defined(__AVX2__) || !defined(__FMA__)
#error \
    "sgemm_avx2.hpp needs AVX2 and FMA; include backend/cpu/ops.hpp, which picks it when they are on"
#endif

#include "seqpar/core/x86_intrinsics.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>

#include "seqpar/backend/cpu/simd_avx2.hpp"
#include "seqpar/core/omp.hpp"
#include "seqpar/core/profile.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace seqpar::inline v0::detail::sgemm {

inline constexpr std::int64_t MR = 6;     // rows of the register tile
inline constexpr std::int64_t NR = 16;    // columns: two 8-float vectors
inline constexpr std::int64_t KC = 256;   // depth of a packed block: an A and a B sliver fit in L1
inline constexpr std::int64_t MC = 72;    // rows of a packed A block (in L2), the unit threads take
inline constexpr std::int64_t NC = 4096;  // columns of a packed B panel: stays in L3
/// A 16-bit C summed over more than one K block is computed in bands of this many rows,
/// so that the float panel of its partial sums ([MB, NC], 9 MiB) is reused, not faulted in
/// anew, from one call to the next (a larger allocation goes back to the system each time).
inline constexpr std::int64_t MB = 576;
/// Below this many multiply-adds a call runs on one thread.
inline constexpr std::int64_t parallel_min_flops = std::int64_t{1} << 21;

// Packing reads rows far apart (a row stride of kilobytes, a new page each time), which the
// hardware prefetcher does not follow: the rows prefetch_rows ahead are asked for by hand.
inline constexpr std::int64_t prefetch_rows = 4;
template <class E>
void prefetch_row(const E* p, std::int64_t n) {
  constexpr std::int64_t line = 64 / sizeof(E);
  for (std::int64_t i = 0; i < n; i += line)
    _mm_prefetch(reinterpret_cast<const char*>(p + i), _MM_HINT_T0);
}

/// op(A)[i, k] of a row-major A ([M, K], or [K, M] when transposed), of float or 16-bit
/// elements.
template <class E>
struct View {
  const E* p;
  std::int64_t ld;
  bool trans;
};

// r[i] = column i of the 8 x 8 block held in r (r[i] was row i).
inline void transpose8(__m256 (&r)[8]) {
  __m256 t[8], u[8];
  SEQPAR_UNROLL(8)
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  SEQPAR_UNROLL(8)
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  SEQPAR_UNROLL(8)
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

// dst[k, w] = scale * src[w][k] for w < width (at most 8) and k < kc, dst rows `ld` apart,
// lanes w >= width zero: the rows src[w] are contiguous in k, dst is k-major. Eight k at a
// time through a register transpose. With ld < 8 each 8-lane store writes 8 - ld floats past
// its row, which the next row's store (or the caller's slack) overwrites.
template <class E>
void pack_transposed(float* dst, std::int64_t ld, const E* const* src, std::int64_t width,
                     std::int64_t kc, float scale) {
  const __m256 vs = _mm256_set1_ps(scale);
  std::int64_t k = 0;
  for (; k + 8 <= kc; k += 8) {
    __m256 r[8];
    SEQPAR_UNROLL(8)
    for (int w = 0; w < 8; ++w)
      r[w] = w < width ? _mm256_mul_ps(vs, load8(src[w] + k)) : _mm256_setzero_ps();
    transpose8(r);
    SEQPAR_UNROLL(8)
    for (int i = 0; i < 8; ++i) _mm256_storeu_ps(dst + (k + i) * ld, r[i]);
  }
  for (; k < kc; ++k)
    for (std::int64_t w = 0; w < ld && w < 8; ++w)
      dst[k * ld + w] = w < width ? scale * static_cast<float>(src[w][k]) : 0.0f;
}

// dst[kc, MR] per sliver of MR rows of op(A)[i0:i0+mc, p0:p0+kc], times alpha, rows past mc
// zero. dst has 8 floats of slack past the last sliver (pack_transposed's spill).
template <class E>
void pack_a(float* dst, View<E> a, std::int64_t i0, std::int64_t mc, std::int64_t p0,
            std::int64_t kc, float alpha) {
  if (a.trans) {  // A is [K, M]: row k of the block holds every sliver's MR values of that k
    const __m256 va = _mm256_set1_ps(alpha);
    // slivers [0, vec) can load 8 floats without leaving the block
    const std::int64_t vec = mc >= 8 ? (mc - 8) / MR * MR + MR : 0;
    for (std::int64_t k = 0; k < kc; ++k) {
      // read along the row: one stream, not one per sliver
      const E* src = a.p + (p0 + k) * a.ld + i0;
      if (k + prefetch_rows < kc) prefetch_row(src + prefetch_rows * a.ld, mc);
      std::int64_t s = 0;
      if (k + 1 < kc)  // each store writes 2 floats into the sliver's row k + 1, written later
        for (; s < vec; s += MR)
          _mm256_storeu_ps(dst + s * kc + k * MR, _mm256_mul_ps(va, load8(src + s)));
      for (; s < mc; s += MR)
        for (std::int64_t r = 0; r < MR; ++r)
          dst[s * kc + k * MR + r] = s + r < mc ? alpha * static_cast<float>(src[s + r]) : 0.0f;
    }
    return;
  }
  // A is [M, K]: each sliver is its MR rows transposed
  for (std::int64_t s = 0; s < mc; s += MR, dst += kc * MR) {
    const E* src[8];
    for (std::int64_t r = 0; r < 8; ++r) src[r] = a.p + (i0 + std::min(s + r, mc - 1)) * a.ld + p0;
    pack_transposed(dst, MR, src, std::min(MR, mc - s), kc, alpha);
  }
}

// dst[kc, NR] per sliver of NR columns of op(B)[p0:p0+kc, j0:j0+nc], columns past nc zero;
// slivers [s0, s1) only, so that threads can share the work.
template <class E>
void pack_b(float* dst, View<E> b, std::int64_t p0, std::int64_t kc, std::int64_t j0,
            std::int64_t nc, std::int64_t s0, std::int64_t s1) {
  if (b.trans) {  // B is [N, K]: each half sliver is 8 rows of B transposed
    for (std::int64_t s = s0; s < s1; ++s)
      for (std::int64_t half = 0; half < NR; half += 8) {
        const std::int64_t c0 = s * NR + half, width = std::clamp<std::int64_t>(nc - c0, 0, 8);
        const E* src[8];
        for (std::int64_t w = 0; w < 8; ++w)
          src[w] = b.p + (j0 + std::min(c0 + w, nc - 1)) * b.ld + p0;
        pack_transposed(dst + s * kc * NR + half, NR, src, width, kc, 1.0f);
      }
    return;
  }
  // B is [K, N]: stream each row k once, across the slivers
  for (std::int64_t k = 0; k < kc; ++k) {
    const E* src = b.p + (p0 + k) * b.ld + j0;
    if (k + prefetch_rows < kc)
      prefetch_row(src + prefetch_rows * b.ld + s0 * NR, std::min(nc, s1 * NR) - s0 * NR);
    for (std::int64_t s = s0; s < s1; ++s) {
      float* d = dst + (s * kc + k) * NR;
      const std::int64_t c0 = s * NR;
      if (c0 + NR <= nc) {
        _mm256_store_ps(d, load8(src + c0));
        _mm256_store_ps(d + 8, load8(src + c0 + 8));
      } else {
        for (std::int64_t c = 0; c < NR; ++c)
          d[c] = c0 + c < nc ? static_cast<float>(src[c0 + c]) : 0.0f;
      }
    }
  }
}

// out[rows, cols] = A sliver [kc, MR] times B sliver [kc, NR] + beta in (beta == 0: `in`
// is not read); in and out are float or 16-bit (read widened, written rounded once), and
// may be the same C. The twelve accumulators are named one by one so that they stay in
// registers at any optimisation level.
template <class In, class Out>
void kernel(std::int64_t kc, const float* __restrict a, const float* __restrict b, const In* in,
            std::int64_t ldi, Out* out, std::int64_t ldo, std::int64_t rows, std::int64_t cols,
            float beta) {
  for (std::int64_t r = 0; r < rows; ++r) {  // C's lines arrive while the tile is computed
    _mm_prefetch(reinterpret_cast<const char*>(out + r * ldo), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(out + r * ldo + NR - 1), _MM_HINT_T0);
  }
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (std::int64_t k = 0; k < kc; ++k, a += MR, b += NR) {
    const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
    __m256 ar = _mm256_broadcast_ss(a);
    c00 = _mm256_fmadd_ps(ar, b0, c00);
    c01 = _mm256_fmadd_ps(ar, b1, c01);
    ar = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(ar, b0, c10);
    c11 = _mm256_fmadd_ps(ar, b1, c11);
    ar = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(ar, b0, c20);
    c21 = _mm256_fmadd_ps(ar, b1, c21);
    ar = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(ar, b0, c30);
    c31 = _mm256_fmadd_ps(ar, b1, c31);
    ar = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(ar, b0, c40);
    c41 = _mm256_fmadd_ps(ar, b1, c41);
    ar = _mm256_broadcast_ss(a + 5);
    c50 = _mm256_fmadd_ps(ar, b0, c50);
    c51 = _mm256_fmadd_ps(ar, b1, c51);
  }
  alignas(32) float tile[MR][NR];
  const bool whole = rows == MR && cols == NR;
  const __m256 vb = _mm256_set1_ps(beta);
  const auto put = [&](std::int64_t r, __m256 lo, __m256 hi) {
    if (!whole) {
      _mm256_store_ps(tile[r], lo);
      _mm256_store_ps(tile[r] + 8, hi);
      return;
    }
    if (beta != 0.0f) {
      lo = _mm256_fmadd_ps(vb, load8(in + r * ldi), lo);
      hi = _mm256_fmadd_ps(vb, load8(in + r * ldi + 8), hi);
    }
    store8(out + r * ldo, lo);
    store8(out + r * ldo + 8, hi);
  };
  put(0, c00, c01);
  put(1, c10, c11);
  put(2, c20, c21);
  put(3, c30, c31);
  put(4, c40, c41);
  put(5, c50, c51);
  if (whole) return;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < cols; ++j) {
      const float v =
          beta == 0.0f ? tile[r][j] : tile[r][j] + beta * static_cast<float>(in[r * ldi + j]);
      if constexpr (std::is_same_v<Out, float>)
        out[r * ldo + j] = v;
      else
        out[r * ldo + j] = Out(v);
    }
}

struct AlignedFree {
  void operator()(float* p) const { ::operator delete[](p, std::align_val_t{64}); }
};
using Scratch = std::unique_ptr<float[], AlignedFree>;
inline Scratch scratch(std::int64_t n) {
  return Scratch(static_cast<float*>(
      ::operator new[](sizeof(float) * static_cast<std::size_t>(n), std::align_val_t{64})));
}

/// C[M, N] = alpha op(A) op(B) + beta C for M, N, K > 0; see Ops<Cpu>::gemm for the layout.
/// A and B hold floats or 16-bit values of one type, C floats or that type. With a 16-bit C
/// and K over one block, the sums of K's blocks go to a float panel [MB, NC] first (MB rows
/// at a time) and C is written once, at the last block.
template <class E, class Out>
void gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const E* A,
          std::int64_t lda, const E* B, std::int64_t ldb, float beta, Out* C, std::int64_t ldc) {
  static_assert(std::is_same_v<Out, float> || std::is_same_v<Out, E>,
                "sgemm: C holds floats or the operands' type");
  constexpr bool rounded_c = !std::is_same_v<Out, float>;
  if (rounded_c && K > KC && M > MB) {
    for (std::int64_t i0 = 0; i0 < M; i0 += MB)
      gemm(ta, tb, std::min(MB, M - i0), N, K, alpha, ta ? A + i0 : A + i0 * lda, lda, B, ldb, beta,
           C + i0 * ldc, ldc);
    return;
  }
  const View<E> a{A, lda, ta}, b{B, ldb, tb};
  const std::int64_t kc_max = std::min(KC, K), nc_max = std::min(NC, (N + NR - 1) / NR * NR);
  Scratch bpack = scratch(kc_max * nc_max);
  Scratch part = rounded_c && K > KC ? scratch(M * nc_max) : Scratch();
  [[maybe_unused]] bool parallel = M * N * K >= parallel_min_flops;
#ifdef _OPENMP
  parallel = parallel && !omp_in_parallel() && omp_get_max_threads() > 1;
#endif
  const detail::RowBlocks rb(M, MR, MC, parallel);
  const std::int64_t row_blocks = rb.count;
  SEQPAR_OMP(parallel if (parallel))
  {
    Scratch apack = scratch(std::min(MC, (M + MR - 1) / MR * MR) * kc_max + 8);
    for (std::int64_t jc = 0; jc < N; jc += NC) {
      const std::int64_t nc = std::min(NC, N - jc), slivers = (nc + NR - 1) / NR;
      for (std::int64_t pc = 0; pc < K; pc += KC) {
        const std::int64_t kc = std::min(KC, K - pc);
        const bool first = pc == 0, last = pc + kc == K;
        const float block_beta = first ? beta : 1.0f;
        SEQPAR_OMP(for schedule(static))
        for (std::int64_t s = 0; s < slivers; ++s)
          profile::packing([&] { pack_b(bpack.get(), b, pc, kc, jc, nc, s, s + 1); });
        // row blocks to whichever thread is free: a thread slowed by anything else costs one
        // block
        SEQPAR_OMP(for schedule(dynamic, 1))
        for (std::int64_t blk = 0; blk < row_blocks; ++blk) {
          const std::int64_t ic = rb.begin(blk), mc = rb.begin(blk + 1) - ic;
          profile::packing([&] { pack_a(apack.get(), a, ic, mc, pc, kc, alpha); });
          for (std::int64_t jr = 0; jr < nc; jr += NR)
            for (std::int64_t ir = 0; ir < mc; ir += MR) {
              const float* ap = apack.get() + ir * kc;
              const float* bp = bpack.get() + jr * kc;
              const std::int64_t rows = std::min(MR, mc - ir), cols = std::min(NR, nc - jr);
              Out* c = C + (ic + ir) * ldc + jc + jr;
              if (!rounded_c || (first && last)) {
                kernel(kc, ap, bp, c, ldc, c, ldc, rows, cols, block_beta);
                continue;
              }
              float* p = part.get() + (ic + ir) * nc_max + jr;
              if (first)
                kernel(kc, ap, bp, c, ldc, p, nc_max, rows, cols, block_beta);
              else if (last)
                kernel(kc, ap, bp, p, nc_max, c, ldc, rows, cols, 1.0f);
              else
                kernel(kc, ap, bp, p, nc_max, p, nc_max, rows, cols, 1.0f);
            }
        }
      }
    }
  }
}

}  // namespace seqpar::inline v0::detail::sgemm

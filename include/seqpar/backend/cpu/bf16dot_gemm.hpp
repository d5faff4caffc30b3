#pragma once
// bf16 GEMM on bf16 dot products (VDPBF16PS, under AVX512_BF16): sgemm_avx2.hpp's blocking with
// packed pairs instead of widened floats, for the speed of native bf16 products (docs/cpu.md).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>

#include "seqpar/core/dtype.hpp"
#include "seqpar/core/omp.hpp"
#include "seqpar/core/profile.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace seqpar::inline v0::detail::bf16dot {

inline constexpr std::int64_t MR = 12;  // rows of the register tile: 24 accumulators
inline constexpr std::int64_t NR = 32;  // columns: two vectors of 16 sums
// depth of a packed block (512 pairs): an A block of MC rows in L2, each B sliver (64 KiB)
// streamed from L2 with its 24 sums in registers over the whole block; against blocks of 256 k
// (slivers in L1), a quarter of the float partial sums written and read back between blocks,
// which cost more (docs/cpu.md: 512 x 4096 x 1024 from about 290 to about 360 GFLOP/s)
inline constexpr std::int64_t KC = 1024;
inline constexpr std::int64_t MC = 96;    // rows of a packed A block, the unit threads take
inline constexpr std::int64_t NC = 4096;  // columns of a packed B panel
/// A 16-bit C summed over more than one K block is computed in bands of this many rows,
/// so that the float panel of its partial sums ([MB, NC], 9 MiB) is reused, not faulted in
/// anew, from one call to the next (a larger allocation goes back to the system each time).
inline constexpr std::int64_t MB = 576;
/// Below this many multiply-adds a call runs on one thread.
inline constexpr std::int64_t parallel_min_flops = std::int64_t{1} << 21;

/// op(A)[i, k] of a row-major bf16 A ([M, K], or [K, M] when transposed).
struct View {
  const Bf16Bits* p;
  std::int64_t ld;
  bool trans;
  std::uint16_t at(std::int64_t i, std::int64_t k) const {
    return (trans ? p[k * ld + i] : p[i * ld + k]).bits;
  }
};

// The pair (k, k + 1) of row i of v; k + 1 at or past `end` (the block's end) reads as zero.
inline std::uint32_t pair_of(const View& v, std::int64_t i, std::int64_t k, std::int64_t end) {
  const std::uint32_t lo = v.at(i, k), hi = k + 1 < end ? v.at(i, k + 1) : 0;
  return lo | (hi << 16);
}

// The pairs (k, k + 1), k = p0, p0 + 2, ..., of row i of v, kc values, written to dst[0],
// dst[stride], ...; the pair past an odd kc has a zero high half.
inline void row_pairs(std::uint32_t* dst, std::int64_t stride, const View& v, std::int64_t i,
                      std::int64_t p0, std::int64_t kc) {
  const std::int64_t pairs = (kc + 1) / 2;
  if (kc % 2 == 0 && !v.trans) {  // a row's pairs are consecutive words
    const Bf16Bits* row = v.p + i * v.ld + p0;
    for (std::int64_t q = 0; q < pairs; ++q) std::memcpy(&dst[q * stride], row + 2 * q, 4);
  } else if (kc % 2 == 0) {  // k and k + 1 are two rows of the stored matrix
    const Bf16Bits* lo = v.p + p0 * v.ld + i;
    for (std::int64_t q = 0; q < pairs; ++q, lo += 2 * v.ld)
      dst[q * stride] = std::uint32_t{lo[0].bits} | (std::uint32_t{lo[v.ld].bits} << 16);
  } else {
    for (std::int64_t q = 0; q < pairs; ++q) dst[q * stride] = pair_of(v, i, p0 + 2 * q, p0 + kc);
  }
}

// dst[kc/2][MR] pairs per sliver of MR rows of op(A)[i0:i0+mc, p0:p0+kc], rows past mc and
// the pair past an odd kc zero.
inline void pack_a(std::uint32_t* dst, const View& a, std::int64_t i0, std::int64_t mc,
                   std::int64_t p0, std::int64_t kc) {
  const std::int64_t pairs = (kc + 1) / 2;
  if (a.trans && kc % 2 == 0) {
    // a sliver's rows are consecutive values of two stored rows (k and k + 1): read along
    // them, a pair of stored rows at a time, instead of down the stored columns
    for (std::int64_t s = 0; s < mc; s += MR, dst += pairs * MR) {
      const std::int64_t rows = std::min(MR, mc - s);
      for (std::int64_t q = 0; q < pairs; ++q) {
        const Bf16Bits* lo = a.p + (p0 + 2 * q) * a.ld + i0 + s;
        const Bf16Bits* hi = lo + a.ld;
        std::uint32_t* d = dst + q * MR;
        if (rows == MR) {
          for (std::int64_t r = 0; r < MR; ++r)
            d[r] = std::uint32_t{lo[r].bits} | (std::uint32_t{hi[r].bits} << 16);
          continue;
        }
        for (std::int64_t r = 0; r < MR; ++r)
          d[r] = r < rows ? std::uint32_t{lo[r].bits} | (std::uint32_t{hi[r].bits} << 16) : 0;
      }
    }
    return;
  }
  for (std::int64_t s = 0; s < mc; s += MR, dst += pairs * MR)
    for (std::int64_t r = 0; r < MR; ++r) {
      if (s + r < mc) {
        row_pairs(dst + r, MR, a, i0 + s + r, p0, kc);
        continue;
      }
      for (std::int64_t q = 0; q < pairs; ++q) dst[q * MR + r] = 0;
    }
}

// Lanes that transpose 16 x 16 pairs at once: d[q * ldd + c] = the pair q of stored row c
// (rows[c * ld + 2 q] and the value after it), q, c < 16.
template <class L>
concept TransposesPairs = requires(std::uint32_t* d, const Bf16Bits* rows) {
  L::transpose_pairs(d, std::int64_t{0}, rows, std::int64_t{0});
};

// dst[kc/2][NR] pairs per sliver of NR columns of op(B)[p0:p0+kc, j0:j0+nc], slivers
// [s0, s1) only; columns past nc and the pair past an odd kc zero.
template <class L>
void pack_b(std::uint32_t* dst, const View& b, std::int64_t p0, std::int64_t kc, std::int64_t j0,
            std::int64_t nc, std::int64_t s0, std::int64_t s1) {
  const std::int64_t pairs = (kc + 1) / 2;
  // op(B)[k, j] is row j, column k of op(B)^T: read as A is, with the transposition flipped
  const View bt{b.p, b.ld, !b.trans};
  for (std::int64_t s = s0; s < s1; ++s) {
    std::uint32_t* d = dst + s * pairs * NR;
    if constexpr (TransposesPairs<L>) {
      if (b.trans && kc % 2 == 0 && pairs % 16 == 0 && (s + 1) * NR <= nc) {
        // column j of op(B) is stored row j: the sliver is 16 x 16 blocks of its rows' pairs
        // transposed
        const Bf16Bits* rows = b.p + (j0 + s * NR) * b.ld + p0;
        for (std::int64_t q = 0; q < pairs; q += 16)
          for (std::int64_t h = 0; h < NR; h += 16)
            L::transpose_pairs(d + q * NR + h, NR, rows + h * b.ld + 2 * q, b.ld);
        continue;
      }
    }
    if (!b.trans && kc % 2 == 0 && (s + 1) * NR <= nc) {
      // k and k + 1 are two rows of B: a whole sliver read along them, NR values at a time,
      // rather than column by column across them
      for (std::int64_t q = 0; q < pairs; ++q) {
        const Bf16Bits* lo = b.p + (p0 + 2 * q) * b.ld + j0 + s * NR;
        for (std::int64_t c = 0; c < NR; ++c)
          d[q * NR + c] = std::uint32_t{lo[c].bits} | (std::uint32_t{lo[b.ld + c].bits} << 16);
      }
      continue;
    }
    for (std::int64_t c = 0; c < NR; ++c) {
      if (s * NR + c < nc) {
        row_pairs(d + c, NR, bt, j0 + s * NR + c, p0, kc);
        continue;
      }
      for (std::int64_t q = 0; q < pairs; ++q) d[q * NR + c] = 0;
    }
  }
}

// out[rows, cols] = alpha (A sliver . B sliver) + beta in (beta == 0: `in` is not read), in
// and out float or bf16; `pairs` k pairs. L::Vec holds 16 sums; L::dot(acc, a, b) adds the
// products of pair a with the pairs b[0, 16); L::put(out, acc, alpha, beta, in) writes 16.
template <class L, class In, class Out>
void kernel(std::int64_t pairs, const std::uint32_t* __restrict a,
            const std::uint32_t* __restrict b, const In* in, std::int64_t ldi, Out* out,
            std::int64_t ldo, std::int64_t rows, std::int64_t cols, float alpha, float beta) {
  typename L::Vec acc[MR][2];  // in registers when the loops over rows are unrolled: at -O2
                               // GCC otherwise keeps them in memory, at half the speed
  SEQPAR_UNROLL(MR)
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = L::zero();
  for (std::int64_t q = 0; q < pairs; ++q, a += MR, b += NR) {
    const auto b0 = L::load_pairs(b), b1 = L::load_pairs(b + 16);
    SEQPAR_UNROLL(MR)
    for (int r = 0; r < MR; ++r) {
      acc[r][0] = L::dot(acc[r][0], a[r], b0);
      acc[r][1] = L::dot(acc[r][1], a[r], b1);
    }
  }
  if (rows == MR && cols == NR) {
    for (int r = 0; r < MR; ++r)
      for (int h = 0; h < 2; ++h)
        L::put(out + r * ldo + 16 * h, acc[r][h], alpha, beta, in + r * ldi + 16 * h);
    return;
  }
  alignas(64) float tile[MR][NR];
  for (int r = 0; r < MR; ++r)
    for (int h = 0; h < 2; ++h) L::put(tile[r] + 16 * h, acc[r][h], alpha, 0.0f, tile[r]);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < cols; ++j) {
      float v = tile[r][j];
      if (beta != 0.0f) v = std::fma(beta, static_cast<float>(in[r * ldi + j]), v);
      if constexpr (std::is_same_v<Out, float>)
        out[r * ldo + j] = v;
      else
        out[r * ldo + j] = Out(v);
    }
}

struct AlignedFree {
  void operator()(void* p) const { ::operator delete[](p, std::align_val_t{64}); }
};
template <class W>
using Scratch = std::unique_ptr<W[], AlignedFree>;
template <class W>
Scratch<W> scratch(std::int64_t n) {
  return Scratch<W>(static_cast<W*>(
      ::operator new[](sizeof(W) * static_cast<std::size_t>(n), std::align_val_t{64})));
}

// op(B)[K, N] packed whole, as the blocks of the product pack it one at a time: the block
// (jc, pc) at p + pairs_of(K) jc + pc / 2 (its panel's columns, rounded up to NR).
struct PackedB {
  std::uint32_t* p;
  std::int64_t n, pairs;
  static std::int64_t pairs_of(std::int64_t k) { return k / KC * (KC / 2) + (k % KC + 1) / 2; }
  std::uint32_t* block(std::int64_t jc, std::int64_t pc) const {
    const std::int64_t cols = std::min(NC, (n - jc + NR - 1) / NR * NR);
    return p + pairs * jc + pc / 2 * cols;
  }
};

inline bool run_parallel(std::int64_t M, std::int64_t N, std::int64_t K) {
  [[maybe_unused]] bool parallel = M * N * K >= parallel_min_flops;
#ifdef _OPENMP
  parallel = parallel && !omp_in_parallel() && omp_get_max_threads() > 1;
#endif
  return parallel;
}

// C[M, N] = alpha op(A) op(B) + beta C by blocks: each (jc, pc) block of op(B) packed by the
// threads together (or read from `whole_b`, packed before), then row blocks of op(A) packed
// and multiplied by whichever thread is free.
template <class L, class Out>
void blocks(const View& a, const View& b, std::int64_t M, std::int64_t N, std::int64_t K,
            float alpha, float beta, Out* C, std::int64_t ldc, const PackedB* whole_b) {
  constexpr bool rounded_c = !std::is_same_v<Out, float>;
  const std::int64_t kc_max = std::min(KC, K), pairs_max = (kc_max + 1) / 2,
                     nc_max = std::min(NC, (N + NR - 1) / NR * NR);
  auto bpack = whole_b ? Scratch<std::uint32_t>() : scratch<std::uint32_t>(pairs_max * nc_max);
  auto part = rounded_c && K > KC ? scratch<float>(M * nc_max) : Scratch<float>();
  [[maybe_unused]] const bool parallel = run_parallel(M, N, K);
  const detail::RowBlocks rb(M, MR, MC, parallel);
  const std::int64_t row_blocks = rb.count;
  SEQPAR_OMP(parallel if (parallel))
  {
    auto apack = scratch<std::uint32_t>(std::min(MC, (M + MR - 1) / MR * MR) * pairs_max);
    for (std::int64_t jc = 0; jc < N; jc += NC) {
      const std::int64_t nc = std::min(NC, N - jc), slivers = (nc + NR - 1) / NR;
      for (std::int64_t pc = 0; pc < K; pc += KC) {
        const std::int64_t kc = std::min(KC, K - pc), pairs = (kc + 1) / 2;
        const bool first = pc == 0, last = pc + kc == K;
        const float block_beta = first ? beta : 1.0f;
        const std::uint32_t* bblock = whole_b ? whole_b->block(jc, pc) : bpack.get();
        if (!whole_b) {
          SEQPAR_OMP(for schedule(static))
          for (std::int64_t s = 0; s < slivers; ++s)
            profile::packing([&] { pack_b<L>(bpack.get(), b, pc, kc, jc, nc, s, s + 1); });
        }
        SEQPAR_OMP(for schedule(dynamic, 1))
        for (std::int64_t blk = 0; blk < row_blocks; ++blk) {
          const std::int64_t ic = rb.begin(blk), mc = rb.begin(blk + 1) - ic;
          profile::packing([&] { pack_a(apack.get(), a, ic, mc, pc, kc); });
          for (std::int64_t jr = 0; jr < nc; jr += NR)
            for (std::int64_t ir = 0; ir < mc; ir += MR) {
              const std::uint32_t* ap = apack.get() + ir * pairs;
              const std::uint32_t* bp = bblock + jr * pairs;
              const std::int64_t rows = std::min(MR, mc - ir), cols = std::min(NR, nc - jr);
              Out* c = C + (ic + ir) * ldc + jc + jr;
              if (!rounded_c || (first && last)) {
                kernel<L>(pairs, ap, bp, c, ldc, c, ldc, rows, cols, alpha, block_beta);
                continue;
              }
              float* p = part.get() + (ic + ir) * nc_max + jr;
              if (first)
                kernel<L>(pairs, ap, bp, c, ldc, p, nc_max, rows, cols, alpha, block_beta);
              else if (last)
                kernel<L>(pairs, ap, bp, p, nc_max, c, ldc, rows, cols, alpha, 1.0f);
              else
                kernel<L>(pairs, ap, bp, p, nc_max, p, nc_max, rows, cols, alpha, 1.0f);
            }
        }
      }
    }
  }
}

/// C[M, N] = alpha op(A) op(B) + beta C for M, N, K > 0 on lanes L, A and B bf16, C float or
/// bf16; see Ops<Cpu>::gemm for the layout.
template <class L, class Out>
void gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
          const Bf16Bits* A, std::int64_t lda, const Bf16Bits* B, std::int64_t ldb, float beta,
          Out* C, std::int64_t ldc) {
  static_assert(std::is_same_v<Out, float> || std::is_same_v<Out, Bf16Bits>,
                "bf16dot: C holds floats or bf16");
  constexpr bool rounded_c = !std::is_same_v<Out, float>;
  const View a{A, lda, ta}, b{B, ldb, tb};
  if (!(rounded_c && K > KC && M > MB))
    return blocks<L>(a, b, M, N, K, alpha, beta, C, ldc, nullptr);
  // Bands of MB rows, every one of which reads all of op(B): packed once, for all of them.
  const std::int64_t n_pad = (N + NR - 1) / NR * NR;
  auto whole = scratch<std::uint32_t>(PackedB::pairs_of(K) * n_pad);
  const PackedB packed{whole.get(), N, PackedB::pairs_of(K)};
  [[maybe_unused]] const bool parallel = run_parallel(MB, N, K);
  for (std::int64_t jc = 0; jc < N; jc += NC) {
    const std::int64_t nc = std::min(NC, N - jc), slivers = (nc + NR - 1) / NR;
    for (std::int64_t pc = 0; pc < K; pc += KC) {
      const std::int64_t kc = std::min(KC, K - pc);
      SEQPAR_OMP(parallel for schedule(static) if (parallel))
      for (std::int64_t s = 0; s < slivers; ++s)
        profile::packing([&] { pack_b<L>(packed.block(jc, pc), b, pc, kc, jc, nc, s, s + 1); });
    }
  }
  for (std::int64_t i0 = 0; i0 < M; i0 += MB) {
    const View band{ta ? A + i0 : A + i0 * lda, lda, ta};
    blocks<L>(band, b, std::min(MB, M - i0), N, K, alpha, beta, C + i0 * ldc, ldc, &packed);
  }
}

}  // namespace seqpar::inline v0::detail::bf16dot

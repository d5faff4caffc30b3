#pragma once
// Fused (flash-style) causal ALiBi attention on the CPU: the function of
// Ops<Cpu>::attention_forward / attention_backward without the [B, nh, T, T]
// probabilities. The forward walks each query tile over its key tiles with an online
// softmax and keeps one log-sum-exp per (row, head, query); the backward makes each
// tile's probabilities again from q, k and that log-sum-exp. Per thread it holds a few
// tiles (for hd = 64 in float: 32 KB forward, 80 KB backward), never a [T, T] matrix. For
// float under AVX2 the tile products keep a row of 64 results in eight registers. The arithmetic is
// that of backend/flash_tiles.hpp, shared with the CUDA kernels; Ops<Cpu>::flash_attention_* call
// these launchers.

#ifndef SEQPAR_BACKEND_CPU_OPS_INCLUDED
#error \
    "backend/cpu/flash_attention.hpp is a part of Ops<Cpu>: include seqpar/backend/cpu/ops.hpp instead"
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "seqpar/backend/cpu/elementwise.hpp"  // cpu::convert
#include "seqpar/backend/cpu/loops.hpp"        // SEQPAR_CPU_SIMD, F32x8, cpu::Half
#include "seqpar/backend/flash_tiles.hpp"
#include "seqpar/core/omp.hpp"

namespace seqpar::inline v0::detail {

/// Tile sizes of the CPU loops: a query tile's scores [queries, keys] and accumulator
/// [queries, hd], and a key tile transposed [hd, keys], stay in L1/L2 for hd = 64.
struct FlashCpuTiles {
  static constexpr std::int64_t queries = 32, keys = 64;
};

// Index of the first valid key of a sequence (Tn when none is valid).
inline std::int64_t first_valid_key(const std::uint8_t* valid, std::int64_t Tn) {
  std::int64_t j = 0;
  while (j < Tn && !valid[j]) ++j;
  return j;
}

// p[c] = exp(s[c] - shift) for c < n (kernels::online_weight: 0 for a masked score, as
// exp(-inf) is); returns their sum. p may be s.
template <class T>
T flash_exp_row(T* p, const T* s, std::int64_t n, T shift) {
  if (shift == kernels::minus_infinity<T>()) {  // every score so far masked
    std::fill(p, p + n, T(0));
    return T(0);
  }
  return cpu::exp_shifted(p, s, n, shift, T(1));
}

// s[c] = q . k_{j0+c} for c < cols, with kT[d, c] = k_{j0+c}[d] (row stride FlashCpuTiles::keys).
template <class T>
void flash_qk_row(T* s, const T* q, const T* kT, std::int64_t cols, std::int64_t hd) {
#if SEQPAR_CPU_SIMD
  if constexpr (std::is_same_v<T, float>) {
    if (cols == FlashCpuTiles::keys) {  // a whole tile: the row's 64 sums stay in 8 registers
      constexpr int vecs = FlashCpuTiles::keys / F32x8::lanes;
      F32x8 acc[vecs];
      for (int k = 0; k < vecs; ++k) acc[k] = F32x8(0.0f);
      for (std::int64_t d = 0; d < hd; ++d) {
        const F32x8 b(q[d]);
        const float* kd = kT + d * FlashCpuTiles::keys;
        for (int k = 0; k < vecs; ++k) acc[k] = fma(b, F32x8::load(kd + k * F32x8::lanes), acc[k]);
      }
      for (int k = 0; k < vecs; ++k) acc[k].store(s + k * F32x8::lanes);
      return;
    }
  }
#endif
  std::fill(s, s + cols, T(0));
  for (std::int64_t d = 0; d < hd; ++d) {
    const T qd = q[d];
    const T* kd = kT + d * FlashCpuTiles::keys;
    SEQPAR_OMP(simd)
    for (std::int64_t c = 0; c < cols; ++c) s[c] += qd * kd[c];
  }
}

// acc[0, hd) += sum_c w[c] x_c[0, hd) over rows x_c = x + c * ldx, c < n (rows of weight 0
// skipped: masked keys, queries that do not see a key). For float, blocks of 64 columns of
// acc stay in registers across the rows.
template <class T>
void flash_add_rows(T* acc, const T* w, const T* x, std::int64_t ldx, std::int64_t n,
                    std::int64_t hd) {
  std::int64_t d0 = 0;
#if SEQPAR_CPU_SIMD
  if constexpr (std::is_same_v<T, float>) {
    constexpr int vecs = 8;
    for (; d0 + vecs * F32x8::lanes <= hd; d0 += vecs * F32x8::lanes) {
      F32x8 a[vecs];
      for (int k = 0; k < vecs; ++k) a[k] = F32x8::load(acc + d0 + k * F32x8::lanes);
      for (std::int64_t c = 0; c < n; ++c) {
        if (w[c] == 0.0f) continue;
        const F32x8 b(w[c]);
        const float* xr = x + c * ldx + d0;
        for (int k = 0; k < vecs; ++k) a[k] = fma(b, F32x8::load(xr + k * F32x8::lanes), a[k]);
      }
      for (int k = 0; k < vecs; ++k) a[k].store(acc + d0 + k * F32x8::lanes);
    }
    for (; d0 + F32x8::lanes <= hd; d0 += F32x8::lanes) {
      F32x8 a = F32x8::load(acc + d0);
      for (std::int64_t c = 0; c < n; ++c)
        if (w[c] != 0.0f) a = fma(F32x8(w[c]), F32x8::load(x + c * ldx + d0), a);
      a.store(acc + d0);
    }
  }
#endif
  if (d0 == hd) return;
  for (std::int64_t c = 0; c < n; ++c) {
    const T wc = w[c];
    if (wc == T(0)) continue;
    const T* xr = x + c * ldx;
    SEQPAR_OMP(simd)
    for (std::int64_t d = d0; d < hd; ++d) acc[d] += wc * xr[d];
  }
}

// kT[d, c] = x[(j0 + c) * ld + d]: a key (or value) tile transposed, so that the score
// row of a query is a sum of scaled rows of kT (unit stride, vectorised).
template <class T>
void flash_transpose_tile(T* kT, const T* x, std::int64_t ld, std::int64_t j0, std::int64_t cols,
                          std::int64_t hd) {
  for (std::int64_t c = 0; c < cols; ++c) {
    const T* xr = x + (j0 + c) * ld;
    for (std::int64_t d = 0; d < hd; ++d) kT[d * FlashCpuTiles::keys + c] = xr[d];
  }
}

/// ctx[B*T, Hl] and lse[B, nh, T] of causal ALiBi attention on qkv[B*T, 3*Hl] (per head
/// (head, {q,k,v}, hd)); pos[B*T], valid[B*T] and slopes[nh] as in Ops<Cpu>::attention_forward.
template <class T>
void flash_attention_forward(T* ctx, T* lse, const T* qkv, const T* pos, const std::uint8_t* valid,
                             const T* slopes, std::int64_t B, std::int64_t Tn, std::int64_t nh,
                             std::int64_t hd) {
  constexpr std::int64_t Bq = FlashCpuTiles::queries, Bk = FlashCpuTiles::keys;
  if (B <= 0 || Tn <= 0 || nh <= 0) return;
  const std::int64_t ld = 3 * nh * hd, Hl = nh * hd, tiles = (Tn + Bq - 1) / Bq;
  const T scale = T(1) / std::sqrt(T(hd));
  std::vector<std::int64_t> first(static_cast<std::size_t>(B));
  for (std::int64_t b = 0; b < B; ++b)
    first[static_cast<std::size_t>(b)] = first_valid_key(valid + b * Tn, Tn);
  SEQPAR_OMP(parallel)
  {
    // kT [hd, Bk]; S [Bq, Bk] scores, then weights; acc [Bq, hd]; m, l [Bq]
    std::vector<T> kT(static_cast<std::size_t>(hd * Bk)), S(static_cast<std::size_t>(Bq * Bk)),
        acc(static_cast<std::size_t>(Bq * hd)), m(Bq), l(Bq);
    SEQPAR_OMP(for collapse(3) schedule(dynamic))
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < nh; ++h)
        for (std::int64_t t = 0; t < tiles; ++t) {
          const auto [q, k, v] = kernels::head_qkv(qkv, b, h, Tn, ld, hd);
          const T* pb = pos + b * Tn;
          const std::uint8_t* vb = valid + b * Tn;
          const std::int64_t f = first[static_cast<std::size_t>(b)], i0 = t * Bq,
                             i1 = std::min(i0 + Bq, Tn);
          // Keys the tile's queries attend: the causal prefix, from the tile holding the
          // first valid key, or all T keys when one of them attends uniformly.
          const bool any_uniform = kernels::attends_uniformly(i0, f);
          const std::int64_t key_begin = any_uniform ? 0 : f / Bk * Bk,
                             key_end = any_uniform ? Tn : i1;
          std::fill(m.begin(), m.end(), kernels::minus_infinity<T>());
          std::fill(l.begin(), l.end(), T(0));
          std::fill(acc.begin(), acc.end(), T(0));
          for (std::int64_t j0 = key_begin; j0 < key_end; j0 += Bk) {
            const std::int64_t cols = std::min(Bk, key_end - j0);
            flash_transpose_tile(kT.data(), k, ld, j0, cols, hd);
            for (std::int64_t r = 0; r < i1 - i0; ++r) {
              const std::int64_t i = i0 + r;
              const bool uniform = kernels::attends_uniformly(i, f);
              T* s = S.data() + r * Bk;
              flash_qk_row(s, q + i * ld, kT.data(), cols, hd);
              T tile_max = kernels::minus_infinity<T>();
              for (std::int64_t c = 0; c < cols; ++c) {
                const std::int64_t j = j0 + c;
                s[c] =
                    kernels::flash_score(s[c], scale, slopes[h], pb[j], vb[j] != 0, i, j, uniform);
                tile_max = std::max(tile_max, s[c]);
              }
              const T corr = kernels::online_rescale(m[r], tile_max);
              l[r] = l[r] * corr + flash_exp_row(s, s, cols, m[r]);
              T* a = acc.data() + r * hd;
              if (corr != T(1))
                for (std::int64_t d = 0; d < hd; ++d) a[d] *= corr;
              flash_add_rows(a, s, v + j0 * ld, ld, cols, hd);  // acc_i += sum_c w_c v_{j0+c}  [hd]
            }
          }
          for (std::int64_t r = 0; r < i1 - i0; ++r) {
            const std::int64_t i = i0 + r;
            const T inv = T(1) / l[r];
            T* out = ctx + (b * Tn + i) * Hl + h * hd;
            for (std::int64_t d = 0; d < hd; ++d) out[d] = acc[r * hd + d] * inv;
            lse[(b * nh + h) * Tn + i] = kernels::log_sum_exp(m[r], l[r]);
          }
        }
  }
}

/// dqkv[B*T, 3*Hl] from dctx[B*T, Hl], the forward's ctx[B*T, Hl] and lse[B, nh, T];
/// delta[B, nh, T] receives D = rowsum(dctx * ctx) per head. One thread per (row, head):
/// it walks the key tiles, and for each the query tiles that attend it, keeping that key
/// tile's dk and dv and adding into dq, so no two threads write the same element.
template <class T>
void flash_attention_backward(T* dqkv, const T* dctx, const T* ctx, const T* qkv, const T* lse,
                              const T* pos, const std::uint8_t* valid, const T* slopes, T* delta,
                              std::int64_t B, std::int64_t Tn, std::int64_t nh, std::int64_t hd) {
  constexpr std::int64_t Bq = FlashCpuTiles::queries, Bk = FlashCpuTiles::keys;
  if (B <= 0 || Tn <= 0 || nh <= 0) return;
  const std::int64_t ld = 3 * nh * hd, Hl = nh * hd;
  const T scale = T(1) / std::sqrt(T(hd));
  SEQPAR_OMP(parallel)
  {
    // kT, vT [hd, Bk]; p, dp, g [Bk] one query's row; pT, gT [Bk, Bq] the tile's p and
    // scale ds by key; dk, dv [Bk, hd]
    std::vector<T> kT(static_cast<std::size_t>(hd * Bk)), vT(static_cast<std::size_t>(hd * Bk)),
        p(Bk), dp(Bk), g(Bk), pT(static_cast<std::size_t>(Bk * Bq)),
        gT(static_cast<std::size_t>(Bk * Bq)), dk(static_cast<std::size_t>(Bk * hd)),
        dv(static_cast<std::size_t>(Bk * hd));
    SEQPAR_OMP(for collapse(2) schedule(dynamic))
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < nh; ++h) {
        const auto [q, k, v] = kernels::head_qkv(qkv, b, h, Tn, ld, hd);
        T* dq = kernels::head_qkv(dqkv, b, h, Tn, ld, hd).q;
        const T* dO = dctx + b * Tn * Hl + h * hd;
        const T* O = ctx + b * Tn * Hl + h * hd;
        const T* L = lse + (b * nh + h) * Tn;
        T* D = delta + (b * nh + h) * Tn;
        const T* pb = pos + b * Tn;
        const std::uint8_t* vb = valid + b * Tn;
        const std::int64_t f = first_valid_key(vb, Tn);
        for (std::int64_t i = 0; i < Tn; ++i) {
          T dot = 0;
          for (std::int64_t d = 0; d < hd; ++d) dot += dO[i * Hl + d] * O[i * Hl + d];
          D[i] = dot;
          std::fill(dq + i * ld, dq + i * ld + hd, T(0));
        }
        for (std::int64_t j0 = 0; j0 < Tn; j0 += Bk) {
          const std::int64_t cols = std::min(Bk, Tn - j0);
          flash_transpose_tile(kT.data(), k, ld, j0, cols, hd);
          flash_transpose_tile(vT.data(), v, ld, j0, cols, hd);
          std::fill(dk.begin(), dk.end(), T(0));
          std::fill(dv.begin(), dv.end(), T(0));
          for (std::int64_t i0 = 0; i0 < Tn; i0 += Bq) {
            const std::int64_t i1 = std::min(i0 + Bq, Tn);
            // Unless one of its queries attends uniformly, a query tile sees this key tile
            // only if some query is at or after its first key and some key is valid.
            if (!kernels::attends_uniformly(i0, f) && (i1 <= j0 || j0 + cols <= f)) continue;
            const std::int64_t rows = i1 - i0;
            for (std::int64_t r = 0; r < rows; ++r) {
              const std::int64_t i = i0 + r;
              const bool uniform = kernels::attends_uniformly(i, f);
              // p[c] = exp(s_ic - lse_i);  dp[c] = dctx_i . v_c;  g[c] = scale ds_ic
              flash_qk_row(p.data(), q + i * ld, kT.data(), cols, hd);
              for (std::int64_t c = 0; c < cols; ++c) {
                const std::int64_t j = j0 + c;
                p[c] =
                    kernels::flash_score(p[c], scale, slopes[h], pb[j], vb[j] != 0, i, j, uniform);
              }
              flash_exp_row(p.data(), p.data(), cols, L[i]);
              flash_qk_row(dp.data(), dO + i * Hl, vT.data(), cols, hd);
              for (std::int64_t c = 0; c < cols; ++c) {
                // A masked score (p = 0) passes no gradient.
                g[c] = p[c] == T(0) ? T(0) : scale * kernels::softmax_grad(p[c], dp[c], D[i]);
                pT[c * Bq + r] = p[c];
                gT[c * Bq + r] = g[c];
              }
              flash_add_rows(dq + i * ld, g.data(), k + j0 * ld, ld, cols,
                             hd);  // dq_i += sum_c g_c k_c
            }
            // dv_c += sum_r p_rc dctx_r;  dk_c += sum_r g_rc q_r
            for (std::int64_t c = 0; c < cols; ++c) {
              flash_add_rows(dv.data() + c * hd, pT.data() + c * Bq, dO + i0 * Hl, Hl, rows, hd);
              flash_add_rows(dk.data() + c * hd, gT.data() + c * Bq, q + i0 * ld, ld, rows, hd);
            }
          }
          for (std::int64_t c = 0; c < cols; ++c) {
            T* row = dq + (j0 + c) * ld;
            std::copy(dk.begin() + c * hd, dk.begin() + (c + 1) * hd, row + hd);
            std::copy(dv.begin() + c * hd, dv.begin() + (c + 1) * hd, row + 2 * hd);
          }
        }
      }
  }
}

// 16-bit storage: the float loops above on widened copies of the inputs (transient,
// freed on return; q, k and v are read many times, so they are widened once a call), the
// outputs rounded once. lse, delta, positions and slopes are float.
template <class T>
requires(cpu::Half<T>) void flash_attention_forward(T* ctx, float* lse, const T* qkv,
                                                    const float* pos, const std::uint8_t* valid,
                                                    const float* slopes, std::int64_t B,
                                                    std::int64_t Tn, std::int64_t nh,
                                                    std::int64_t hd) {
  const std::int64_t N = B * Tn, Hl = nh * hd;
  std::vector<float> q(static_cast<std::size_t>(N * 3 * Hl)), c(static_cast<std::size_t>(N * Hl));
  cpu::convert(q.data(), qkv, N * 3 * Hl);
  flash_attention_forward(c.data(), lse, q.data(), pos, valid, slopes, B, Tn, nh, hd);
  cpu::convert(ctx, c.data(), N * Hl);
}
template <class T>
requires(cpu::Half<T>) void flash_attention_backward(T* dqkv, const T* dctx, const T* ctx,
                                                     const T* qkv, const float* lse,
                                                     const float* pos, const std::uint8_t* valid,
                                                     const float* slopes, float* delta,
                                                     std::int64_t B, std::int64_t Tn,
                                                     std::int64_t nh, std::int64_t hd) {
  const std::int64_t N = B * Tn, Hl = nh * hd;
  std::vector<float> q(static_cast<std::size_t>(N * 3 * Hl)), dq(q.size()),
      c(static_cast<std::size_t>(N * Hl)), dc(c.size());
  cpu::convert(q.data(), qkv, N * 3 * Hl);
  cpu::convert(c.data(), ctx, N * Hl);
  cpu::convert(dc.data(), dctx, N * Hl);
  flash_attention_backward(dq.data(), dc.data(), c.data(), q.data(), lse, pos, valid, slopes, delta,
                           B, Tn, nh, hd);
  cpu::convert(dqkv, dq.data(), N * 3 * Hl);
}

}  // namespace seqpar::inline v0::detail

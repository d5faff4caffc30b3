#pragma once
// Causal ALiBi attention on the CPU (part of Ops<Cpu>), the softmax a row at a time while the
// head's scores are in cache; a query with no valid key (left padding) attends uniformly to all
// keys, as an additive-mask implementation does.

#ifndef SEQPAR_BACKEND_CPU_OPS_INCLUDED
#error "backend/cpu/attention.hpp is a part of Ops<Cpu>: include seqpar/backend/cpu/ops.hpp instead"
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "seqpar/backend/cpu/gemm.hpp"
#include "seqpar/backend/cpu/loops.hpp"
#include "seqpar/backend/kernels.hpp"
#include "seqpar/core/omp.hpp"

namespace seqpar::inline v0::detail::cpu {

// One score row of query i: add alibi, mask keys j > i and invalid ones, softmax in place.
template <class T>
void alibi_softmax_row(T* s, const T* pos, const std::uint8_t* valid, T slope, std::int64_t i,
                       std::int64_t Tn) {
  constexpr T masked = -std::numeric_limits<T>::infinity();
  T mx = masked;
  for (std::int64_t j = 0; j <= i; ++j) {
    s[j] = valid[j] ? kernels::alibi_score(s[j], slope, pos[j]) : masked;
    mx = std::max(mx, s[j]);
  }
  if (mx == masked) {
    std::fill(s, s + Tn, T(1) / T(Tn));
    return;
  }
  const T inv = T(1) / exp_shifted(s, s, i + 1, mx, T(1));  // exp(-inf) = 0 for the masked keys
  for (std::int64_t j = 0; j <= i; ++j) s[j] *= inv;
  std::fill(s + i + 1, s + Tn, T(0));
}

// Causal attention by blocks of query rows: the keys a block's products need. Query i attends
// to keys [0, i], so a block of rows [i0, i1) needs keys [0, i1) of the scores, the context,
// d P and d q: the products' columns (or depth) past them are zeros in the probabilities. A
// query before the row's first valid key attends to every key (uniformly), so a block that
// holds one needs them all (`keys`). The block's values are the whole-row products' own bits:
// each element's sum is the same, its trailing zero terms dropped.
inline constexpr std::int64_t attention_rows = 96;

struct CausalBlock {
  std::int64_t i0, rows, causal_keys, keys;
};

template <class F>
void for_causal_blocks(const std::uint8_t* valid, std::int64_t Tn, F&& f) {
  const std::int64_t first_valid = std::find(valid, valid + Tn, std::uint8_t{1}) - valid;
  for (std::int64_t i0 = 0; i0 < Tn; i0 += attention_rows) {
    const std::int64_t i1 = std::min(Tn, i0 + attention_rows);
    f(CausalBlock{i0, i1 - i0, i1, i0 < first_valid ? Tn : i1});
  }
}

// Head (b, h) of attention_probs: P[T, T] = scale q k^T, then + alibi, masked, softmax
// per row; returns P. For 16-bit storage the scores are made and normalised in `wide`
// (float, [T, T]) and P is their rounding.
template <class T, class S>
T* head_probs(T* probs, const T* qkv, const S* pos, const std::uint8_t* valid, const S* slopes,
              std::int64_t b, std::int64_t h, std::int64_t Tn, std::int64_t nh, std::int64_t hd,
              S* wide) {
  static_assert(std::is_same_v<S, Wide<T>>, "positions and slopes are kept in Wide<T>");
  const std::int64_t ld = 3 * nh * hd;
  const S scale = S(1) / std::sqrt(S(hd));
  const T* q = kernels::head_qkv(qkv, b, h, Tn, ld, hd).q;
  T* P = probs + (b * nh + h) * Tn * Tn;
  S* scores = [&] {
    if constexpr (Half<T>)
      return wide;
    else
      return P;
  }();
  const S* pb = pos + b * Tn;
  const std::uint8_t* vb = valid + b * Tn;
  // a query's scores past its own key are never read (the softmax masks them)
  for_causal_blocks(vb, Tn, [&](const CausalBlock& c) {
    gemm<T>(false, true, c.rows, c.causal_keys, hd, scale, q + c.i0 * ld, ld, q + hd, ld, S(0),
            scores + c.i0 * Tn, Tn);
  });
  for (std::int64_t i = 0; i < Tn; ++i)
    alibi_softmax_row(scores + i * Tn, pb, vb, slopes[h], i, Tn);
  if constexpr (Half<T>) convert_n(P, scores, Tn * Tn);
  return P;
}

// The float scratch a thread needs for one head: [T, T] scores for 16-bit storage, none else.
template <class T>
std::vector<Wide<T>> head_scratch(std::int64_t Tn) {
  return std::vector<Wide<T>>(Half<T> ? static_cast<std::size_t>(Tn * Tn) : 0);
}

template <class T, class S>
void attention_forward(T* ctx, T* probs, const T* qkv, const S* pos, const std::uint8_t* valid,
                       const S* slopes, std::int64_t B, std::int64_t Tn, std::int64_t nh,
                       std::int64_t hd) {
  const std::int64_t ld = 3 * nh * hd, Hl = nh * hd;
  SEQPAR_OMP(parallel)
  {
    auto wide = head_scratch<T>(Tn);
    SEQPAR_OMP(for collapse(2) schedule(static))
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < nh; ++h) {
        const T* P = head_probs(probs, qkv, pos, valid, slopes, b, h, Tn, nh, hd, wide.data());
        // ctx[T, hd] = P v (while P is still in cache)
        const T* v = kernels::head_qkv(qkv, b, h, Tn, ld, hd).v;
        T* c = ctx + b * Tn * Hl + h * hd;
        for_causal_blocks(valid + b * Tn, Tn, [&](const CausalBlock& blk) {
          gemm<T>(false, false, blk.rows, hd, blk.keys, S(1), P + blk.i0 * Tn, Tn, v, ld, S(0),
                  c + blk.i0 * Hl, Hl);
        });
      }
  }
}

// The probabilities of attention_forward alone: the same values bit for bit.
template <class T, class S>
void attention_probs(T* probs, const T* qkv, const S* pos, const std::uint8_t* valid,
                     const S* slopes, std::int64_t B, std::int64_t Tn, std::int64_t nh,
                     std::int64_t hd) {
  SEQPAR_OMP(parallel)
  {
    auto wide = head_scratch<T>(Tn);
    SEQPAR_OMP(for collapse(2) schedule(static))
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < nh; ++h)
        head_probs(probs, qkv, pos, valid, slopes, b, h, Tn, nh, hd, wide.data());
  }
}

// dqkv[B*T, 3*Hl] = attention backward of dctx[B*T, Hl]; scratch holds B*nh*T*T elements (dS per
// head). For 16-bit storage dP and the softmax backward are in float (a [T, T] scratch a
// thread), dS is rounded once into scratch.
template <class T>
void attention_backward(T* dqkv, const T* dctx, const T* qkv, const T* probs,
                        const std::uint8_t* valid, T* scratch, std::int64_t B, std::int64_t Tn,
                        std::int64_t nh, std::int64_t hd) {
  using S = Wide<T>;
  const std::int64_t ld = 3 * nh * hd, Hl = nh * hd;
  const S scale = S(1) / std::sqrt(S(hd));
  SEQPAR_OMP(parallel)
  {
    auto wide = head_scratch<T>(Tn);
    SEQPAR_OMP(for collapse(2) schedule(static))
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < nh; ++h) {
        // named pointers, not structured bindings: the blocks' lambdas capture them
        const auto in = kernels::head_qkv(qkv, b, h, Tn, ld, hd);
        const auto out = kernels::head_qkv(dqkv, b, h, Tn, ld, hd);
        const T *q = in.q, *k = in.k, *v = in.v;
        T *dq = out.q, *dk = out.k, *dv = out.v;
        const T* P = probs + (b * nh + h) * Tn * Tn;
        const T* dc = dctx + b * Tn * Hl + h * hd;
        T* dS = scratch + (b * nh + h) * Tn * Tn;
        S* dP = [&] {
          if constexpr (Half<T>)
            return wide.data();
          else
            return dS;
        }();
        const std::uint8_t* vb = valid + b * Tn;
        // dP[T, T] = dctx v^T (a row's entries past its keys are not read);  dv[T, hd] = P^T dctx
        for_causal_blocks(vb, Tn, [&](const CausalBlock& blk) {
          gemm<T>(false, true, blk.rows, blk.keys, hd, S(1), dc + blk.i0 * Hl, Hl, v, ld, S(0),
                  dP + blk.i0 * Tn, Tn);
        });
        gemm<T>(true, false, Tn, hd, Tn, S(1), P, Tn, dc, Hl, S(0), dv, ld);
        bool any_valid = false;
        for (std::int64_t i = 0; i < Tn; ++i) {
          any_valid = any_valid || vb[i];
          // A query with no valid key attended uniformly to all keys through an additive mask;
          // its gradient flows through every score, as autograd passes it through the mask.
          const std::int64_t keys = any_valid ? i + 1 : Tn;
          S* row = dP + i * Tn;
          const T* p = P + i * Tn;
          S dot = 0;
          for (std::int64_t j = 0; j < keys; ++j) dot += widen(p[j]) * row[j];
          for (std::int64_t j = 0; j < keys; ++j)
            row[j] = kernels::softmax_grad(widen(p[j]), row[j], dot);
          std::fill(row + keys, row + Tn, S(0));
        }
        if constexpr (Half<T>) convert_n(dS, dP, Tn * Tn);
        // dq = scale dS k;  dk = scale dS^T q
        for_causal_blocks(vb, Tn, [&](const CausalBlock& blk) {
          gemm<T>(false, false, blk.rows, hd, blk.keys, scale, dS + blk.i0 * Tn, Tn, k, ld, S(0),
                  dq + blk.i0 * ld, ld);
        });
        gemm<T>(true, false, Tn, hd, Tn, scale, dS, Tn, q, ld, S(0), dk, ld);
      }
  }
}

}  // namespace seqpar::inline v0::detail::cpu

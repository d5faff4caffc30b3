#pragma once
// The tied LM head and the shifted cross-entropy, over vocabulary chunks: the
// [tokens x vocab] logits are never held whole. Pass 1 keeps a running max and sum of
// exponentials per token (an online softmax); pass 2 recomputes each chunk's logits
// and turns them into gradients. Over a vocab-split tensor axis the three reductions
// of a vocab-parallel cross-entropy (max, sum of exps, target logit) are the axis hooks.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "seqpar/backend/device.hpp"
#include "seqpar/core/arena.hpp"
#include "seqpar/train/batch.hpp"

namespace seqpar::inline v0 {

/// Sum of per-token losses and the number of tokens in it.
struct LossSum {
  double sum = 0;
  std::int64_t tokens = 0;
};

/// The vocab rows a rank holds: [row0, row0 + rows) of the padded table, of which the
/// first `real` rows are real tokens (the rest is padding that never enters the softmax).
struct VocabShard {
  std::int64_t row0 = 0, rows = 0, real = 0;
};

/// Scratch of the head, sized for the largest micro-batch seen.
template <class T, class ArenaT>
struct HeadScratch {
  Buffer<T, ArenaT> h, dh, logits;  // [Nv, H], [Nv, H], [Nv, chunk]
  std::vector<T> mx, sum, target, lse;

  void reserve(ArenaT& arena, std::int64_t n, std::int64_t hidden, std::int64_t chunk) {
    grow(arena, h, n * hidden);
    grow(arena, dh, n * hidden);
    grow(arena, logits, n * chunk);
  }

 private:
  static void grow(ArenaT& arena, Buffer<T, ArenaT>& b, std::int64_t n) {
    if (static_cast<std::int64_t>(b.size()) < n) b = Buffer<T, ArenaT>(arena, static_cast<std::size_t>(n), Memory::buffers);
  }
};

/// Chunk width: a multiple of 128 columns, at most `budget_bytes` of logits for n tokens.
inline std::int64_t vocab_chunk(std::int64_t n, std::int64_t rows, std::size_t elem, std::int64_t budget_bytes) {
  std::int64_t c = budget_bytes / std::max<std::int64_t>(1, n * static_cast<std::int64_t>(elem));
  c = std::max<std::int64_t>(128, c / 128 * 128);
  return std::min(c, std::max<std::int64_t>(rows, 1));
}

/// Loss of the tokens whose target is not ignored and, when `grad_scale` != 0, the
/// gradients: dh[N, H] = d loss / d hf (zero rows for ignored tokens) and dW += ...
/// hf[N, H] is the output of ln_f; W[rows, H] the local vocab rows of the tied table.
template <Device D, class T, class ArenaT, class Axis>
LossSum lm_head_loss(T* dh, T* dW, const T* hf, const T* W, const std::vector<std::int32_t>& targets,
                     std::int64_t hidden, const VocabShard& vs, T grad_scale, HeadScratch<T, ArenaT>& sc,
                     ArenaT& arena, Axis& axis, std::int64_t chunk_budget_bytes = 32ll << 20) {
  using O = Ops<D>;
  const std::int64_t N = static_cast<std::int64_t>(targets.size()), H = hidden;
  // Compact the tokens that have a target: ignored ones cost nothing.
  std::vector<std::int64_t> rows_of;
  for (std::int64_t i = 0; i < N; ++i)
    if (targets[static_cast<std::size_t>(i)] != ignore_index) rows_of.push_back(i);
  const std::int64_t Nv = static_cast<std::int64_t>(rows_of.size());
  if (dh) O::fill(dh, T(0), N * H);
  if (Nv == 0) return {};
  const std::int64_t chunk = vocab_chunk(Nv, vs.real, sizeof(T), chunk_budget_bytes);
  sc.reserve(arena, Nv, H, chunk);
  for (std::int64_t r = 0; r < Nv; ++r) O::copy(sc.h.data() + r * H, hf + rows_of[static_cast<std::size_t>(r)] * H, H);
  const T* hv = sc.h.data();
  T* L = sc.logits.data();
  sc.mx.assign(static_cast<std::size_t>(Nv), -std::numeric_limits<T>::infinity());
  sc.sum.assign(static_cast<std::size_t>(Nv), T(0));
  sc.target.assign(static_cast<std::size_t>(Nv), T(0));
  const auto target_of = [&](std::int64_t r) {
    return static_cast<std::int64_t>(targets[static_cast<std::size_t>(rows_of[static_cast<std::size_t>(r)])]);
  };

  // Pass 1: running max and sum of exps over the local vocab; the target logit where local.
  for (std::int64_t c0 = 0; c0 < vs.real; c0 += chunk) {
    const std::int64_t cw = std::min(chunk, vs.real - c0);
    O::gemm(false, true, Nv, cw, H, T(1), hv, H, W + c0 * H, H, T(0), L, cw);  // [Nv, cw]
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < Nv; ++r) {
      const T* l = L + r * cw;
      T m = sc.mx[static_cast<std::size_t>(r)];
      for (std::int64_t j = 0; j < cw; ++j) m = std::max(m, l[j]);
      T s = sc.sum[static_cast<std::size_t>(r)] * std::exp(sc.mx[static_cast<std::size_t>(r)] - m);
      for (std::int64_t j = 0; j < cw; ++j) s += std::exp(l[j] - m);
      sc.mx[static_cast<std::size_t>(r)] = m;
      sc.sum[static_cast<std::size_t>(r)] = s;
      const std::int64_t t = target_of(r) - vs.row0 - c0;
      if (t >= 0 && t < cw) sc.target[static_cast<std::size_t>(r)] = l[t];
    }
  }
  // Across vocab shards: global max, then rescaled sums, then the one target logit.
  std::vector<T> global_mx = sc.mx;
  axis.max(global_mx.data(), Nv);
  for (std::int64_t r = 0; r < Nv; ++r) {
    const auto i = static_cast<std::size_t>(r);
    sc.sum[i] = vs.real > 0 ? sc.sum[i] * std::exp(sc.mx[i] - global_mx[i]) : T(0);
  }
  axis.sum(sc.sum.data(), Nv);
  axis.sum(sc.target.data(), Nv);
  sc.lse.resize(static_cast<std::size_t>(Nv));
  LossSum out{0, Nv};
  for (std::int64_t r = 0; r < Nv; ++r) {
    const auto i = static_cast<std::size_t>(r);
    sc.lse[i] = global_mx[i] + std::log(sc.sum[i]);
    out.sum += static_cast<double>(sc.lse[i] - sc.target[i]);
  }
  if (grad_scale == T(0) || !dh) return out;

  // Pass 2: G = (softmax - onehot) * grad_scale per chunk; dh += G W_c; dW_c += G^T h.
  T* dhv = sc.dh.data();
  O::fill(dhv, T(0), Nv * H);
  for (std::int64_t c0 = 0; c0 < vs.real; c0 += chunk) {
    const std::int64_t cw = std::min(chunk, vs.real - c0);
    O::gemm(false, true, Nv, cw, H, T(1), hv, H, W + c0 * H, H, T(0), L, cw);
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < Nv; ++r) {
      T* l = L + r * cw;
      const T lse = sc.lse[static_cast<std::size_t>(r)];
      for (std::int64_t j = 0; j < cw; ++j) l[j] = std::exp(l[j] - lse) * grad_scale;
      const std::int64_t t = target_of(r) - vs.row0 - c0;
      if (t >= 0 && t < cw) l[t] -= grad_scale;
    }
    O::gemm(false, false, Nv, H, cw, T(1), L, cw, W + c0 * H, H, T(1), dhv, H);    // [Nv, H]
    O::gemm(true, false, cw, H, Nv, T(1), L, cw, hv, H, T(1), dW + c0 * H, H);    // [cw, H]
  }
  axis.sum(dhv, Nv * H);  // every vocab shard contributed to each token's dh
  for (std::int64_t r = 0; r < Nv; ++r) O::copy(dh + rows_of[static_cast<std::size_t>(r)] * H, dhv + r * H, H);
  return out;
}

/// logits[N, rows] = hf[N, H] W[rows, H]^T for the local vocab rows (evaluation, tests).
template <Device D, class T>
void lm_head_logits(T* logits, const T* hf, const T* W, std::int64_t n, std::int64_t hidden, std::int64_t rows) {
  Ops<D>::gemm(false, true, n, rows, hidden, T(1), hf, hidden, W, hidden, T(0), logits, rows);
}

}  // namespace seqpar::inline v0

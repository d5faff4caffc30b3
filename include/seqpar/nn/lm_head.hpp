#pragma once
// The tied LM head and shifted cross-entropy over vocabulary chunks, holding at most a byte
// budget of logits (online softmax, then logits recomputed for the gradients); the budget
// trades memory against one extra GEMM a micro-batch (TrainOptions::logits_bytes).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "seqpar/backend/device.hpp"
#include "seqpar/config/units.hpp"
#include "seqpar/core/arena.hpp"
#include "seqpar/core/batch.hpp"
#include "seqpar/core/profile.hpp"
#include "seqpar/nn/activations.hpp"
#include "seqpar/parallel/tensor_axis.hpp"

namespace seqpar::inline v0 {

/// Sum of per-token losses and the number of tokens in it.
struct LossSum {
  double sum = 0;
  std::int64_t tokens = 0;
};

/// Scratch of the head, sized for the largest micro-batch seen; device memory but for
/// the host lists the row compaction starts from.
template <class T, class ArenaT>
struct HeadScratch {
  using S = StatScalar<T>;
  Buffer<T, ArenaT> h, dh, logits;                    // [Nv, H], [Nv, H], [Nv, chunk]
  Buffer<S, ArenaT> dh_sum;                           // [Nv, H] dh over the chunks (16-bit T only)
  Buffer<S, ArenaT> mx, global_mx, sum, picked, lse;  // [Nv] online softmax statistics
  Buffer<std::int32_t, ArenaT> rows, target;          // [Nv] kept tokens; their local target
  std::vector<std::int32_t> host_rows, host_target;

  void reserve(ArenaT& arena, std::int64_t n, std::int64_t hidden, std::int64_t chunk) {
    grow(arena, h, n * hidden);
    grow(arena, dh, n * hidden);
    grow(arena, logits, n * chunk);
    if constexpr (!std::is_same_v<S, T>) grow(arena, dh_sum, n * hidden);
    for (auto* b : {&mx, &global_mx, &sum, &picked, &lse}) grow(arena, *b, n);
    grow(arena, rows, n);
    grow(arena, target, n);
  }
};

/// Loss of the tokens whose target is not ignored and, when `grad_scale` != 0, the
/// gradients: dh[N, H] = d loss / d hf (zero rows for ignored tokens) and dW += ...
/// hf[N, H] is the output of ln_f; W[rows, H] the local vocab rows of the tied table;
/// targets (host) the shifted labels. Every pointer but `targets` is device memory.
template <Device D, class T, class ArenaT, TensorAxis Axis>
LossSum lm_head_loss(T* dh, T* dW, const T* hf, const T* W,
                     const std::vector<std::int32_t>& targets, std::int64_t hidden,
                     const VocabShard& vs, StatScalar<T> grad_scale, HeadScratch<T, ArenaT>& sc,
                     ArenaT& arena, Axis& axis,
                     std::int64_t chunk_budget_bytes = Ops<D>::logits_chunk_bytes) {
  using O = Ops<D>;
  using S = StatScalar<T>;
  using profile::Phase, profile::Scope;
  const std::int64_t N = static_cast<std::int64_t>(targets.size()), H = hidden;
  // Compact the tokens that have a target (ignored ones cost nothing): the list of their
  // rows and their targets in the local vocabulary go to the device once.
  sc.host_rows.clear();
  sc.host_target.clear();
  for (std::int64_t i = 0; i < N; ++i) {
    const std::int32_t t = targets[static_cast<std::size_t>(i)];
    if (t == ignore_index) continue;
    sc.host_rows.push_back(static_cast<std::int32_t>(i));
    sc.host_target.push_back(static_cast<std::int32_t>(t - vs.row0));
  }
  const auto Nv = static_cast<std::int64_t>(sc.host_rows.size());
  if (dh) {
    const Scope p(Phase::conversion, 0, static_cast<double>(N * H * sizeof(T)));
    O::fill(dh, T(0.0f), N * H);
  }
  if (Nv == 0) return {};
  const double head_flops = 2.0 * static_cast<double>(Nv * H);     // per vocabulary row
  const double logit_bytes = static_cast<double>(Nv * sizeof(T));  // per vocabulary row
  const std::int64_t chunk = vocab_chunk(Nv, vs.real, sizeof(T), chunk_budget_bytes);
  sc.reserve(arena, Nv, H, chunk);
  O::upload(sc.rows.data(), sc.host_rows.data(), Nv);
  O::upload(sc.target.data(), sc.host_target.data(), Nv);
  {
    const Scope p(Phase::loss, 0, 2.0 * static_cast<double>(Nv * H * sizeof(T)));
    O::gather_rows(sc.h.data(), hf, sc.rows.data(), Nv, H);  // [Nv, H]
  }
  const T* hv = sc.h.data();
  T* L = sc.logits.data();
  S* mx = sc.mx.data();
  S* gmx = sc.global_mx.data();
  S* sum = sc.sum.data();
  S* picked = sc.picked.data();
  S* lse = sc.lse.data();
  const std::int32_t* tgt = sc.target.data();
  O::fill(mx, -std::numeric_limits<S>::infinity(), Nv);
  O::fill(sum, S(0), Nv);
  O::fill(picked, S(0), Nv);

  // Pass 1: running max and sum of exps over the local vocab; the target logit where local.
  for (std::int64_t c0 = 0; c0 < vs.real; c0 += chunk) {
    const std::int64_t cw = std::min(chunk, vs.real - c0);
    {
      const Scope p(Phase::lm_head, head_flops * static_cast<double>(cw));
      O::gemm(false, true, Nv, cw, H, T(1.0f), hv, H, W + c0 * H, H, T(0.0f), L, cw);  // [Nv, cw]
    }
    const Scope p(Phase::loss, 0, logit_bytes * static_cast<double>(cw));
    O::softmax_stats(mx, sum, picked, L, tgt, Nv, cw, c0);
  }
  // Across vocab shards: global max, then rescaled sums, then the one target logit.
  O::copy(gmx, mx, Nv);
  axis.max(gmx, Nv);
  if (vs.real > 0) O::softmax_stats_rescale(sum, mx, gmx, Nv);  // a shard without real rows keeps 0
  axis.sum(sum, Nv);
  axis.sum(picked, Nv);
  const LossSum out{O::cross_entropy_loss(lse, gmx, sum, picked, Nv), Nv};
  if (grad_scale == S(0) || !dh) return out;

  // Pass 2: G = (softmax - onehot) * grad_scale per chunk; dh += G W_c; dW_c += G^T h.
  // With 16-bit storage dh is summed over the chunks in S: the GEMM adds each chunk's
  // product into the fp32 sum itself, never rounding it to T.
  T* dhv = sc.dh.data();
  constexpr bool sum_in_s = !std::is_same_v<S, T>;
  auto* dh_acc = [&] {
    if constexpr (sum_in_s)
      return sc.dh_sum.data();
    else
      return dhv;
  }();
  using Acc = std::remove_pointer_t<decltype(dh_acc)>;
  {
    const Scope p(Phase::conversion, 0, static_cast<double>(Nv * H * sizeof(Acc)));
    O::fill(dh_acc, Acc(0.0f), Nv * H);
  }
  const bool one_chunk = chunk >= vs.real;
  for (std::int64_t c0 = 0; c0 < vs.real; c0 += chunk) {
    const std::int64_t cw = std::min(chunk, vs.real - c0);
    const double w = static_cast<double>(cw);
    if (!one_chunk) {
      const Scope p(Phase::lm_head_backward, head_flops * w);  // the logits again
      O::gemm(false, true, Nv, cw, H, T(1.0f), hv, H, W + c0 * H, H, T(0.0f), L, cw);
    }
    {
      const Scope p(Phase::loss, 0, 2 * logit_bytes * w);
      O::cross_entropy_grad(L, lse, tgt, Nv, cw, c0, grad_scale);
    }
    const Scope p(Phase::lm_head_backward, 2 * head_flops * w);
    O::gemm(false, false, Nv, H, cw, T(1.0f), L, cw, W + c0 * H, H, T(1.0f), dh_acc, H);  // [Nv, H]
    O::gemm(true, false, cw, H, Nv, T(1.0f), L, cw, hv, H, T(1.0f), dW + c0 * H, H);      // [cw, H]
  }
  axis.sum(dh_acc, Nv * H);  // every vocab shard contributed to each token's dh
  const Scope p(Phase::conversion, 0, static_cast<double>(Nv * H) * (sizeof(Acc) + 2 * sizeof(T)));
  if constexpr (sum_in_s) O::convert(dhv, dh_acc, Nv * H);
  O::scatter_rows(dh, dhv, sc.rows.data(), Nv, H);
  return out;
}

/// logits[N, rows] = hf[N, H] W[rows, H]^T for the local vocab rows (evaluation, tests).
template <Device D, class T>
void lm_head_logits(T* logits, const T* hf, const T* W, std::int64_t n, std::int64_t hidden,
                    std::int64_t rows) {
  Ops<D>::gemm(false, true, n, rows, hidden, T(1.0f), hf, hidden, W, hidden, T(0.0f), logits, rows);
}

}  // namespace seqpar::inline v0

#pragma once
// The row steps of the chunked (and vocab-split) cross-entropy on the CPU, as
// nn/lm_head.hpp runs them over vocabulary chunks of logits L[n, cw]: an online max / sum
// of exps per row, their rescaling to the global max, the loss, and softmax minus one-hot
// as the gradient. The CPU keeps the statistics in the logits' type. target[r] is the row's
// target as an index into the local vocabulary; a chunk holds columns [col0, col0 + cw).
// The per-row arithmetic is that of backend/kernels.hpp, as in the CUDA kernels. Part of
// Ops<Cpu>.

#ifndef SEQPAR_BACKEND_CPU_OPS_INCLUDED
#error \
    "backend/cpu/cross_entropy.hpp is a part of Ops<Cpu>: include seqpar/backend/cpu/ops.hpp instead"
#endif

#include <algorithm>
#include <cstdint>

#include "seqpar/backend/cpu/loops.hpp"
#include "seqpar/backend/kernels.hpp"
#include "seqpar/core/omp.hpp"

namespace seqpar::inline v0::detail::cpu {

// mx[r] = max(mx[r], max_j L[r, j]); sum[r] = sum[r] exp(old mx - mx) + sum_j exp(L - mx);
// picked[r] = L[r, target[r] - col0] when that column is in the chunk.
template <class T, class Id>
void softmax_stats(T* mx, T* sum, T* picked, const T* L, const Id* target, std::int64_t n,
                   std::int64_t cw, std::int64_t col0) {
  SEQPAR_OMP(parallel for schedule(static))
  for (std::int64_t r = 0; r < n; ++r) {
    const T* l = L + r * cw;
    const T m = std::max(mx[r], row_max(l, cw));
    const T s = kernels::rescaled_sum(sum[r], mx[r], m) + exp_shifted<T>(nullptr, l, cw, m, T(1));
    mx[r] = m;
    sum[r] = s;
    if (const std::int64_t t = kernels::local_index(target[r], col0, cw); t >= 0) picked[r] = l[t];
  }
}

// sum[r] = sum[r] exp(mx[r] - global_mx[r])
template <class T>
void softmax_stats_rescale(T* sum, const T* mx, const T* global_mx, std::int64_t n) {
  for (std::int64_t r = 0; r < n; ++r) sum[r] = kernels::rescaled_sum(sum[r], mx[r], global_mx[r]);
}

// lse[r] = global_mx[r] + log(sum[r]); returns sum_r (lse[r] - picked[r])
template <class T>
double cross_entropy_loss(T* lse, const T* global_mx, const T* sum, const T* picked,
                          std::int64_t n) {
  double out = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    lse[r] = kernels::log_sum_exp(global_mx[r], sum[r]);
    out += static_cast<double>(lse[r] - picked[r]);
  }
  return out;
}

// In place on a chunk: L[r, j] = (exp(L[r, j] - lse[r]) - [j == target[r] - col0]) grad_scale
template <class T, class Id>
void cross_entropy_grad(T* L, const T* lse, const Id* target, std::int64_t n, std::int64_t cw,
                        std::int64_t col0, T grad_scale) {
  SEQPAR_OMP(parallel for schedule(static))
  for (std::int64_t r = 0; r < n; ++r) {
    T* l = L + r * cw;
    exp_shifted(l, l, cw, lse[r], grad_scale);
    if (const std::int64_t t = kernels::local_index(target[r], col0, cw); t >= 0)
      l[t] -= grad_scale;
  }
}

}  // namespace seqpar::inline v0::detail::cpu

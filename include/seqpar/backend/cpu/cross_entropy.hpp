#pragma once
// The row steps of the chunked (and vocab-split) cross-entropy on the CPU, as
// nn/lm_head.hpp runs them over vocabulary chunks of logits L[n, cw]: an online max / sum
// of exps per row, their rescaling to the global max, the loss, and softmax minus one-hot
// as the gradient. The statistics are in Wide<T> (float for 16-bit logits, whose rows are
// widened first). target[r] is the row's
// target as an index into the local vocabulary; a chunk holds columns [col0, col0 + cw).
// The per-row arithmetic is that of backend/kernels.hpp, as in the CUDA kernels. Part of
// Ops<Cpu>.

#ifndef SEQPAR_BACKEND_CPU_OPS_INCLUDED
#error \
    "backend/cpu/cross_entropy.hpp is a part of Ops<Cpu>: include seqpar/backend/cpu/ops.hpp instead"
#endif

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "seqpar/backend/cpu/loops.hpp"
#include "seqpar/backend/kernels.hpp"
#include "seqpar/core/omp.hpp"

namespace seqpar::inline v0::detail::cpu {

// mx[r] = max(mx[r], max_j L[r, j]); sum[r] = sum[r] exp(old mx - mx) + sum_j exp(L - mx);
// picked[r] = L[r, target[r] - col0] when that column is in the chunk.
template <class T, class S, class Id>
void softmax_stats(S* mx, S* sum, S* picked, const T* L, const Id* target, std::int64_t n,
                   std::int64_t cw, std::int64_t col0) {
  static_assert(std::is_same_v<S, Wide<T>>, "softmax statistics are kept in Wide<T>");
  SEQPAR_OMP(parallel)
  {
    std::vector<S> wide(Half<T> ? static_cast<std::size_t>(cw) : 0);
    SEQPAR_OMP(for schedule(static))
    for (std::int64_t r = 0; r < n; ++r) {
      const S* l = widened_row(wide, L + r * cw, cw);
      const S m = std::max(mx[r], row_max(l, cw));
      const S s = kernels::rescaled_sum(sum[r], mx[r], m) + exp_shifted<S>(nullptr, l, cw, m, S(1));
      mx[r] = m;
      sum[r] = s;
      if (const std::int64_t t = kernels::local_index(target[r], col0, cw); t >= 0)
        picked[r] = l[t];
    }
  }
}

// sum[r] = sum[r] exp(mx[r] - global_mx[r])
template <class S>
void softmax_stats_rescale(S* sum, const S* mx, const S* global_mx, std::int64_t n) {
  for (std::int64_t r = 0; r < n; ++r) sum[r] = kernels::rescaled_sum(sum[r], mx[r], global_mx[r]);
}

// lse[r] = global_mx[r] + log(sum[r]); returns sum_r (lse[r] - picked[r])
template <class S>
double cross_entropy_loss(S* lse, const S* global_mx, const S* sum, const S* picked,
                          std::int64_t n) {
  double out = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    lse[r] = kernels::log_sum_exp(global_mx[r], sum[r]);
    out += static_cast<double>(lse[r] - picked[r]);
  }
  return out;
}

// In place on a chunk: L[r, j] = (exp(L[r, j] - lse[r]) - [j == target[r] - col0]) grad_scale
// (16-bit storage: in float, each element rounded once)
template <class T, class S, class Id>
void cross_entropy_grad(T* L, const S* lse, const Id* target, std::int64_t n, std::int64_t cw,
                        std::int64_t col0, S grad_scale) {
  static_assert(std::is_same_v<S, Wide<T>>, "softmax statistics are kept in Wide<T>");
  SEQPAR_OMP(parallel)
  {
    std::vector<S> wide(Half<T> ? static_cast<std::size_t>(cw) : 0);
    SEQPAR_OMP(for schedule(static))
    for (std::int64_t r = 0; r < n; ++r) {
      S* l = widened_row(wide, L + r * cw, cw);
      exp_shifted(l, l, cw, lse[r], grad_scale);
      if (const std::int64_t t = kernels::local_index(target[r], col0, cw); t >= 0)
        l[t] -= grad_scale;
      if constexpr (Half<T>) convert_n(L + r * cw, l, cw);
    }
  }
}

}  // namespace seqpar::inline v0::detail::cpu

#pragma once
// Decoding's next-token scores on the CPU: the loops of Ops<Cpu>'s next_token_max,
// next_token_sum_exp, next_token_scores and next_token_top_k (backend/cpu/ops.hpp delegates
// here), one row a thread, with the arithmetic and the candidates' order of
// backend/kernels.hpp, which the CUDA kernels share. A row of logits L[rows, cols] holds this
// rank's vocabulary rows from row0, of which the first `real` are tokens (the rest padding,
// never read).

#ifndef SEQPAR_BACKEND_CPU_OPS_INCLUDED
#error \
    "backend/cpu/next_token.hpp is a part of Ops<Cpu>: include seqpar/backend/cpu/ops.hpp instead"
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "seqpar/backend/kernels.hpp"
#include "seqpar/core/omp.hpp"

namespace seqpar::inline v0::detail::cpu {

// mx[r] = the largest real logit of row r (-inf without real columns).
template <class T>
void next_token_max(float* mx, const T* L, std::int64_t rows, std::int64_t cols,
                    std::int64_t real) {
  SEQPAR_OMP(parallel for schedule(static) if (rows * real > parallel_min_elements))
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* l = L + r * cols;
    float m = -std::numeric_limits<float>::infinity();
    for (std::int64_t c = 0; c < real; ++c) m = std::max(m, static_cast<float>(l[c]));
    mx[r] = m;
  }
}

// sum[r] = sum over row r's real columns of exp(L - mx[r]), each term and the sum in double.
template <class T>
void next_token_sum_exp(double* sum, const T* L, const float* mx, std::int64_t rows,
                        std::int64_t cols, std::int64_t real) {
  SEQPAR_OMP(parallel for schedule(static) if (rows * real > parallel_min_elements))
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* l = L + r * cols;
    double s = 0;
    for (std::int64_t c = 0; c < real; ++c)
      s += std::exp(static_cast<double>(static_cast<float>(l[c]) - mx[r]));
    sum[r] = s;
  }
}

// out[r, c] (real columns) = L[r, c], or its log-probability when mx and lse are given; then
// the repetition penalty on row r's seen ids seen[seen_start[r], seen_start[r + 1]) that fall
// in [row0, row0 + real). out may be L when T is float.
template <class T>
void next_token_scores(float* out, const T* L, const float* mx, const float* lse,
                       const std::int32_t* seen, const std::int64_t* seen_start, float penalty,
                       std::int64_t rows, std::int64_t cols, std::int64_t row0, std::int64_t real) {
  SEQPAR_OMP(parallel for schedule(static) if (rows * real > parallel_min_elements))
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* l = L + r * cols;
    float* o = out + r * cols;
    for (std::int64_t c = 0; c < real; ++c) {
      const auto x = static_cast<float>(l[c]);
      o[c] = mx != nullptr ? kernels::log_probability(x, mx[r], lse[r]) : x;
    }
    if (seen == nullptr) continue;
    for (std::int64_t j = seen_start[r]; j < seen_start[r + 1]; ++j)
      if (const std::int64_t c = kernels::local_index(seen[j], row0, real); c >= 0)
        o[c] = kernels::repetition_penalised(o[c], penalty);
  }
}

// score[r, 0:k], token[r, 0:k] = row r's k best real columns of S + base[r] (base may be
// null: S alone), best first in kernels::ranks_before's order, a column's token being
// row0 + c; a row with fewer than k real columns ends in (-inf, -1).
template <class Id>
void next_token_top_k(float* score, Id* token, const float* S, const float* base, std::int64_t rows,
                      std::int64_t cols, std::int64_t row0, std::int64_t real, std::int64_t k) {
  if (k <= 0) return;
  SEQPAR_OMP(parallel for schedule(static) if (rows * real > parallel_min_elements))
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* s = S + r * cols;
    float* best = score + r * k;
    Id* id = token + r * k;
    std::int64_t n = 0;  // the candidates kept so far, in order
    for (std::int64_t c = 0; c < real; ++c) {
      const float x = base != nullptr ? s[c] + base[r] : s[c];
      const auto t = static_cast<Id>(row0 + c);
      if (n == k && !kernels::ranks_before(x, t, best[k - 1], id[k - 1])) continue;
      std::int64_t i = std::min(n, k - 1);  // where it goes: past the last, or over it
      for (; i > 0 && kernels::ranks_before(x, t, best[i - 1], id[i - 1]); --i) {
        best[i] = best[i - 1];
        id[i] = id[i - 1];
      }
      best[i] = x;
      id[i] = t;
      n = std::min(n + 1, k);
    }
    for (; n < k; ++n) {
      best[n] = -std::numeric_limits<float>::infinity();
      id[n] = Id(-1);
    }
  }
}

}  // namespace seqpar::inline v0::detail::cpu

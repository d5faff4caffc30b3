#pragma once
// Fused causal ALiBi attention's arithmetic (scores with masks, the online softmax, the backward),
// written once so the CPU tiles and the CUDA kernels compute the same bits.

#include <cmath>
#include <cstdint>

#include "seqpar/backend/kernels.hpp"
#include "seqpar/core/host_device.hpp"

namespace seqpar::inline v0::kernels {

/// -inf of T, usable in device code (std::numeric_limits is not, without relaxed constexpr).
template <class T>
SEQPAR_HOST_DEVICE T minus_infinity() {
  return -static_cast<T>(INFINITY);
}

/// Whether query i of a sequence whose first valid key is `first_valid` (T when none) has
/// no valid key at or before it, and so attends uniformly to every key.
SEQPAR_HOST_DEVICE bool attends_uniformly(std::int64_t i, std::int64_t first_valid) {
  return i < first_valid;
}

/// Keys [0, n) that query i attends: its causal prefix, or all T keys when uniform.
SEQPAR_HOST_DEVICE std::int64_t attended_keys(std::int64_t i, std::int64_t first_valid,
                                              std::int64_t Tn) {
  return attends_uniformly(i, first_valid) ? Tn : i + 1;
}

/// The score of key j for query i: qk = q_i . k_j (unscaled). Masked keys (after the
/// query, or not valid) are -inf; a uniform query scores every key 0.
template <class T>
SEQPAR_HOST_DEVICE T flash_score(T qk, T scale, T slope, T pos_j, bool valid_j, std::int64_t i,
                                 std::int64_t j, bool uniform) {
  if (uniform) return T(0);
  return j <= i && valid_j ? alibi_score(qk * scale, slope, pos_j) : minus_infinity<T>();
}

/// Folds a tile's row maximum into the running maximum m; returns exp(m_old - m_new),
/// the factor that rescales a sum and an accumulator kept against m_old (1 while every
/// score so far is masked: both are still 0).
template <class T>
SEQPAR_HOST_DEVICE T online_rescale(T& m, T tile_max) {
  const T m_new = m > tile_max ? m : tile_max;
  const T c = m_new == minus_infinity<T>() ? T(1) : exp_of(m - m_new);
  m = m_new;
  return c;
}

/// exp(s - m) of one score against its row's running maximum; 0 for a masked score (also
/// while m is still -inf, where s - m would be NaN).
template <class T>
SEQPAR_HOST_DEVICE T online_weight(T s, T m) {
  return s == minus_infinity<T>() ? T(0) : exp_of(s - m);
}

/// The probability of a score, recomputed from its row's log-sum-exp (0 when masked).
template <class T>
SEQPAR_HOST_DEVICE T flash_probability(T s, T lse) {
  return s == minus_infinity<T>() ? T(0) : exp_of(s - lse);
}

}  // namespace seqpar::inline v0::kernels

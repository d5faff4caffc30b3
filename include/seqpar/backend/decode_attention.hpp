#pragma once
// Decode attention's body, written once for both backends: one new query of a (row, head) against
// its cached keys and values. A team (SerialTeam, or a thread block) runs the loops and owns the
// order of the value sum, the one step whose best order differs between a core and a block.

#include <cmath>
#include <cstdint>

#include "seqpar/backend/kernels.hpp"
#include "seqpar/core/host_device.hpp"

namespace seqpar::inline v0::kernels {

/// The team of one thread: loops run in order, reductions are the value itself.
template <class A>
struct SerialTeam {
  template <class F>
  SEQPAR_HOST_DEVICE void for_each(std::int64_t n, F&& f) const {
    for (std::int64_t i = 0; i < n; ++i) f(i);
  }
  SEQPAR_HOST_DEVICE A max(A v) const { return v; }
  SEQPAR_HOST_DEVICE A sum(A v) const { return v; }
  template <class T>
  SEQPAR_HOST_DEVICE A load(T x) const {
    return static_cast<A>(x);
  }
  template <class T>
  SEQPAR_HOST_DEVICE T store(A x) const {
    return static_cast<T>(x);
  }
  // out[d] = inv * sum_j w[j] v[j, d]: key-major, so that v is read row by row and the
  // inner loop over d vectorises.
  template <class T>
  SEQPAR_HOST_DEVICE void weighted_sum(T* out, const A* w, const T* v, std::int64_t len,
                                       std::int64_t hd, A inv) const {
    A acc[256];
    for (std::int64_t d0 = 0; d0 < hd; d0 += 256) {
      const std::int64_t dn = hd - d0 < 256 ? hd - d0 : 256;
      for (std::int64_t d = 0; d < dn; ++d) acc[d] = A(0);
      for (std::int64_t j = 0; j < len; ++j) {
        const A wj = w[j];
        if (wj == A(0)) continue;  // masked keys (their v may be anything, even NaN)
        const T* vj = v + j * hd + d0;
        for (std::int64_t d = 0; d < dn; ++d) acc[d] += wj * static_cast<A>(vj[d]);
      }
      for (std::int64_t d = 0; d < dn; ++d) out[d0 + d] = static_cast<T>(acc[d] * inv);
    }
  }
};

/// out = softmax_j(scale q.k_j + slope pos_j over the valid keys j < len) . v, scale =
/// 1 / sqrt(hd), as one query row of the training forward's attention (ops attention_forward).
/// A query without a valid key attends uniformly to the len keys (never in generation: the
/// new token itself is valid).
template <class A, class Team, class T, class P>
SEQPAR_HOST_DEVICE void decode_attention_head(const Team& team, A* s, T* out, const T* q,
                                              const T* k, const T* v, const P* pos,
                                              const std::uint8_t* valid, A slope, std::int64_t len,
                                              std::int64_t hd) {
  const A scale = A(1) / sqrt_of(A(hd));
  const A masked = -A(INFINITY);
  // s[j] = scale q.k_j + slope pos_j (masked keys: -inf); mx = their max
  A mx = masked;
  team.for_each(len, [&](std::int64_t j) {
    A sj = masked;
    if (valid[j]) {
      A dot = 0;
      const T* kj = k + j * hd;
      for (std::int64_t d = 0; d < hd; ++d) dot += team.load(q[d]) * team.load(kj[d]);
      sj = scale * dot + slope * team.load(pos[j]);
      mx = sj > mx ? sj : mx;
    }
    s[j] = sj;
  });
  mx = team.max(mx);
  // s[j] = exp(s[j] - mx), 0 for masked keys (all 1 when none is valid); sum = their sum
  const bool none = mx == masked;
  A sum = 0;
  team.for_each(len, [&](std::int64_t j) {
    const A e = none ? A(1) : valid[j] ? exp_of(s[j] - mx) : A(0);
    s[j] = e;
    sum += e;
  });
  sum = team.sum(sum);  // a team's reduction also makes every s[j] visible to all of it
  team.weighted_sum(out, s, v, len, hd, A(1) / sum);
}

}  // namespace seqpar::inline v0::kernels

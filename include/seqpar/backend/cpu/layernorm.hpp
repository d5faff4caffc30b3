#pragma once
// LayerNorm forward and backward on the CPU: a row per iteration, its sums in eight lanes;
// the element arithmetic is that of backend/kernels.hpp, as in the CUDA kernels. Computed
// in Wide<T> (float for 16-bit storage), in which mean and rstd are kept. Part of Ops<Cpu>.

#ifndef SEQPAR_BACKEND_CPU_OPS_INCLUDED
#error "backend/cpu/layernorm.hpp is a part of Ops<Cpu>: include seqpar/backend/cpu/ops.hpp instead"
#endif

#include <cstdint>
#include <type_traits>

#include "seqpar/backend/cpu/loops.hpp"
#include "seqpar/backend/kernels.hpp"
#include "seqpar/core/omp.hpp"

namespace seqpar::inline v0::detail::cpu {

// The sum over j in [0, n) of term(lane, j): eight-lane sums (lane an F32x8 on blocks of eight
// where AVX2 is on), the lanes added, then the rest one at a time (lane a Wide<T>).
template <class T, class Term>
Wide<T> row_sum(std::int64_t n, Term&& term) {
  Wide<T> s = 0;
  std::int64_t j = 0;
#if SEQPAR_CPU_SIMD
  if constexpr (simd_storage<T>) {
    F32x8 acc(0.0f);
    for (; j + F32x8::lanes <= n; j += F32x8::lanes) acc += term(F32x8{}, j);
    s = acc.sum();
  }
#endif
  for (; j < n; ++j) s += term(Wide<T>{}, j);
  return s;
}

// y[n, d] = layernorm(x) * w + b; keeps mean[n] and rstd[n] for the backward
template <class T, class S>
void layernorm_forward(T* y, S* mean, S* rstd, const T* x, const T* w, const T* b, std::int64_t n,
                       std::int64_t d, double eps) {
  static_assert(std::is_same_v<S, Wide<T>>, "layernorm statistics are kept in Wide<T>");
  SEQPAR_OMP(parallel for schedule(static))
  for (std::int64_t i = 0; i < n; ++i) {
    const T* xi = x + i * d;
    const S m = row_sum<T>(d, [&](auto lane,
                                  std::int64_t j) { return load_lanes<decltype(lane)>(xi + j); }) /
                S(d);
    // two passes: the variance of the centred values
    const S var = row_sum<T>(d,
                             [&](auto lane, std::int64_t j) {
                               using V = decltype(lane);
                               const V c = load_lanes<V>(xi + j) - V(m);
                               return kernels::mul_of(c, c);
                             }) /
                  S(d);
    const S r = kernels::layernorm_rstd(var, S(eps));
    T* yi = y + i * d;
    for_lanes_here<T>(d, [&](auto lane, std::int64_t j) {
      using V = decltype(lane);
      store_lanes(yi + j, kernels::layernorm_out(load_lanes<V>(xi + j), V(m), V(r),
                                                 load_lanes<V>(w + j), load_lanes<V>(b + j)));
    });
    mean[i] = m;
    rstd[i] = r;
  }
}

// dx[n, d] += layernorm'(dy); dw[d] += sum dy * xhat; db[d] += sum dy
template <class T, class S>
void layernorm_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const S* mean, const S* rstd,
                        const T* w, std::int64_t n, std::int64_t d) {
  static_assert(std::is_same_v<S, Wide<T>>, "layernorm statistics are kept in Wide<T>");
  SEQPAR_OMP(parallel for schedule(static))
  for (std::int64_t i = 0; i < n; ++i) {
    const T* dyi = dy + i * d;
    const T* xi = x + i * d;
    const S m = mean[i], r = rstd[i];
    // g = dy w; the row means of g and of g xhat
    const S mean_g =
        row_sum<T>(d,
                   [&](auto lane, std::int64_t j) {
                     using V = decltype(lane);
                     return kernels::mul_of(load_lanes<V>(dyi + j), load_lanes<V>(w + j));
                   }) /
        S(d);
    const S mean_g_xhat =
        row_sum<T>(d,
                   [&](auto lane, std::int64_t j) {
                     using V = decltype(lane);
                     return kernels::mul_of(
                         kernels::mul_of(load_lanes<V>(dyi + j), load_lanes<V>(w + j)),
                         kernels::layernorm_xhat(load_lanes<V>(xi + j), V(m), V(r)));
                   }) /
        S(d);
    T* dxi = dx + i * d;
    for_lanes_here<T>(d, [&](auto lane, std::int64_t j) {
      using V = decltype(lane);
      const V g = load_lanes<V>(dyi + j) * load_lanes<V>(w + j);
      const V xhat = kernels::layernorm_xhat(load_lanes<V>(xi + j), V(m), V(r));
      store_lanes(dxi + j, load_lanes<V>(dxi + j) +
                               kernels::layernorm_dx(g, xhat, V(mean_g), V(mean_g_xhat), V(r)));
    });
  }
  // Parameter gradients: each column summed in row order by one thread (reproducible).
  for_columns(d, n * d, [&](std::int64_t j0, std::int64_t j1) {
    WideRange<T> gw(dw, j0, j1), gb(db, j0, j1);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = j0; j < j1; ++j) {
        gw[j] +=
            widen(dy[i * d + j]) * kernels::layernorm_xhat(widen(x[i * d + j]), mean[i], rstd[i]);
        gb[j] += widen(dy[i * d + j]);
      }
    gw.store();
    gb.store();
  });
}

}  // namespace seqpar::inline v0::detail::cpu

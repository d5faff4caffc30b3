#pragma once
// LayerNorm forward and backward on the CPU: a row per iteration, its sums in row order;
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

// y[n, d] = layernorm(x) * w + b; keeps mean[n] and rstd[n] for the backward
template <class T, class S>
void layernorm_forward(T* y, S* mean, S* rstd, const T* x, const T* w, const T* b, std::int64_t n,
                       std::int64_t d, double eps) {
  static_assert(std::is_same_v<S, Wide<T>>, "layernorm statistics are kept in Wide<T>");
  SEQPAR_OMP(parallel for schedule(static))
  for (std::int64_t i = 0; i < n; ++i) {
    const T* xi = x + i * d;
    S m = 0;
    for (std::int64_t j = 0; j < d; ++j) m += widen(xi[j]);
    m /= S(d);
    S var = 0;  // two passes: the variance of the centred values
    for (std::int64_t j = 0; j < d; ++j) var += (widen(xi[j]) - m) * (widen(xi[j]) - m);
    var /= S(d);
    const S r = kernels::layernorm_rstd(var, S(eps));
    T* yi = y + i * d;
    for (std::int64_t j = 0; j < d; ++j)
      yi[j] = narrow<T>(kernels::layernorm_out(widen(xi[j]), m, r, widen(w[j]), widen(b[j])));
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
    S mean_g = 0, mean_g_xhat = 0;  // g = dy w
    for (std::int64_t j = 0; j < d; ++j) {
      const S g = widen(dyi[j]) * widen(w[j]);
      mean_g += g;
      mean_g_xhat += g * kernels::layernorm_xhat(widen(xi[j]), mean[i], rstd[i]);
    }
    mean_g /= S(d);
    mean_g_xhat /= S(d);
    T* dxi = dx + i * d;
    for (std::int64_t j = 0; j < d; ++j)
      dxi[j] = narrow<T>(widen(dxi[j]) + kernels::layernorm_dx(widen(dyi[j]) * widen(w[j]),
                                                               kernels::layernorm_xhat(
                                                                   widen(xi[j]), mean[i], rstd[i]),
                                                               mean_g, mean_g_xhat, rstd[i]));
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

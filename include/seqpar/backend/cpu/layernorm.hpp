#pragma once
// LayerNorm forward and backward on the CPU: a row per iteration, its sums in row order;
// the element arithmetic is that of backend/kernels.hpp, as in the CUDA kernels. mean and
// rstd are kept in the storage type. Part of Ops<Cpu>.

#ifndef SEQPAR_BACKEND_CPU_OPS_INCLUDED
#error "backend/cpu/layernorm.hpp is a part of Ops<Cpu>: include seqpar/backend/cpu/ops.hpp instead"
#endif

#include <cstdint>

#include "seqpar/backend/cpu/loops.hpp"
#include "seqpar/backend/kernels.hpp"
#include "seqpar/core/omp.hpp"

namespace seqpar::inline v0::detail::cpu {

// y[n, d] = layernorm(x) * w + b; keeps mean[n] and rstd[n] for the backward
template <class T>
void layernorm_forward(T* y, T* mean, T* rstd, const T* x, const T* w, const T* b, std::int64_t n,
                       std::int64_t d, double eps) {
  SEQPAR_OMP(parallel for schedule(static))
  for (std::int64_t i = 0; i < n; ++i) {
    const T* xi = x + i * d;
    T m = 0;
    for (std::int64_t j = 0; j < d; ++j) m += xi[j];
    m /= T(d);
    T var = 0;  // two passes: the variance of the centred values
    for (std::int64_t j = 0; j < d; ++j) var += (xi[j] - m) * (xi[j] - m);
    var /= T(d);
    const T r = kernels::layernorm_rstd(var, T(eps));
    T* yi = y + i * d;
    for (std::int64_t j = 0; j < d; ++j) yi[j] = kernels::layernorm_out(xi[j], m, r, w[j], b[j]);
    mean[i] = m;
    rstd[i] = r;
  }
}

// dx[n, d] += layernorm'(dy); dw[d] += sum dy * xhat; db[d] += sum dy
template <class T>
void layernorm_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const T* mean, const T* rstd,
                        const T* w, std::int64_t n, std::int64_t d) {
  SEQPAR_OMP(parallel for schedule(static))
  for (std::int64_t i = 0; i < n; ++i) {
    const T* dyi = dy + i * d;
    const T* xi = x + i * d;
    T mean_g = 0, mean_g_xhat = 0;  // g = dy w
    for (std::int64_t j = 0; j < d; ++j) {
      const T g = dyi[j] * w[j];
      mean_g += g;
      mean_g_xhat += g * kernels::layernorm_xhat(xi[j], mean[i], rstd[i]);
    }
    mean_g /= T(d);
    mean_g_xhat /= T(d);
    T* dxi = dx + i * d;
    for (std::int64_t j = 0; j < d; ++j)
      dxi[j] +=
          kernels::layernorm_dx(dyi[j] * w[j], kernels::layernorm_xhat(xi[j], mean[i], rstd[i]),
                                mean_g, mean_g_xhat, rstd[i]);
  }
  // Parameter gradients: each column summed in row order by one thread (reproducible).
  for_columns(d, n * d, [&](std::int64_t j0, std::int64_t j1) {
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = j0; j < j1; ++j) {
        dw[j] += dy[i * d + j] * kernels::layernorm_xhat(x[i * d + j], mean[i], rstd[i]);
        db[j] += dy[i * d + j];
      }
  });
}

}  // namespace seqpar::inline v0::detail::cpu

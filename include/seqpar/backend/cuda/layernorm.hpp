#pragma once
// LayerNorm forward and backward on the GPU, one warp per row, statistics in float.
// mean and rstd are stored as S: the storage type (as Ops<Cpu> does) or float (what a
// bf16/fp16 model should keep: a 16-bit mean loses digits the backward needs).
// Compiled only in units that hold kernels (SEQPAR_CUDA_KERNELS).

#if defined(SEQPAR_CUDA_KERNELS)

#include <cstdint>

#include "seqpar/backend/cuda/context.hpp"
#include "seqpar/backend/cuda/error.hpp"
#include "seqpar/backend/cuda/numeric.hpp"
#include "seqpar/backend/cuda/reduce.hpp"
#include "seqpar/backend/kernels.hpp"

namespace seqpar::inline v0::detail {

inline constexpr int layernorm_threads = 256;  // 8 rows a block

// y[n, d] = (x - mean) rstd w + b; two passes over the row for the variance, as the CPU;
// the element arithmetic is backend/kernels.hpp's, shared with the CPU loop.
template <class T, class S>
__global__ void layernorm_forward_kernel(T* y, S* mean, S* rstd, const T* x, const T* w, const T* b,
                                         std::int64_t n, std::int64_t d, float eps) {
  const std::int64_t row =
      std::int64_t{blockIdx.x} * (blockDim.x / warp_size) + threadIdx.x / warp_size;
  const int lane = static_cast<int>(threadIdx.x) % warp_size;
  if (row >= n) return;
  const T* xr = x + row * d;
  float s = 0;
  for (std::int64_t j = lane; j < d; j += warp_size) s += to_float(xr[j]);
  const float m = warp_sum(s) / static_cast<float>(d);
  float q = 0;
  for (std::int64_t j = lane; j < d; j += warp_size) {
    const float c = to_float(xr[j]) - m;
    q += c * c;
  }
  const float var = warp_sum(q) / static_cast<float>(d);
  const float r = kernels::layernorm_rstd(var, eps);
  T* yr = y + row * d;
  for (std::int64_t j = lane; j < d; j += warp_size)
    yr[j] = from_float<T>(
        kernels::layernorm_out(to_float(xr[j]), m, r, to_float(w[j]), to_float(b[j])));
  if (lane == 0) {
    mean[row] = from_float<S>(m);
    rstd[row] = from_float<S>(r);
  }
}

// dx[n, d] += (dy w - mean(dy w) - xhat mean(dy w xhat)) rstd
template <class T, class S>
__global__ void layernorm_backward_dx_kernel(T* dx, const T* dy, const T* x, const S* mean,
                                             const S* rstd, const T* w, std::int64_t n,
                                             std::int64_t d) {
  const std::int64_t row =
      std::int64_t{blockIdx.x} * (blockDim.x / warp_size) + threadIdx.x / warp_size;
  const int lane = static_cast<int>(threadIdx.x) % warp_size;
  if (row >= n) return;
  const T* dyr = dy + row * d;
  const T* xr = x + row * d;
  const float m = to_float(mean[row]), r = to_float(rstd[row]);
  float a = 0, c = 0;
  for (std::int64_t j = lane; j < d; j += warp_size) {
    const float g = to_float(dyr[j]) * to_float(w[j]);
    a += g;
    c += g * kernels::layernorm_xhat(to_float(xr[j]), m, r);
  }
  const float mean_g = warp_sum(a) / static_cast<float>(d);
  const float mean_gx = warp_sum(c) / static_cast<float>(d);
  T* dxr = dx + row * d;
  for (std::int64_t j = lane; j < d; j += warp_size) {
    const float xhat = kernels::layernorm_xhat(to_float(xr[j]), m, r);
    const float g = to_float(dyr[j]) * to_float(w[j]);
    dxr[j] = from_float<T>(to_float(dxr[j]) + kernels::layernorm_dx(g, xhat, mean_g, mean_gx, r));
  }
}

// Terms of dw[j] (dy xhat) and db[j] (dy) for the column reduction.
template <class T, class S>
struct LayernormParamTerms {
  const T* dy;
  const T* x;
  const S* mean;
  const S* rstd;
  std::int64_t d;
  __device__ void operator()(std::int64_t i, std::int64_t j, float* acc) const {
    const float g = to_float(dy[i * d + j]);
    acc[0] +=
        g * kernels::layernorm_xhat(to_float(x[i * d + j]), to_float(mean[i]), to_float(rstd[i]));
    acc[1] += g;
  }
};

template <class T, class S>
void layernorm_forward(T* y, S* mean, S* rstd, const T* x, const T* w, const T* b, std::int64_t n,
                       std::int64_t d, double eps) {
  if (n <= 0) return;
  constexpr int rows_per_block = layernorm_threads / warp_size;
  const auto blocks = static_cast<unsigned>((n + rows_per_block - 1) / rows_per_block);
  SEQPAR_LAUNCH(layernorm_forward_kernel, blocks, layernorm_threads, 0,
                CudaContext::current().stream())
  (y, mean, rstd, x, w, b, n, d, static_cast<float>(eps));
  SEQPAR_CUDA_CHECK_LAUNCH();
}

template <class T, class S>
void layernorm_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const S* mean, const S* rstd,
                        const T* w, std::int64_t n, std::int64_t d) {
  if (n <= 0) return;
  constexpr int rows_per_block = layernorm_threads / warp_size;
  const auto blocks = static_cast<unsigned>((n + rows_per_block - 1) / rows_per_block);
  SEQPAR_LAUNCH(layernorm_backward_dx_kernel, blocks, layernorm_threads, 0,
                CudaContext::current().stream())
  (dx, dy, x, mean, rstd, w, n, d);
  SEQPAR_CUDA_CHECK_LAUNCH();
  column_reduce<2>(ColumnOutputs<T>{{dw, db}}, n, d,
                   LayernormParamTerms<T, S>{dy, x, mean, rstd, d});
}

}  // namespace seqpar::inline v0::detail

#endif  // SEQPAR_CUDA_KERNELS

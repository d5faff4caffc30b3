#pragma once
// The row-wise steps of a chunked (and vocab-split) cross-entropy, as nn/lm_head.hpp
// runs them over vocabulary chunks of logits L[n, cw]: an online max / sum of exps per
// row, their rescaling to the global max, the loss, and softmax minus one-hot as the
// gradient. Statistics are S (float, or the storage type). target[r] is the row's
// target as an index into the local vocabulary; a chunk holds columns [col0, col0 + cw).
// Compiled only in units that hold kernels (SEQPAR_CUDA_KERNELS).

#if defined(SEQPAR_CUDA_KERNELS)

#include <cuda_runtime.h>

#include <cstdint>

#include "seqpar/backend/cuda/context.hpp"
#include "seqpar/backend/cuda/error.hpp"
#include "seqpar/backend/cuda/numeric.hpp"
#include "seqpar/backend/cuda/reduce.hpp"
#include "seqpar/backend/kernels.hpp"

namespace seqpar::inline v0::detail {

inline constexpr int cross_entropy_threads = 256;  // 8 rows a block

template <class T, class S, class Id>
__global__ void softmax_stats_kernel(S* mx, S* sum, S* picked, const T* L, const Id* target,
                                     std::int64_t n, std::int64_t cw, std::int64_t col0) {
  const std::int64_t r =
      std::int64_t{blockIdx.x} * (blockDim.x / warp_size) + threadIdx.x / warp_size;
  const int lane = static_cast<int>(threadIdx.x) % warp_size;
  if (r >= n) return;
  const T* l = L + r * cw;
  const float old_mx = to_float(mx[r]);
  float m = old_mx;
  for (std::int64_t j = lane; j < cw; j += warp_size) m = fmaxf(m, to_float(l[j]));
  m = warp_max(m);
  float s = 0;
  for (std::int64_t j = lane; j < cw; j += warp_size) s += expf(to_float(l[j]) - m);
  s = warp_sum(s);
  if (lane == 0) {
    mx[r] = from_float<S>(m);
    sum[r] = from_float<S>(kernels::rescaled_sum(to_float(sum[r]), old_mx, m) + s);
    if (const std::int64_t t = kernels::local_index(target[r], col0, cw); t >= 0)
      picked[r] = from_float<S>(to_float(l[t]));
  }
}

template <class S>
__global__ void softmax_stats_rescale_kernel(S* sum, const S* mx, const S* global_mx,
                                             std::int64_t n) {
  for (std::int64_t r = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; r < n;
       r += std::int64_t{gridDim.x} * blockDim.x)
    sum[r] = from_float<S>(
        kernels::rescaled_sum(to_float(sum[r]), to_float(mx[r]), to_float(global_mx[r])));
}

// lse[r] = global_mx[r] + log(sum[r]); partial[block] = sum over its rows of lse - picked.
template <class S>
__global__ void cross_entropy_loss_kernel(double* partial, S* lse, const S* global_mx, const S* sum,
                                          const S* picked, std::int64_t n) {
  __shared__ double shared[32];
  double acc = 0;
  for (std::int64_t r = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; r < n;
       r += std::int64_t{gridDim.x} * blockDim.x) {
    const S v = from_float<S>(kernels::log_sum_exp(to_float(global_mx[r]), to_float(sum[r])));
    lse[r] = v;
    acc += static_cast<double>(to_float(v)) - static_cast<double>(to_float(picked[r]));
  }
  acc = block_sum(acc, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// L[r, j] = exp(L - lse[r]) grad_scale, minus grad_scale at the target column.
template <class T, class S, class Id>
__global__ void cross_entropy_grad_kernel(T* L, const S* lse, const Id* target, std::int64_t n,
                                          std::int64_t cw, std::int64_t col0, float grad_scale) {
  for (std::int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    T* l = L + r * cw;
    const float z = to_float(lse[r]);
    const std::int64_t t = kernels::local_index(target[r], col0, cw);  // -1: not in this chunk
    for (std::int64_t j = threadIdx.x; j < cw; j += blockDim.x) {
      float g = expf(to_float(l[j]) - z) * grad_scale;
      if (j == t) g -= grad_scale;
      l[j] = from_float<T>(g);
    }
  }
}

inline unsigned rows_of_warps_blocks(std::int64_t n, int threads) {
  const std::int64_t rows_per_block = threads / warp_size;
  return static_cast<unsigned>((n + rows_per_block - 1) / rows_per_block);
}

template <class T, class S, class Id>
void softmax_stats(S* mx, S* sum, S* picked, const T* L, const Id* target, std::int64_t n,
                   std::int64_t cw, std::int64_t col0) {
  if (n <= 0 || cw <= 0) return;
  SEQPAR_LAUNCH(softmax_stats_kernel, rows_of_warps_blocks(n, cross_entropy_threads),
                cross_entropy_threads, 0, CudaContext::current().stream())
  (mx, sum, picked, L, target, n, cw, col0);
  SEQPAR_CUDA_CHECK_LAUNCH();
}

template <class S>
void softmax_stats_rescale(S* sum, const S* mx, const S* global_mx, std::int64_t n) {
  if (n <= 0) return;
  SEQPAR_LAUNCH(softmax_stats_rescale_kernel, grid_for(n, 256), 256, 0,
                CudaContext::current().stream())
  (sum, mx, global_mx, n);
  SEQPAR_CUDA_CHECK_LAUNCH();
}

template <class S>
double cross_entropy_loss(S* lse, const S* global_mx, const S* sum, const S* picked,
                          std::int64_t n) {
  if (n <= 0) return 0.0;
  CudaContext& ctx = CudaContext::current();
  const unsigned blocks = sum_blocks(n);
  auto* partial = static_cast<double*>(ctx.scratch(sizeof(double) * (blocks + 1)));
  SEQPAR_LAUNCH(cross_entropy_loss_kernel, blocks, sum_threads, 0, ctx.stream())
  (partial + 1, lse, global_mx, sum, picked, n);
  SEQPAR_CUDA_CHECK_LAUNCH();
  SEQPAR_LAUNCH(sum_partials_kernel, 1, 1024, 0, ctx.stream())
  (partial, partial + 1, static_cast<int>(blocks), false);
  SEQPAR_CUDA_CHECK_LAUNCH();
  return read_on_host(partial);
}

template <class T, class S, class Id>
void cross_entropy_grad(T* L, const S* lse, const Id* target, std::int64_t n, std::int64_t cw,
                        std::int64_t col0, float grad_scale) {
  if (n <= 0 || cw <= 0) return;
  SEQPAR_LAUNCH(cross_entropy_grad_kernel, grid_for_rows(n), cross_entropy_threads, 0,
                CudaContext::current().stream())
  (L, lse, target, n, cw, col0, grad_scale);
  SEQPAR_CUDA_CHECK_LAUNCH();
}

}  // namespace seqpar::inline v0::detail

#endif  // SEQPAR_CUDA_KERNELS

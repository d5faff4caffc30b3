#pragma once
// Deterministic reductions of the CUDA backend: sums over the rows of a matrix (bias and
// layernorm parameter gradients) and sums of squares. No atomics: the partial sums are
// combined in a fixed order, so every run gives the same bits. Compiled only in units that hold
// kernels (SEQPAR_CUDA_KERNELS).

#if defined(SEQPAR_CUDA_KERNELS)

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "seqpar/backend/cuda/context.hpp"
#include "seqpar/backend/cuda/error.hpp"
#include "seqpar/backend/cuda/numeric.hpp"
#include "seqpar/backend/kernels.hpp"

namespace seqpar::inline v0::detail {

// Column reductions: block (x, y) sums 32 columns over one chunk of rows, 16 row lanes
// a column, into partial[k][chunk][d]; a second kernel adds the chunks in order to the
// outputs. The chunking depends on n only.
inline constexpr int column_tile = 32;
inline constexpr int column_lanes = 16;

inline std::int64_t column_chunks(std::int64_t n) {
  return std::clamp<std::int64_t>((n + 63) / 64, 1, 1024);
}

// f(i, j, acc) adds row i's terms of column j to acc[0..kOut).
template <int kOut, class F>
__global__ void column_partials_kernel(float* partial, std::int64_t n, std::int64_t d,
                                       std::int64_t rows_per_chunk, F f) {
  __shared__ float shared[kOut][column_lanes][column_tile + 1];
  const std::int64_t j = std::int64_t{blockIdx.x} * column_tile + threadIdx.x;
  const std::int64_t r0 = std::int64_t{blockIdx.y} * rows_per_chunk;
  const std::int64_t r1 = r0 + rows_per_chunk < n ? r0 + rows_per_chunk : n;
  float acc[kOut] = {};
  if (j < d)
    for (std::int64_t i = r0 + threadIdx.y; i < r1; i += column_lanes) f(i, j, acc);
  for (int k = 0; k < kOut; ++k) shared[k][threadIdx.y][threadIdx.x] = acc[k];
  __syncthreads();
  if (threadIdx.y == 0 && j < d) {
    for (int k = 0; k < kOut; ++k) {
      float s = 0;
      for (int l = 0; l < column_lanes; ++l) s += shared[k][l][threadIdx.x];
      partial[(std::int64_t{k} * gridDim.y + blockIdx.y) * d + j] = s;
    }
  }
}

template <class T>
struct ColumnOutputs {
  T* out[2];  // acc[k] goes to out[k][j] (+=) where out[k] is not null
};

template <int kOut, class T>
__global__ void column_finish_kernel(ColumnOutputs<T> outs, const float* partial,
                                     std::int64_t chunks, std::int64_t d) {
  for (std::int64_t j = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < d;
       j += std::int64_t{gridDim.x} * blockDim.x) {
    for (int k = 0; k < kOut; ++k) {
      if (!outs.out[k]) continue;
      float s = 0;
      for (std::int64_t c = 0; c < chunks; ++c) s += partial[(k * chunks + c) * d + j];
      outs.out[k][j] = from_float<T>(to_float(outs.out[k][j]) + s);
    }
  }
}

// outs[k][j] += sum over rows i of f's k-th term.
template <int kOut, class T, class F>
void column_reduce(ColumnOutputs<T> outs, std::int64_t n, std::int64_t d, F f) {
  static_assert(kOut >= 1 && kOut <= 2);
  if (n <= 0 || d <= 0) return;
  CudaContext& ctx = CudaContext::current();
  const std::int64_t chunks = column_chunks(n);
  const std::int64_t rows_per_chunk = (n + chunks - 1) / chunks;
  auto* partial = static_cast<float*>(ctx.scratch(sizeof(float) * kOut * chunks * d));
  const dim3 grid(static_cast<unsigned>((d + column_tile - 1) / column_tile),
                  static_cast<unsigned>(chunks));
  SEQPAR_LAUNCH(column_partials_kernel<kOut>, grid, dim3(column_tile, column_lanes), 0,
                ctx.stream())
  (partial, n, d, rows_per_chunk, f);
  SEQPAR_CUDA_CHECK_LAUNCH();
  SEQPAR_LAUNCH(column_finish_kernel<kOut>, grid_for(d, 256), 256, 0, ctx.stream())
  (outs, partial, chunks, d);
  SEQPAR_CUDA_CHECK_LAUNCH();
}

// Column sum of y[n, d].
template <class T>
struct ColumnSumTerm {
  const T* y;
  std::int64_t d;
  __device__ void operator()(std::int64_t i, std::int64_t j, float* acc) const {
    acc[0] += to_float(y[i * d + j]);
  }
};

// ---- sums of squares -------------------------------------------------------------

inline constexpr int sum_threads = 256;

inline unsigned sum_blocks(std::int64_t n) {
  return static_cast<unsigned>(
      std::clamp<std::int64_t>((n + sum_threads * 8 - 1) / (sum_threads * 8), 1, 1024));
}

// partial[block] = this block's share of the sum of weight x x[i]^2, each element weighted
// by its segment. Segments live in the kernel's parameter space (__grid_constant__: read
// where they are, not copied per thread).
template <class T>
__global__ void sum_squares_kernel(double* partial, const T* x, std::int64_t n,
                                   const __grid_constant__ kernels::Segments<double> weight) {
  __shared__ double shared[32];
  double s = 0;
  int k = 0;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    while (i >= weight.end[k]) ++k;  // i only grows: a thread walks the segments once
    const double v = to_float(x[i]);
    s += weight.value[k] * (v * v);
  }
  s = block_sum(s, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// *out = (or += when add) the sum of partial[0..count), by one block of 1024 threads
// (count <= 1024).
template <class A>
__global__ void sum_partials_kernel(A* out, const A* partial, int count, bool add) {
  __shared__ A shared[32];
  A s = static_cast<int>(threadIdx.x) < count ? partial[threadIdx.x] : A(0);
  s = block_sum(s, shared);
  if (threadIdx.x == 0) *out = add ? *out + s : s;
}

// *out = (or += when add) the weighted sum of squares of x over weight's segments, out in
// device memory, partial sum_blocks(weight.size()) doubles of device scratch; nothing
// waits. The grid depends only on the length: a fixed order.
template <class T>
void sum_squares_into(double* out, double* partial, const T* x,
                      const kernels::Segments<double>& weight, bool add) {
  const std::int64_t n = weight.size();
  const unsigned blocks = sum_blocks(n);
  const cudaStream_t stream = CudaContext::current().stream();
  SEQPAR_LAUNCH(sum_squares_kernel, blocks, sum_threads, 0, stream)(partial, x, n, weight);
  SEQPAR_CUDA_CHECK_LAUNCH();
  SEQPAR_LAUNCH(sum_partials_kernel, 1, 1024, 0, stream)
  (out, partial, static_cast<int>(blocks), add);
  SEQPAR_CUDA_CHECK_LAUNCH();
}

// *acc += the weighted sum of squares of x (a gradient norm: one call per unit).
template <class T>
void sum_squares_accumulate(double* acc, const T* x, const kernels::Segments<double>& weight) {
  if (weight.size() <= 0) return;
  auto* partial = static_cast<double*>(
      CudaContext::current().scratch(sizeof(double) * sum_blocks(weight.size())));
  sum_squares_into(acc, partial, x, weight, true);
}

// One double of device memory read on the host (waits for the stream).
inline double read_on_host(const double* value) {
  CudaContext& ctx = CudaContext::current();
  auto* host = static_cast<double*>(ctx.host_scratch(sizeof(double)));
  SEQPAR_CUDA_CHECK(
      cudaMemcpyAsync(host, value, sizeof(double), cudaMemcpyDeviceToHost, ctx.stream()));
  ctx.synchronize();
  return *host;
}

// Sum of squares of x[0..n) as a double, on the host (waits for the stream).
template <class T>
double sum_squares(const T* x, std::int64_t n) {
  if (n <= 0) return 0.0;
  auto* total =
      static_cast<double*>(CudaContext::current().scratch(sizeof(double) * (sum_blocks(n) + 1)));
  sum_squares_into(total, total + 1, x, kernels::Segments<double>::uniform(n, 1.0), false);
  return read_on_host(total);
}

}  // namespace seqpar::inline v0::detail

#endif  // SEQPAR_CUDA_KERNELS

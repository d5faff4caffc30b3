#pragma once
// Storage types of the CUDA backend and what every kernel shares: float <-> storage
// conversions, cuBLAS data types, launch shapes and warp/block reductions. Storage is
// float, bf16 or fp16; arithmetic is always float. Seen where SEQPAR_CUDA_BACKEND is defined
// (core/separate_compilation.hpp).

#include "seqpar/core/separate_compilation.hpp"

#if defined(SEQPAR_CUDA_BACKEND)

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <library_types.h>

#include <algorithm>
#include <concepts>
#include <cstdint>

#include "seqpar/backend/cuda/launch.hpp"

namespace seqpar::inline v0 {

/// The element types Ops<Cuda> stores: float, __nv_bfloat16 and __half.
template <class T>
concept CudaScalar =
    std::same_as<T, float> || std::same_as<T, __nv_bfloat16> || std::same_as<T, __half>;

namespace detail {

// The types C may have for operands of type T: T, or float (an fp32 accumulator read and
// written as it is, never rounded to 16 bits).
template <class Out, class T>
concept GemmOutputFor = std::same_as<Out, T> || std::same_as<Out, float>;

__host__ __device__ __forceinline__ float to_float(float x) { return x; }
__host__ __device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__host__ __device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

// Round to nearest even, as torch does.
template <class T>
__host__ __device__ __forceinline__ T from_float(float x) {
  if constexpr (std::same_as<T, float>) {
    return x;
  } else if constexpr (std::same_as<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(x);
  } else {
    static_assert(std::same_as<T, __half>, "from_float: float, __nv_bfloat16 or __half");
    return __float2half_rn(x);
  }
}

template <CudaScalar T>
constexpr cudaDataType_t cuda_data_type() {
  if constexpr (std::same_as<T, float>) return CUDA_R_32F;
  if constexpr (std::same_as<T, __nv_bfloat16>) return CUDA_R_16BF;
  if constexpr (std::same_as<T, __half>) return CUDA_R_16F;
}

inline constexpr int warp_size = 32;
inline constexpr unsigned full_mask = 0xffffffffu;

// Blocks of `threads` for a grid-stride loop over n elements: enough to fill the GPU,
// few enough that each thread does some work.
inline unsigned grid_for(std::int64_t n, int threads) {
  const std::int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, std::int64_t{1} << 18));
}

// Blocks for one row per block, grid-striding past the limit.
inline unsigned grid_for_rows(std::int64_t rows) {
  return static_cast<unsigned>(std::clamp<std::int64_t>(rows, 1, std::int64_t{1} << 18));
}

// The kernels' reductions (device code: units that hold kernels).
#if defined(SEQPAR_CUDA_KERNELS)
template <class A>
__device__ __forceinline__ A warp_sum(A v) {
  for (int o = warp_size / 2; o > 0; o >>= 1) v += __shfl_xor_sync(full_mask, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = warp_size / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(full_mask, v, o));
  return v;
}

// A reduction over the block (blockDim.x a multiple of 32, at most 1024): each warp's by
// warp_op, then the warps' results by warp_op again, the same order every run; every thread
// gets the result. `shared` holds 32 values; `none` is the reduction's identity.
template <class A, class WarpOp>
__device__ __forceinline__ A block_reduce(A v, A* shared, A none, WarpOp warp_op) {
  const int lane = static_cast<int>(threadIdx.x) % warp_size;
  const int warp = static_cast<int>(threadIdx.x) / warp_size;
  const int warps = static_cast<int>(blockDim.x) / warp_size;
  v = warp_op(v);
  __syncthreads();  // `shared` may still be read by a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : none;
  return warp_op(v);
}

template <class A>
__device__ __forceinline__ A block_sum(A v, A* shared) {
  return block_reduce(v, shared, A(0), [](A x) { return warp_sum(x); });
}

__device__ __forceinline__ float block_max(float v, float* shared) {
  return block_reduce(v, shared, -INFINITY, [](float x) { return warp_max(x); });
}
#endif  // SEQPAR_CUDA_KERNELS

}  // namespace detail
}  // namespace seqpar::inline v0

#endif  // SEQPAR_CUDA_BACKEND

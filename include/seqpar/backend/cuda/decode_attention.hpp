#pragma once
// Decode attention, the KV-cache store and its row gather on the GPU, with the semantics
// of Ops<Cpu>'s decode_attention, kv_store and kv_gather: one thread block per (row, head)
// runs the body of backend/decode_attention.hpp (the one the CPU loop runs) as a team of
// threads, in float. Compiled only in units that hold kernels (SEQPAR_CUDA_KERNELS).

#if defined(SEQPAR_CUDA_KERNELS)

#include <cstdint>

#include "seqpar/backend/cuda/context.hpp"
#include "seqpar/backend/cuda/error.hpp"
#include "seqpar/backend/cuda/numeric.hpp"
#include "seqpar/backend/decode_attention.hpp"

namespace seqpar::inline v0::detail {

inline constexpr int decode_threads = 128;  // a head of hd 64 or 128 and a few hundred keys

// The team of decode_attention_head on the GPU: the threads of one block. Keys are
// spread over the threads (thread i takes keys i, i + blockDim, ...); the value sum gives
// each thread one dimension, so that a warp reads consecutive values of a key.
struct BlockTeam {
  float* shared;  // warp_size floats for the reductions

  template <class F>
  __device__ void for_each(std::int64_t n, F&& f) const {
    for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) f(i);
  }
  __device__ float max(float v) const { return block_max(v, shared); }
  __device__ float sum(float v) const { return block_sum(v, shared); }
  template <class U>
  __device__ float load(U x) const {
    return to_float(x);
  }
  template <class U>
  __device__ U store(float x) const {
    return from_float<U>(x);
  }
  template <class U>
  __device__ void weighted_sum(U* out, const float* w, const U* v, std::int64_t len,
                               std::int64_t hd, float inv) const {
    for (std::int64_t d = threadIdx.x; d < hd; d += blockDim.x) {
      float acc = 0;
      for (std::int64_t j = 0; j < len; ++j)
        if (w[j] != 0.0f) acc += w[j] * to_float(v[j * hd + d]);  // masked keys: any v, even NaN
      out[d] = from_float<U>(acc * inv);
    }
  }
};

// Block (b, h) of ctx[B, Hl] = decode attention of row b's new query to its cached keys.
template <class T, class S>
__global__ void decode_attention_kernel(T* ctx, float* scores, const T* qkv, const T* k, const T* v,
                                        const S* pos, const std::uint8_t* valid, const S* slopes,
                                        std::int64_t nh, std::int64_t hd, std::int64_t cap,
                                        std::int64_t len) {
  __shared__ float shared[warp_size];
  const std::int64_t bh = blockIdx.x, b = bh / nh, h = bh % nh, Hl = nh * hd, head = bh * cap;
  kernels::decode_attention_head<float>(
      BlockTeam{shared}, scores + head, ctx + b * Hl + h * hd, qkv + b * 3 * Hl + h * 3 * hd,
      k + head * hd, v + head * hd, pos + b * cap, valid + b * cap, to_float(slopes[h]), len, hd);
}

// Element i of the keys and values [B, S, nh, hd] that go to positions [t0, t0 + S).
template <class T>
__global__ void kv_store_kernel(T* k, T* v, const T* qkv, std::int64_t B, std::int64_t S,
                                std::int64_t nh, std::int64_t hd, std::int64_t cap,
                                std::int64_t t0) {
  const std::int64_t n = B * S * nh * hd;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t d = i % hd, h = i / hd % nh, t = i / (hd * nh) % S, b = i / (hd * nh * S);
    const T* src = qkv + (b * S + t) * 3 * nh * hd + h * 3 * hd;
    const std::int64_t dst = ((b * nh + h) * cap + t0 + t) * hd + d;
    k[dst] = src[hd + d];
    v[dst] = src[2 * hd + d];
  }
}

// Element i of dst's filled positions [B, nh, len, hd] = the same element of row index[b].
template <class T, class Id>
__global__ void kv_gather_kernel(T* dst, const T* src, const Id* index, std::int64_t B,
                                 std::int64_t nh, std::int64_t cap, std::int64_t hd,
                                 std::int64_t len) {
  const std::int64_t n = B * nh * len * hd;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t e = i % (len * hd), h = i / (len * hd) % nh, b = i / (len * hd * nh);
    const std::int64_t from = static_cast<std::int64_t>(index[b]);
    dst[(b * nh + h) * cap * hd + e] = src[(from * nh + h) * cap * hd + e];
  }
}

template <class T, class S>
void decode_attention(T* ctx, float* scores, const T* qkv, const T* k, const T* v, const S* pos,
                      const std::uint8_t* valid, const S* slopes, std::int64_t B, std::int64_t nh,
                      std::int64_t hd, std::int64_t cap, std::int64_t len) {
  if (B <= 0 || nh <= 0 || len <= 0) return;
  SEQPAR_LAUNCH(decode_attention_kernel, static_cast<unsigned>(B * nh), decode_threads, 0,
                CudaContext::current().stream())
  (ctx, scores, qkv, k, v, pos, valid, slopes, nh, hd, cap, len);
  SEQPAR_CUDA_CHECK_LAUNCH();
}

template <class T>
void kv_store(T* k, T* v, const T* qkv, std::int64_t B, std::int64_t S, std::int64_t nh,
              std::int64_t hd, std::int64_t cap, std::int64_t t0) {
  const std::int64_t n = B * S * nh * hd;
  if (n <= 0) return;
  constexpr int threads = 256;
  SEQPAR_LAUNCH(kv_store_kernel, grid_for(n, threads), threads, 0, CudaContext::current().stream())
  (k, v, qkv, B, S, nh, hd, cap, t0);
  SEQPAR_CUDA_CHECK_LAUNCH();
}

template <class T, class Id>
void kv_gather(T* dst, const T* src, const Id* index, std::int64_t B, std::int64_t nh,
               std::int64_t cap, std::int64_t hd, std::int64_t len) {
  const std::int64_t n = B * nh * len * hd;
  if (n <= 0) return;
  constexpr int threads = 256;
  SEQPAR_LAUNCH(kv_gather_kernel, grid_for(n, threads), threads, 0, CudaContext::current().stream())
  (dst, src, index, B, nh, cap, hd, len);
  SEQPAR_CUDA_CHECK_LAUNCH();
}

}  // namespace seqpar::inline v0::detail

#endif  // SEQPAR_CUDA_KERNELS

#pragma once
// Decoding's next-token scores on the GPU, with the semantics of Ops<Cpu>'s next_token_max,
// next_token_sum_exp, next_token_scores and next_token_top_k (backend/cpu/next_token.hpp):
// one thread block a row, the arithmetic and the candidates' order of backend/kernels.hpp.
// The top k are found in k passes over the row, each taking the best candidate that ranks
// after the previous one: no per-thread lists, and the order is the CPU's exactly. Compiled
// only in units that hold kernels (SEQPAR_CUDA_KERNELS).

#if defined(SEQPAR_CUDA_KERNELS)

#include <cstdint>

#include "seqpar/backend/cuda/context.hpp"
#include "seqpar/backend/cuda/error.hpp"
#include "seqpar/backend/cuda/numeric.hpp"
#include "seqpar/backend/kernels.hpp"

namespace seqpar::inline v0::detail {

inline constexpr int next_token_threads = 512;  // a power of two (top_k's tree)

template <class T>
__global__ void next_token_max_kernel(float* mx, const T* L, std::int64_t rows, std::int64_t cols,
                                      std::int64_t real) {
  __shared__ float shared[warp_size];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* l = L + r * cols;
    float m = -INFINITY;
    for (std::int64_t c = threadIdx.x; c < real; c += blockDim.x) m = fmaxf(m, to_float(l[c]));
    m = block_max(m, shared);
    if (threadIdx.x == 0) mx[r] = m;
  }
}

template <class T>
__global__ void next_token_sum_exp_kernel(double* sum, const T* L, const float* mx,
                                          std::int64_t rows, std::int64_t cols, std::int64_t real) {
  __shared__ double shared[warp_size];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* l = L + r * cols;
    double s = 0;
    for (std::int64_t c = threadIdx.x; c < real; c += blockDim.x)
      s += exp(static_cast<double>(to_float(l[c]) - mx[r]));
    s = block_sum(s, shared);
    if (threadIdx.x == 0) sum[r] = s;
  }
}

// A block writes its row's scores, then penalises the row's seen ids (distinct: each
// column is written by one thread).
template <class T>
__global__ void next_token_scores_kernel(float* out, const T* L, const float* mx, const float* lse,
                                         const std::int32_t* seen, const std::int64_t* seen_start,
                                         float penalty, std::int64_t rows, std::int64_t cols,
                                         std::int64_t row0, std::int64_t real) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* l = L + r * cols;
    float* o = out + r * cols;
    for (std::int64_t c = threadIdx.x; c < real; c += blockDim.x) {
      const float x = to_float(l[c]);
      o[c] = mx != nullptr ? kernels::log_probability(x, mx[r], lse[r]) : x;
    }
    if (seen == nullptr) continue;
    __syncthreads();
    for (std::int64_t j = seen_start[r] + threadIdx.x; j < seen_start[r + 1]; j += blockDim.x)
      if (const std::int64_t c = kernels::local_index(seen[j], row0, real); c >= 0)
        o[c] = kernels::repetition_penalised(o[c], penalty);
  }
}

// Pass i of a row finds the best candidate ranking after pass i - 1's: each thread its own
// best, then a tree over the block's (a token of -1: none).
template <class Id>
__global__ void next_token_top_k_kernel(float* score, Id* token, const float* S, const float* base,
                                        std::int64_t rows, std::int64_t cols, std::int64_t row0,
                                        std::int64_t real, std::int64_t k) {
  __shared__ float best[next_token_threads];
  __shared__ std::int64_t id[next_token_threads];
  const int t = static_cast<int>(threadIdx.x);
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* s = S + r * cols;
    float prev = 0;
    std::int64_t prev_id = -1;  // none yet: every candidate may come first
    for (std::int64_t i = 0; i < k; ++i) {
      float b = -INFINITY;
      std::int64_t b_id = -1;
      if (i == 0 || prev_id >= 0) {
        for (std::int64_t c = t; c < real; c += blockDim.x) {
          const float x = base != nullptr ? s[c] + base[r] : s[c];
          const std::int64_t x_id = row0 + c;
          if (prev_id >= 0 && !kernels::ranks_before(prev, prev_id, x, x_id)) continue;
          if (b_id < 0 || kernels::ranks_before(x, x_id, b, b_id)) {
            b = x;
            b_id = x_id;
          }
        }
      }
      best[t] = b;
      id[t] = b_id;
      __syncthreads();
      for (int half = static_cast<int>(blockDim.x) / 2; half > 0; half /= 2) {
        if (t < half && id[t + half] >= 0 &&
            (id[t] < 0 || kernels::ranks_before(best[t + half], id[t + half], best[t], id[t]))) {
          best[t] = best[t + half];
          id[t] = id[t + half];
        }
        __syncthreads();
      }
      prev = best[0];
      prev_id = id[0];
      if (t == 0) {
        score[r * k + i] = prev_id >= 0 ? prev : -INFINITY;
        token[r * k + i] = static_cast<Id>(prev_id);
      }
      __syncthreads();  // best[0] is read by every thread before the next pass writes it
    }
  }
}

template <class T>
void next_token_max(float* mx, const T* L, std::int64_t rows, std::int64_t cols,
                    std::int64_t real) {
  if (rows <= 0) return;
  SEQPAR_LAUNCH(next_token_max_kernel, grid_for_rows(rows), next_token_threads, 0,
                CudaContext::current().stream())
  (mx, L, rows, cols, real);
  SEQPAR_CUDA_CHECK_LAUNCH();
}

template <class T>
void next_token_sum_exp(double* sum, const T* L, const float* mx, std::int64_t rows,
                        std::int64_t cols, std::int64_t real) {
  if (rows <= 0) return;
  SEQPAR_LAUNCH(next_token_sum_exp_kernel, grid_for_rows(rows), next_token_threads, 0,
                CudaContext::current().stream())
  (sum, L, mx, rows, cols, real);
  SEQPAR_CUDA_CHECK_LAUNCH();
}

template <class T>
void next_token_scores(float* out, const T* L, const float* mx, const float* lse,
                       const std::int32_t* seen, const std::int64_t* seen_start, float penalty,
                       std::int64_t rows, std::int64_t cols, std::int64_t row0, std::int64_t real) {
  if (rows <= 0) return;
  SEQPAR_LAUNCH(next_token_scores_kernel, grid_for_rows(rows), next_token_threads, 0,
                CudaContext::current().stream())
  (out, L, mx, lse, seen, seen_start, penalty, rows, cols, row0, real);
  SEQPAR_CUDA_CHECK_LAUNCH();
}

template <class Id>
void next_token_top_k(float* score, Id* token, const float* S, const float* base, std::int64_t rows,
                      std::int64_t cols, std::int64_t row0, std::int64_t real, std::int64_t k) {
  if (rows <= 0 || k <= 0) return;
  SEQPAR_LAUNCH(next_token_top_k_kernel, grid_for_rows(rows), next_token_threads, 0,
                CudaContext::current().stream())
  (score, token, S, base, rows, cols, row0, real, k);
  SEQPAR_CUDA_CHECK_LAUNCH();
}

}  // namespace seqpar::inline v0::detail

#endif  // SEQPAR_CUDA_KERNELS

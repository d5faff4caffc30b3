#pragma once
// Embedding lookup and its deterministic backward on the GPU. The backward uses no
// atomics and no sort: each block owns a range of table rows, walks the token ids in
// order, and each of its threads adds the matching gradient rows to one column, in token
// order. So every run gives the same bits, and for float they are those of Ops<Cpu>.
// Compiled only in units that hold kernels (SEQPAR_CUDA_KERNELS).

#if defined(SEQPAR_CUDA_KERNELS)

#include <algorithm>
#include <cstdint>

#include "seqpar/backend/cuda/context.hpp"
#include "seqpar/backend/cuda/error.hpp"
#include "seqpar/backend/cuda/numeric.hpp"
#include "seqpar/backend/kernels.hpp"

namespace seqpar::inline v0::detail {

inline constexpr int embedding_threads = 256;

// y[n, d] = table[ids[i] - row0] for ids inside [row0, row0 + rows), else 0; a row per block.
template <class T, class Id>
__global__ void embedding_forward_kernel(T* y, const Id* ids, const T* table, std::int64_t n,
                                         std::int64_t d, std::int64_t row0, std::int64_t rows) {
  for (std::int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const std::int64_t r = kernels::local_index(ids[i], row0, rows);  // -1: not in this shard
    T* yi = y + i * d;
    for (std::int64_t j = threadIdx.x; j < d; j += blockDim.x)
      yi[j] = r >= 0 ? table[r * d + j] : from_float<T>(0.0f);
  }
}

// Block b owns table rows [b * rows_per_block, ...). Tokens are taken a tile of
// blockDim.x at a time; the ones whose row the block owns are listed in token order in
// shared memory, then each thread walks the list for its columns, keeping the running
// row of the table in a register while consecutive tokens hit the same row.
template <class T, class Id>
__global__ void embedding_backward_kernel(T* dtable, const Id* ids, const T* dy, std::int64_t n,
                                          std::int64_t d, std::int64_t row0, std::int64_t rows,
                                          std::int64_t rows_per_block) {
  constexpr int tile = embedding_threads;
  constexpr int warps = embedding_threads / warp_size;
  constexpr int prefetch = 8;
  __shared__ int token_of[tile];
  __shared__ std::int64_t row_of[tile];
  __shared__ int warp_hits[warps];
  const std::int64_t lo = std::int64_t{blockIdx.x} * rows_per_block;
  const std::int64_t hi = lo + rows_per_block < rows ? lo + rows_per_block : rows;
  const int lane = static_cast<int>(threadIdx.x) % warp_size;
  const int warp = static_cast<int>(threadIdx.x) / warp_size;
  for (std::int64_t t0 = 0; t0 < n; t0 += tile) {
    const std::int64_t i = t0 + threadIdx.x;
    const std::int64_t r = i < n ? static_cast<std::int64_t>(ids[i]) - row0 : -1;
    const bool hit = i < n && r >= lo && r < hi;
    const unsigned ballot = __ballot_sync(full_mask, hit);
    if (lane == 0) warp_hits[warp] = __popc(ballot);
    __syncthreads();
    int offset = 0, count = 0;
    for (int w = 0; w < warps; ++w) {
      offset += w < warp ? warp_hits[w] : 0;
      count += warp_hits[w];
    }
    if (hit) {
      const int k = offset + __popc(ballot & ((1u << lane) - 1u));
      token_of[k] = static_cast<int>(threadIdx.x);
      row_of[k] = r;
    }
    __syncthreads();
    for (std::int64_t j = threadIdx.x; count > 0 && j < d; j += blockDim.x) {
      std::int64_t current = -1;
      float acc = 0;
      for (int k0 = 0; k0 < count; k0 += prefetch) {
        float g[prefetch];
#pragma unroll
        for (int k = 0; k < prefetch; ++k)
          g[k] = k0 + k < count ? to_float(dy[(t0 + token_of[k0 + k]) * d + j]) : 0.0f;
#pragma unroll
        for (int k = 0; k < prefetch; ++k) {
          if (k0 + k >= count) break;
          const std::int64_t row = row_of[k0 + k];
          if (row != current) {
            if (current >= 0) dtable[current * d + j] = from_float<T>(acc);
            acc = to_float(dtable[row * d + j]);
            current = row;
          }
          acc += g[k];
        }
      }
      if (current >= 0) dtable[current * d + j] = from_float<T>(acc);
    }
    __syncthreads();  // the lists are rewritten by the next tile
  }
}

template <class T, class Id>
void embedding_forward(T* y, const Id* ids, const T* table, std::int64_t n, std::int64_t d,
                       std::int64_t row0, std::int64_t rows) {
  if (n <= 0) return;
  SEQPAR_LAUNCH(embedding_forward_kernel, grid_for_rows(n), embedding_threads, 0,
                CudaContext::current().stream())
  (y, ids, table, n, d, row0, rows);
  SEQPAR_CUDA_CHECK_LAUNCH();
}

template <class T, class Id>
void embedding_backward(T* dtable, const Id* ids, const T* dy, std::int64_t n, std::int64_t d,
                        std::int64_t row0, std::int64_t rows) {
  if (n <= 0 || rows <= 0) return;
  // About 2048 blocks: each scans all n ids (cheap, they stay in L2), and rows that
  // many tokens share spread over blocks. The result does not depend on this choice.
  const std::int64_t blocks = std::min<std::int64_t>(rows, 2048);
  const std::int64_t rows_per_block = (rows + blocks - 1) / blocks;
  const auto grid = static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block);
  SEQPAR_LAUNCH(embedding_backward_kernel, grid, embedding_threads, 0,
                CudaContext::current().stream())
  (dtable, ids, dy, n, d, row0, rows, rows_per_block);
  SEQPAR_CUDA_CHECK_LAUNCH();
}

}  // namespace seqpar::inline v0::detail

#endif  // SEQPAR_CUDA_KERNELS

#pragma once
// Fused causal ALiBi attention on the GPU, without the [B, nh, T, T] probabilities. No atomics:
// dq and (dk, dv) are separate kernels that each recompute the tile's probabilities, so the same
// inputs give the same bits.

#if defined(SEQPAR_CUDA_KERNELS)

#include <cmath>
#include <cstdint>

#include "seqpar/backend/cuda/context.hpp"
#include "seqpar/backend/cuda/error.hpp"
#include "seqpar/backend/cuda/numeric.hpp"
#include "seqpar/backend/flash_tiles.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::inline v0::detail {

inline constexpr int flash_warps = 4;     // rows a block: 128 threads
inline constexpr int flash_max_hd = 128;  // head_dim a warp keeps in registers
inline constexpr int flash_dims = flash_max_hd / warp_size;

// Index of the first valid key of a sequence (Tn when none), the same in every lane.
__device__ __forceinline__ std::int64_t flash_first_valid(const std::uint8_t* vb, std::int64_t Tn,
                                                          int lane) {
  for (std::int64_t j0 = 0; j0 < Tn; j0 += warp_size) {
    const bool v = j0 + lane < Tn && vb[j0 + lane] != 0;
    const unsigned m = __ballot_sync(full_mask, v);
    if (m) return j0 + __ffs(static_cast<int>(m)) - 1;
  }
  return Tn;
}

// x . y over hd elements: x in shared memory (the warp's row), y a row in global memory.
template <class T>
__device__ __forceinline__ float flash_dot(const float* x, const T* y, std::int64_t hd) {
  float s = 0;
  for (std::int64_t d = 0; d < hd; ++d) s += x[d] * to_float(y[d]);
  return s;
}

// The row (b, h, i) of warp `warp`: rows are ordered (b, h, i), i fastest.
struct FlashRow {
  std::int64_t b, h, i;
};
__device__ __forceinline__ FlashRow flash_row(std::int64_t row, std::int64_t Tn, std::int64_t nh) {
  const std::int64_t bh = row / Tn;
  return {bh / nh, bh % nh, row % Tn};
}

// ctx row i of head (b, h) and its log-sum-exp: keys in tiles of 32, one a lane, with an
// online softmax; the context accumulates the tile's weighted v rows, dimensions over lanes.
template <class T, class S>
__global__ void flash_forward_kernel(T* ctx, float* lse, const T* qkv, const S* pos,
                                     const std::uint8_t* valid, const S* slopes, std::int64_t B,
                                     std::int64_t Tn, std::int64_t nh, std::int64_t hd,
                                     float scale) {
  __shared__ float q_sh[flash_warps][flash_max_hd];
  const int warp = static_cast<int>(threadIdx.x) / warp_size,
            lane = static_cast<int>(threadIdx.x) % warp_size;
  const std::int64_t row = std::int64_t{blockIdx.x} * flash_warps + warp;
  if (row >= B * nh * Tn) return;
  const auto [b, h, i] = flash_row(row, Tn, nh);
  const std::int64_t ld = 3 * nh * hd, Hl = nh * hd;
  const T* base = qkv + b * Tn * ld + h * 3 * hd;
  const S* pb = pos + b * Tn;
  const std::uint8_t* vb = valid + b * Tn;
  for (std::int64_t d = lane; d < hd; d += warp_size) q_sh[warp][d] = to_float(base[i * ld + d]);
  __syncwarp();
  const float slope = to_float(slopes[h]);
  const std::int64_t f = flash_first_valid(vb, Tn, lane);
  const bool uniform = kernels::attends_uniformly(i, f);
  const std::int64_t key_begin = uniform ? 0 : f, key_end = kernels::attended_keys(i, f, Tn);
  float m = kernels::minus_infinity<float>(), l = 0, acc[flash_dims] = {};
  for (std::int64_t j0 = key_begin; j0 < key_end; j0 += warp_size) {
    const std::int64_t j = j0 + lane;
    float s = kernels::minus_infinity<float>();
    if (j < key_end)
      s = kernels::flash_score(flash_dot(q_sh[warp], base + j * ld + hd, hd), scale, slope,
                               to_float(pb[j]), vb[j] != 0, i, j, uniform);
    const float corr = kernels::online_rescale(m, warp_max(s));
    const float w = kernels::online_weight(s, m);
    l = l * corr + warp_sum(w);
    for (int t = 0; t < flash_dims; ++t) acc[t] *= corr;
    for (int c = 0; c < warp_size && j0 + c < key_end; ++c) {
      const float wc = __shfl_sync(full_mask, w, c);
      if (wc == 0.0f) continue;  // the same in every lane
      const T* vr = base + (j0 + c) * ld + 2 * hd;
      for (int t = 0; t < flash_dims; ++t) {
        const std::int64_t d = lane + t * warp_size;
        if (d < hd) acc[t] += wc * to_float(vr[d]);
      }
    }
  }
  const float inv = 1.0f / l;
  T* out = ctx + (b * Tn + i) * Hl + h * hd;
  for (int t = 0; t < flash_dims; ++t) {
    const std::int64_t d = lane + t * warp_size;
    if (d < hd) out[d] = from_float<T>(acc[t] * inv);
  }
  if (lane == 0) lse[row] = kernels::log_sum_exp(m, l);
}

// delta[row] = dctx_i . ctx_i, then dq_i = scale sum_j ds_ij k_j over the keys of query i.
template <class T, class S>
__global__ void flash_backward_dq_kernel(T* dqkv, float* delta, const T* dctx, const T* ctx,
                                         const T* qkv, const float* lse, const S* pos,
                                         const std::uint8_t* valid, const S* slopes, std::int64_t B,
                                         std::int64_t Tn, std::int64_t nh, std::int64_t hd,
                                         float scale) {
  __shared__ float q_sh[flash_warps][flash_max_hd], do_sh[flash_warps][flash_max_hd];
  const int warp = static_cast<int>(threadIdx.x) / warp_size,
            lane = static_cast<int>(threadIdx.x) % warp_size;
  const std::int64_t row = std::int64_t{blockIdx.x} * flash_warps + warp;
  if (row >= B * nh * Tn) return;
  const auto [b, h, i] = flash_row(row, Tn, nh);
  const std::int64_t ld = 3 * nh * hd, Hl = nh * hd;
  const T* base = qkv + b * Tn * ld + h * 3 * hd;
  const S* pb = pos + b * Tn;
  const std::uint8_t* vb = valid + b * Tn;
  float D = 0;
  for (std::int64_t d = lane; d < hd; d += warp_size) {
    const float g = to_float(dctx[(b * Tn + i) * Hl + h * hd + d]);
    q_sh[warp][d] = to_float(base[i * ld + d]);
    do_sh[warp][d] = g;
    D += g * to_float(ctx[(b * Tn + i) * Hl + h * hd + d]);
  }
  D = warp_sum(D);
  __syncwarp();
  if (lane == 0) delta[row] = D;
  const float slope = to_float(slopes[h]), L = lse[row];
  const std::int64_t f = flash_first_valid(vb, Tn, lane);
  const bool uniform = kernels::attends_uniformly(i, f);
  const std::int64_t key_begin = uniform ? 0 : f, key_end = kernels::attended_keys(i, f, Tn);
  float dq[flash_dims] = {};
  for (std::int64_t j0 = key_begin; j0 < key_end; j0 += warp_size) {
    const std::int64_t j = j0 + lane;
    float g = 0;
    if (j < key_end) {
      const float s = kernels::flash_score(flash_dot(q_sh[warp], base + j * ld + hd, hd), scale,
                                           slope, to_float(pb[j]), vb[j] != 0, i, j, uniform);
      const float p = kernels::flash_probability(s, L);
      if (p != 0.0f)
        g = scale * kernels::softmax_grad(p, flash_dot(do_sh[warp], base + j * ld + 2 * hd, hd), D);
    }
    for (int c = 0; c < warp_size && j0 + c < key_end; ++c) {
      const float gc = __shfl_sync(full_mask, g, c);
      if (gc == 0.0f) continue;
      const T* kr = base + (j0 + c) * ld + hd;
      for (int t = 0; t < flash_dims; ++t) {
        const std::int64_t d = lane + t * warp_size;
        if (d < hd) dq[t] += gc * to_float(kr[d]);
      }
    }
  }
  T* out = dqkv + (b * Tn + i) * ld + h * 3 * hd;
  for (int t = 0; t < flash_dims; ++t) {
    const std::int64_t d = lane + t * warp_size;
    if (d < hd) out[d] = from_float<T>(dq[t]);
  }
}

// dk_j = scale sum_i ds_ij q_i and dv_j = sum_i p_ij dctx_i over the queries that attend key
// j: those with no valid key (i < f, uniform), and, when j is valid, i >= max(j, f).
template <class T, class S>
__global__ void flash_backward_dkv_kernel(T* dqkv, const float* delta, const T* dctx, const T* qkv,
                                          const float* lse, const S* pos, const std::uint8_t* valid,
                                          const S* slopes, std::int64_t B, std::int64_t Tn,
                                          std::int64_t nh, std::int64_t hd, float scale) {
  __shared__ float k_sh[flash_warps][flash_max_hd], v_sh[flash_warps][flash_max_hd];
  const int warp = static_cast<int>(threadIdx.x) / warp_size,
            lane = static_cast<int>(threadIdx.x) % warp_size;
  const std::int64_t row = std::int64_t{blockIdx.x} * flash_warps + warp;
  if (row >= B * nh * Tn) return;
  const auto [b, h, j] = flash_row(row, Tn, nh);
  const std::int64_t ld = 3 * nh * hd, Hl = nh * hd;
  const T* base = qkv + b * Tn * ld + h * 3 * hd;
  const T* dO = dctx + b * Tn * Hl + h * hd;
  const float* L = lse + (b * nh + h) * Tn;
  const float* Dr = delta + (b * nh + h) * Tn;
  const S* pb = pos + b * Tn;
  const std::uint8_t* vb = valid + b * Tn;
  for (std::int64_t d = lane; d < hd; d += warp_size) {
    k_sh[warp][d] = to_float(base[j * ld + hd + d]);
    v_sh[warp][d] = to_float(base[j * ld + 2 * hd + d]);
  }
  __syncwarp();
  const float slope = to_float(slopes[h]), pos_j = to_float(pb[j]);
  const bool valid_j = vb[j] != 0;
  const std::int64_t f = flash_first_valid(vb, Tn, lane);
  float dk[flash_dims] = {}, dv[flash_dims] = {};
  // Two query ranges: [0, f) attends uniformly; [max(j, f), Tn) attends j when it is valid.
  const std::int64_t first_end = f < Tn ? f : Tn;
  const std::int64_t second_begin = j > f ? j : f, second_end = valid_j ? Tn : second_begin;
  for (int range = 0; range < 2; ++range) {
    const std::int64_t begin = range == 0 ? 0 : second_begin,
                       end = range == 0 ? first_end : second_end;
    for (std::int64_t i0 = begin; i0 < end; i0 += warp_size) {
      const std::int64_t i = i0 + lane;
      float p = 0, g = 0;
      if (i < end) {
        const T* qi = base + i * ld;
        const bool uniform = kernels::attends_uniformly(i, f);
        const float s = kernels::flash_score(flash_dot(k_sh[warp], qi, hd), scale, slope, pos_j,
                                             valid_j, i, j, uniform);
        p = kernels::flash_probability(s, L[i]);
        if (p != 0.0f)
          g = scale * kernels::softmax_grad(p, flash_dot(v_sh[warp], dO + i * Hl, hd), Dr[i]);
      }
      for (int c = 0; c < warp_size && i0 + c < end; ++c) {
        const float pc = __shfl_sync(full_mask, p, c), gc = __shfl_sync(full_mask, g, c);
        if (pc == 0.0f) continue;
        const T* qr = base + (i0 + c) * ld;
        const T* gr = dO + (i0 + c) * Hl;
        for (int t = 0; t < flash_dims; ++t) {
          const std::int64_t d = lane + t * warp_size;
          if (d < hd) {
            dv[t] += pc * to_float(gr[d]);
            dk[t] += gc * to_float(qr[d]);
          }
        }
      }
    }
  }
  T* out = dqkv + (b * Tn + j) * ld + h * 3 * hd;
  for (int t = 0; t < flash_dims; ++t) {
    const std::int64_t d = lane + t * warp_size;
    if (d < hd) {
      out[hd + d] = from_float<T>(dk[t]);
      out[2 * hd + d] = from_float<T>(dv[t]);
    }
  }
}

inline unsigned flash_blocks(std::int64_t rows) {
  return static_cast<unsigned>((rows + flash_warps - 1) / flash_warps);
}

inline void check_flash_head_dim(std::int64_t hd) {
  SEQPAR_CHECK(hd > 0 && hd <= flash_max_hd, "fused attention on Cuda: head_dim ", hd,
               " is outside [1, ", flash_max_hd, "]; use AttentionKind::standard");
}

template <class T, class S>
void flash_attention_forward(T* ctx, float* lse, const T* qkv, const S* pos,
                             const std::uint8_t* valid, const S* slopes, std::int64_t B,
                             std::int64_t Tn, std::int64_t nh, std::int64_t hd) {
  if (B <= 0 || Tn <= 0 || nh <= 0) return;
  check_flash_head_dim(hd);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  SEQPAR_LAUNCH(flash_forward_kernel, flash_blocks(B * nh * Tn), flash_warps * warp_size, 0,
                CudaContext::current().stream())
  (ctx, lse, qkv, pos, valid, slopes, B, Tn, nh, hd, scale);
  SEQPAR_CUDA_CHECK_LAUNCH();
}

// delta[B, nh, T] is scratch (float): filled by the dq kernel, read by the dk/dv kernel.
template <class T, class S>
void flash_attention_backward(T* dqkv, const T* dctx, const T* ctx, const T* qkv, const float* lse,
                              const S* pos, const std::uint8_t* valid, const S* slopes,
                              float* delta, std::int64_t B, std::int64_t Tn, std::int64_t nh,
                              std::int64_t hd) {
  if (B <= 0 || Tn <= 0 || nh <= 0) return;
  check_flash_head_dim(hd);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const unsigned blocks = flash_blocks(B * nh * Tn);
  const cudaStream_t stream = CudaContext::current().stream();
  SEQPAR_LAUNCH(flash_backward_dq_kernel, blocks, flash_warps * warp_size, 0, stream)
  (dqkv, delta, dctx, ctx, qkv, lse, pos, valid, slopes, B, Tn, nh, hd, scale);
  SEQPAR_CUDA_CHECK_LAUNCH();
  SEQPAR_LAUNCH(flash_backward_dkv_kernel, blocks, flash_warps * warp_size, 0, stream)
  (dqkv, delta, dctx, qkv, lse, pos, valid, slopes, B, Tn, nh, hd, scale);
  SEQPAR_CUDA_CHECK_LAUNCH();
}

}  // namespace seqpar::inline v0::detail

#endif  // SEQPAR_CUDA_KERNELS

#pragma once
// Causal ALiBi attention on the GPU with the semantics of Ops<Cpu>::attention_forward and
// attention_backward: scores and context through batched cuBLAS GEMMs, the masked ALiBi
// softmax and its backward as one warp per score row, in float. probs [B, nh, T, T] is
// kept for the backward, or recomputed for it by attention_probs. pos and slopes are S:
// the storage type or float (positions past 256 are not exact in bf16). Compiled only in
// units that hold kernels (SEQPAR_CUDA_KERNELS).

#if defined(SEQPAR_CUDA_KERNELS)

#include <cmath>
#include <cstdint>

#include "seqpar/backend/cuda/context.hpp"
#include "seqpar/backend/cuda/error.hpp"
#include "seqpar/backend/cuda/gemm.hpp"
#include "seqpar/backend/cuda/numeric.hpp"
#include "seqpar/backend/kernels.hpp"

namespace seqpar::inline v0::detail {

inline constexpr int softmax_threads = 256;  // 8 rows a block

// Row i of head (b, h): s_j + slope pos_j over the valid keys j <= i, softmax in place;
// other keys get 0. A query with no valid key attends uniformly to all T keys.
template <class T, class S>
__global__ void alibi_softmax_kernel(T* probs, const S* pos, const std::uint8_t* valid,
                                     const S* slopes, std::int64_t B, std::int64_t Tn,
                                     std::int64_t nh) {
  const std::int64_t row =
      std::int64_t{blockIdx.x} * (blockDim.x / warp_size) + threadIdx.x / warp_size;
  const int lane = static_cast<int>(threadIdx.x) % warp_size;
  if (row >= B * nh * Tn) return;
  const std::int64_t i = row % Tn, bh = row / Tn, b = bh / nh, h = bh % nh;
  T* s = probs + row * Tn;
  const S* pb = pos + b * Tn;
  const std::uint8_t* vb = valid + b * Tn;
  const float slope = to_float(slopes[h]);
  float mx = -INFINITY;
  for (std::int64_t j = lane; j <= i; j += warp_size)
    if (vb[j]) mx = fmaxf(mx, kernels::alibi_score(to_float(s[j]), slope, to_float(pb[j])));
  mx = warp_max(mx);
  if (mx == -INFINITY) {
    const T uniform = from_float<T>(1.0f / static_cast<float>(Tn));
    for (std::int64_t j = lane; j < Tn; j += warp_size) s[j] = uniform;
    return;
  }
  float sum = 0;
  for (std::int64_t j = lane; j <= i; j += warp_size)
    if (vb[j]) sum += expf(kernels::alibi_score(to_float(s[j]), slope, to_float(pb[j])) - mx);
  const float inv = 1.0f / warp_sum(sum);
  for (std::int64_t j = lane; j < Tn; j += warp_size) {
    const float e = j <= i && vb[j]
                        ? expf(kernels::alibi_score(to_float(s[j]), slope, to_float(pb[j])) - mx)
                        : 0.0f;
    s[j] = from_float<T>(e * inv);
  }
}

// ds[row] = p (dp - p . dp) over the keys the row attended: j <= i when some key j <= i
// is valid, else all T keys (the gradient of a fully masked row passes through every
// score, as autograd passes it through an additive mask); 0 elsewhere. In place on dp.
template <class T>
__global__ void alibi_softmax_backward_kernel(T* ds, const T* probs, const std::uint8_t* valid,
                                              std::int64_t B, std::int64_t Tn, std::int64_t nh) {
  const std::int64_t row =
      std::int64_t{blockIdx.x} * (blockDim.x / warp_size) + threadIdx.x / warp_size;
  const int lane = static_cast<int>(threadIdx.x) % warp_size;
  if (row >= B * nh * Tn) return;
  const std::int64_t i = row % Tn, b = row / Tn / nh;
  const std::uint8_t* vb = valid + b * Tn;
  bool seen = false;
  for (std::int64_t j = lane; j <= i && !seen; j += warp_size) seen = vb[j] != 0;
  const std::int64_t keys = __any_sync(full_mask, seen) ? i + 1 : Tn;
  T* g = ds + row * Tn;
  const T* p = probs + row * Tn;
  float dot = 0;
  for (std::int64_t j = lane; j < keys; j += warp_size) dot += to_float(p[j]) * to_float(g[j]);
  dot = warp_sum(dot);
  for (std::int64_t j = lane; j < Tn; j += warp_size)
    g[j] = j < keys ? from_float<T>(kernels::softmax_grad(to_float(p[j]), to_float(g[j]), dot))
                    : from_float<T>(0.0f);
}

// The per-head products of attention as strided batched GEMMs. Head (b, h) of an
// operand starts at base + b * batch_stride + h * head_stride; one call covers the
// heads of one b or the batch rows of one h, whichever loop is shorter.
struct HeadStrides {
  std::int64_t batch, head;
};

template <class T>
void per_head_gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
                   const T* A, std::int64_t lda, HeadStrides sa, const T* Bm, std::int64_t ldb,
                   HeadStrides sb, float beta, T* C, std::int64_t ldc, HeadStrides sc,
                   std::int64_t B, std::int64_t nh) {
  if (B <= nh) {
    for (std::int64_t b = 0; b < B; ++b)
      gemm_strided_batched(ta, tb, M, N, K, alpha, A + b * sa.batch, lda, sa.head,
                           Bm + b * sb.batch, ldb, sb.head, beta, C + b * sc.batch, ldc, sc.head,
                           nh);
  } else {
    for (std::int64_t h = 0; h < nh; ++h)
      gemm_strided_batched(ta, tb, M, N, K, alpha, A + h * sa.head, lda, sa.batch, Bm + h * sb.head,
                           ldb, sb.batch, beta, C + h * sc.head, ldc, sc.batch, B);
  }
}

inline unsigned softmax_blocks(std::int64_t rows) {
  constexpr int rows_per_block = softmax_threads / warp_size;
  return static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block);
}

// probs[b, h] = the masked ALiBi softmax of scale q k^T  [T, T]. The same calls with the
// same inputs give the same bits, so a backward may recompute them instead of keeping them.
template <class T, class S>
void attention_probs(T* probs, const T* qkv, const S* pos, const std::uint8_t* valid,
                     const S* slopes, std::int64_t B, std::int64_t Tn, std::int64_t nh,
                     std::int64_t hd) {
  if (B <= 0 || Tn <= 0 || nh <= 0) return;
  const std::int64_t ld = 3 * nh * hd, TT = Tn * Tn;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const HeadStrides qkv_s{Tn * ld, 3 * hd}, probs_s{nh * TT, TT};
  per_head_gemm(false, true, Tn, Tn, hd, scale, qkv, ld, qkv_s, qkv + hd, ld, qkv_s, 0.0f, probs,
                Tn, probs_s, B, nh);
  SEQPAR_LAUNCH(alibi_softmax_kernel, softmax_blocks(B * nh * Tn), softmax_threads, 0,
                CudaContext::current().stream())
  (probs, pos, valid, slopes, B, Tn, nh);
  SEQPAR_CUDA_CHECK_LAUNCH();
}

template <class T, class S>
void attention_forward(T* ctx, T* probs, const T* qkv, const S* pos, const std::uint8_t* valid,
                       const S* slopes, std::int64_t B, std::int64_t Tn, std::int64_t nh,
                       std::int64_t hd) {
  if (B <= 0 || Tn <= 0 || nh <= 0) return;
  attention_probs(probs, qkv, pos, valid, slopes, B, Tn, nh, hd);
  const std::int64_t ld = 3 * nh * hd, Hl = nh * hd, TT = Tn * Tn;
  const HeadStrides qkv_s{Tn * ld, 3 * hd}, probs_s{nh * TT, TT}, ctx_s{Tn * Hl, hd};
  // ctx[b, :, h] = P v  [T, hd]
  per_head_gemm(false, false, Tn, hd, Tn, 1.0f, probs, Tn, probs_s, qkv + 2 * hd, ld, qkv_s, 0.0f,
                ctx, Hl, ctx_s, B, nh);
}

// scratch holds B * nh * T * T elements (d probs, then d scores).
template <class T>
void attention_backward(T* dqkv, const T* dctx, const T* qkv, const T* probs,
                        const std::uint8_t* valid, T* scratch, std::int64_t B, std::int64_t Tn,
                        std::int64_t nh, std::int64_t hd) {
  if (B <= 0 || Tn <= 0 || nh <= 0) return;
  const std::int64_t ld = 3 * nh * hd, Hl = nh * hd, TT = Tn * Tn;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const HeadStrides qkv_s{Tn * ld, 3 * hd}, probs_s{nh * TT, TT}, ctx_s{Tn * Hl, hd};
  const T* q = qkv;
  const T* k = qkv + hd;
  const T* v = qkv + 2 * hd;
  // dP = dctx v^T  [T, T];  dv = P^T dctx  [T, hd]
  per_head_gemm(false, true, Tn, Tn, hd, 1.0f, dctx, Hl, ctx_s, v, ld, qkv_s, 0.0f, scratch, Tn,
                probs_s, B, nh);
  per_head_gemm(true, false, Tn, hd, Tn, 1.0f, probs, Tn, probs_s, dctx, Hl, ctx_s, 0.0f,
                dqkv + 2 * hd, ld, qkv_s, B, nh);
  SEQPAR_LAUNCH(alibi_softmax_backward_kernel, softmax_blocks(B * nh * Tn), softmax_threads, 0,
                CudaContext::current().stream())
  (scratch, probs, valid, B, Tn, nh);
  SEQPAR_CUDA_CHECK_LAUNCH();
  // dq = scale dS k;  dk = scale dS^T q
  per_head_gemm(false, false, Tn, hd, Tn, scale, scratch, Tn, probs_s, k, ld, qkv_s, 0.0f, dqkv, ld,
                qkv_s, B, nh);
  per_head_gemm(true, false, Tn, hd, Tn, scale, scratch, Tn, probs_s, q, ld, qkv_s, 0.0f, dqkv + hd,
                ld, qkv_s, B, nh);
}

}  // namespace seqpar::inline v0::detail

#endif  // SEQPAR_CUDA_KERNELS

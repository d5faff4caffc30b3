#pragma once
// The definitions of Ops<Cuda>'s kernel-launching ops (backend/cuda/ops.hpp), with the
// kernels behind them: included by ops.hpp in units that hold kernels (SEQPAR_CUDA_KERNELS:
// nvcc, or the tests' emulated device), or once per program by <seqpar/compiled_cuda.hpp>
// (SEQPAR_SEPARATE_COMPILATION).

#include "seqpar/core/separate_compilation.hpp"

#if !defined(SEQPAR_CUDA_KERNELS)
#error "seqpar/backend/cuda/impl/ops.hpp holds CUDA kernels: compile it with nvcc"
#endif

#include <cstdint>

#include "seqpar/backend/cuda/attention.hpp"
#include "seqpar/backend/cuda/cross_entropy.hpp"
#include "seqpar/backend/cuda/decode_attention.hpp"
#include "seqpar/backend/cuda/elementwise.hpp"
#include "seqpar/backend/cuda/embedding.hpp"
#include "seqpar/backend/cuda/flash_attention.hpp"
#include "seqpar/backend/cuda/gemm.hpp"
#include "seqpar/backend/cuda/layernorm.hpp"
#include "seqpar/backend/cuda/next_token.hpp"
#include "seqpar/backend/cuda/ops.hpp"
#include "seqpar/backend/cuda/reduce.hpp"

namespace seqpar::inline v0 {

template <CudaScalar T, detail::GemmOutputFor<T> Out>
void Ops<Cuda>::gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, T alpha,
                     const T* A, std::int64_t lda, const T* B, std::int64_t ldb, T beta, Out* C,
                     std::int64_t ldc) {
  detail::gemm_strided_batched(ta, tb, M, N, K, detail::to_float(alpha), A, lda, 0, B, ldb, 0,
                               detail::to_float(beta), C, ldc, 0, 1);
}

template <CudaScalar T>
void Ops<Cuda>::gemm_batched(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K,
                             T alpha, const T* A, std::int64_t lda, std::int64_t sA, const T* B,
                             std::int64_t ldb, std::int64_t sB, T beta, T* C, std::int64_t ldc,
                             std::int64_t sC, std::int64_t batch) {
  detail::gemm_strided_batched(ta, tb, M, N, K, detail::to_float(alpha), A, lda, sA, B, ldb, sB,
                               detail::to_float(beta), C, ldc, sC, batch);
}

template <CudaScalar T>
void Ops<Cuda>::add_bias(T* y, const T* b, std::int64_t n, std::int64_t d) {
  detail::launch_rows(detail::add_bias_kernel<T>, n, y, b, static_cast<const T*>(nullptr), n, d);
}

template <CudaScalar T>
void Ops<Cuda>::column_sum(T* acc, const T* y, std::int64_t n, std::int64_t d) {
  detail::column_reduce<1>(detail::ColumnOutputs<T>{{acc, nullptr}}, n, d,
                           detail::ColumnSumTerm<T>{y, d});
}

template <CudaScalar T>
void Ops<Cuda>::add_bias_residual(T* y, const T* b, const T* r, std::int64_t n, std::int64_t d) {
  detail::launch_rows(detail::add_bias_kernel<T>, n, y, b, r, n, d);
}

template <CudaScalar T, CudaScalar S>
void Ops<Cuda>::layernorm_forward(T* y, S* mean, S* rstd, const T* x, const T* w, const T* b,
                                  std::int64_t n, std::int64_t d, double eps) {
  detail::layernorm_forward(y, mean, rstd, x, w, b, n, d, eps);
}

template <CudaScalar T, CudaScalar S>
void Ops<Cuda>::layernorm_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const S* mean,
                                   const S* rstd, const T* w, std::int64_t n, std::int64_t d) {
  detail::layernorm_backward(dx, dw, db, dy, x, mean, rstd, w, n, d);
}

template <CudaScalar T>
void Ops<Cuda>::gelu_forward(T* y, const T* x, std::int64_t n) {
  detail::launch_elementwise(detail::gelu_forward_kernel<T>, n, y, x, n);
}

template <CudaScalar T>
void Ops<Cuda>::gelu_backward(T* dx, const T* dy, const T* x, std::int64_t n) {
  detail::launch_elementwise(detail::gelu_backward_kernel<T>, n, dx, dy, x, n);
}

template <CudaScalar T, std::integral Id>
void Ops<Cuda>::embedding_forward(T* y, const Id* ids, const T* table, std::int64_t n,
                                  std::int64_t d, std::int64_t row0, std::int64_t rows) {
  detail::embedding_forward(y, ids, table, n, d, row0, rows);
}

template <CudaScalar T, std::integral Id>
void Ops<Cuda>::embedding_backward(T* dtable, const Id* ids, const T* dy, std::int64_t n,
                                   std::int64_t d, std::int64_t row0, std::int64_t rows) {
  detail::embedding_backward(dtable, ids, dy, n, d, row0, rows);
}

template <CudaScalar T, CudaScalar U>
void Ops<Cuda>::add(T* y, const U* x, std::int64_t n) {
  detail::launch_elementwise(detail::add_kernel<T, U>, n, y, x, n);
}

template <CudaScalar T>
void Ops<Cuda>::scale(T* y, T s, std::int64_t n) {
  detail::launch_elementwise(detail::scale_kernel<T>, n, y, detail::to_float(s), n);
}

template <CudaScalar T>
void Ops<Cuda>::fill(T* y, T v, std::int64_t n) {
  detail::launch_elementwise(detail::fill_kernel<T>, n, y, v, n);
}

template <CudaScalar T>
double Ops<Cuda>::sum_squares(const T* x, std::int64_t n) {
  return detail::sum_squares(x, n);
}

template <CudaScalar T>
void Ops<Cuda>::sum_squares_accumulate(double* acc, const T* x,
                                       const kernels::Segments<double>& weight) {
  detail::sum_squares_accumulate(acc, x, weight);
}

template <CudaScalar To, CudaScalar From>
void Ops<Cuda>::convert(To* y, const From* x, std::int64_t n) {
  detail::launch_elementwise(detail::convert_kernel<To, From>, n, y, x, n);
}

template <CudaScalar T>
void Ops<Cuda>::adamw(T* p, const T* g, T* m, T* v, const kernels::Segments<bool>& decay,
                      const kernels::AdamCoeffs& c) {
  const std::int64_t n = decay.size();
  detail::launch_elementwise(detail::adamw_kernel<T>, n, p, g, m, v, n, decay, c);
}

template <CudaScalar W, CudaScalar G>
void Ops<Cuda>::adamw_mixed(float* master, W* weight, const G* g, float* m, float* v,
                            const kernels::Segments<bool>& decay, const kernels::AdamCoeffs& c,
                            float grad_factor) {
  const std::int64_t n = decay.size();
  detail::launch_elementwise(detail::adamw_mixed_kernel<W, G>, n, master, weight, g, m, v, n, decay,
                             c, grad_factor);
}

template <CudaScalar T, CudaScalar S>
void Ops<Cuda>::attention_forward(T* ctx, T* probs, const T* qkv, const S* pos,
                                  const std::uint8_t* valid, const S* slopes, std::int64_t B,
                                  std::int64_t Tn, std::int64_t nh, std::int64_t hd) {
  detail::attention_forward(ctx, probs, qkv, pos, valid, slopes, B, Tn, nh, hd);
}

template <CudaScalar T, CudaScalar S>
void Ops<Cuda>::attention_probs(T* probs, const T* qkv, const S* pos, const std::uint8_t* valid,
                                const S* slopes, std::int64_t B, std::int64_t Tn, std::int64_t nh,
                                std::int64_t hd) {
  detail::attention_probs(probs, qkv, pos, valid, slopes, B, Tn, nh, hd);
}

template <CudaScalar T>
void Ops<Cuda>::attention_backward(T* dqkv, const T* dctx, const T* qkv, const T* probs,
                                   const std::uint8_t* valid, T* scratch, std::int64_t B,
                                   std::int64_t Tn, std::int64_t nh, std::int64_t hd) {
  detail::attention_backward(dqkv, dctx, qkv, probs, valid, scratch, B, Tn, nh, hd);
}

template <CudaScalar T, CudaScalar S>
void Ops<Cuda>::flash_attention_forward(T* ctx, float* lse, const T* qkv, const S* pos,
                                        const std::uint8_t* valid, const S* slopes, std::int64_t B,
                                        std::int64_t Tn, std::int64_t nh, std::int64_t hd) {
  detail::flash_attention_forward(ctx, lse, qkv, pos, valid, slopes, B, Tn, nh, hd);
}

template <CudaScalar T, CudaScalar S>
void Ops<Cuda>::flash_attention_backward(T* dqkv, const T* dctx, const T* ctx, const T* qkv,
                                         const float* lse, const S* pos, const std::uint8_t* valid,
                                         const S* slopes, float* delta, std::int64_t B,
                                         std::int64_t Tn, std::int64_t nh, std::int64_t hd) {
  detail::flash_attention_backward(dqkv, dctx, ctx, qkv, lse, pos, valid, slopes, delta, B, Tn, nh,
                                   hd);
}

template <CudaScalar T>
void Ops<Cuda>::kv_store(T* k, T* v, const T* qkv, std::int64_t B, std::int64_t S, std::int64_t nh,
                         std::int64_t hd, std::int64_t cap, std::int64_t t0) {
  detail::kv_store(k, v, qkv, B, S, nh, hd, cap, t0);
}

template <CudaScalar T, std::integral Id>
void Ops<Cuda>::kv_gather(T* dst, const T* src, const Id* index, std::int64_t B, std::int64_t nh,
                          std::int64_t cap, std::int64_t hd, std::int64_t len) {
  detail::kv_gather(dst, src, index, B, nh, cap, hd, len);
}

template <CudaScalar T, CudaScalar S>
void Ops<Cuda>::decode_attention(T* ctx, float* scores, const T* qkv, const T* k, const T* v,
                                 const S* pos, const std::uint8_t* valid, const S* slopes,
                                 std::int64_t B, std::int64_t nh, std::int64_t hd, std::int64_t cap,
                                 std::int64_t len) {
  detail::decode_attention(ctx, scores, qkv, k, v, pos, valid, slopes, B, nh, hd, cap, len);
}

template <CudaScalar T>
void Ops<Cuda>::next_token_max(float* mx, const T* L, std::int64_t rows, std::int64_t cols,
                               std::int64_t real) {
  detail::next_token_max(mx, L, rows, cols, real);
}

template <CudaScalar T>
void Ops<Cuda>::next_token_sum_exp(double* sum, const T* L, const float* mx, std::int64_t rows,
                                   std::int64_t cols, std::int64_t real) {
  detail::next_token_sum_exp(sum, L, mx, rows, cols, real);
}

template <CudaScalar T>
void Ops<Cuda>::next_token_scores(float* out, const T* L, const float* mx, const float* lse,
                                  const std::int32_t* seen, const std::int64_t* seen_start,
                                  float penalty, std::int64_t rows, std::int64_t cols,
                                  std::int64_t row0, std::int64_t real) {
  detail::next_token_scores(out, L, mx, lse, seen, seen_start, penalty, rows, cols, row0, real);
}

template <std::integral Id>
void Ops<Cuda>::next_token_top_k(float* score, Id* token, const float* S, const float* base,
                                 std::int64_t rows, std::int64_t cols, std::int64_t row0,
                                 std::int64_t real, std::int64_t k) {
  detail::next_token_top_k(score, token, S, base, rows, cols, row0, real, k);
}

template <CudaScalar T, std::integral Id>
void Ops<Cuda>::gather_rows(T* dst, const T* src, const Id* index, std::int64_t n, std::int64_t d) {
  detail::launch_rows(detail::move_rows_kernel<T, Id, false>, n, dst, src, index, n, d);
}

template <CudaScalar T, std::integral Id>
void Ops<Cuda>::scatter_rows(T* dst, const T* src, const Id* index, std::int64_t n,
                             std::int64_t d) {
  detail::launch_rows(detail::move_rows_kernel<T, Id, true>, n, dst, src, index, n, d);
}

template <CudaScalar T, CudaScalar S, std::integral Id>
void Ops<Cuda>::softmax_stats(S* mx, S* sum, S* picked, const T* L, const Id* target,
                              std::int64_t n, std::int64_t cw, std::int64_t col0) {
  detail::softmax_stats(mx, sum, picked, L, target, n, cw, col0);
}

template <CudaScalar S>
void Ops<Cuda>::softmax_stats_rescale(S* sum, const S* mx, const S* global_mx, std::int64_t n) {
  detail::softmax_stats_rescale(sum, mx, global_mx, n);
}

template <CudaScalar S>
double Ops<Cuda>::cross_entropy_loss(S* lse, const S* global_mx, const S* sum, const S* picked,
                                     std::int64_t n) {
  return detail::cross_entropy_loss(lse, global_mx, sum, picked, n);
}

template <CudaScalar T, CudaScalar S, std::integral Id>
void Ops<Cuda>::cross_entropy_grad(T* L, const S* lse, const Id* target, std::int64_t n,
                                   std::int64_t cw, std::int64_t col0, float grad_scale) {
  detail::cross_entropy_grad(L, lse, target, n, cw, col0, grad_scale);
}

}  // namespace seqpar::inline v0

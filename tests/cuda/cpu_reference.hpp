#pragma once
// Ops<Cpu> in float, compiled by the host compiler in cpu_reference.cpp: the reference
// the CUDA tests compare with, without Eigen passing through nvcc.

#include <cstdint>

#include "seqpar/backend/kernels.hpp"

namespace seqpar::test {

/// The Ops<Cpu> functions the CUDA tests use, in float (names and arguments as Ops<Cpu>).
struct CpuRef {
  static void gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
                   const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta,
                   float* C, std::int64_t ldc);
  static void linear_forward(float* y, const float* x, const float* w, const float* b,
                             std::int64_t n, std::int64_t in, std::int64_t out);
  static void linear_backward(float* dx, float* dw, float* db, const float* dy, const float* x,
                              const float* w, std::int64_t n, std::int64_t in, std::int64_t out,
                              bool accumulate_dx);
  static void add_bias(float* y, const float* b, std::int64_t n, std::int64_t d);
  static void column_sum(float* acc, const float* y, std::int64_t n, std::int64_t d);
  static void add_bias_residual(float* y, const float* b, const float* r, std::int64_t n,
                                std::int64_t d);
  static void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* w,
                                const float* b, std::int64_t n, std::int64_t d, double eps);
  static void layernorm_backward(float* dx, float* dw, float* db, const float* dy, const float* x,
                                 const float* mean, const float* rstd, const float* w,
                                 std::int64_t n, std::int64_t d);
  static void gelu_forward(float* y, const float* x, std::int64_t n);
  static void gelu_backward(float* dx, const float* dy, const float* x, std::int64_t n);
  static void embedding_forward(float* y, const std::int32_t* ids, const float* table,
                                std::int64_t n, std::int64_t d, std::int64_t row0,
                                std::int64_t rows);
  static void embedding_backward(float* dtable, const std::int32_t* ids, const float* dy,
                                 std::int64_t n, std::int64_t d, std::int64_t row0,
                                 std::int64_t rows);
  static void add(float* y, const float* x, std::int64_t n);
  static void scale(float* y, float s, std::int64_t n);
  static double sum_squares(const float* x, std::int64_t n);
  static void sum_squares_accumulate(double* acc, const float* x,
                                     const kernels::Segments<double>& weight);
  static void adamw(float* p, const float* g, float* m, float* v,
                    const kernels::Segments<bool>& decay, const kernels::AdamCoeffs& c);
  /// host_adamw (optim/host_adamw.hpp) on path `isa` (a HostIsa), gradients times grad_factor:
  /// compiled here, apart from the kernels, with the host compiler's own contraction setting.
  static void host_adamw(float* p, const float* g, float* m, float* v,
                         const kernels::Segments<bool>& decay, const kernels::AdamCoeffs& c,
                         float grad_factor, int isa);
  static void attention_forward(float* ctx, float* probs, const float* qkv, const float* pos,
                                const std::uint8_t* valid, const float* slopes, std::int64_t B,
                                std::int64_t Tn, std::int64_t nh, std::int64_t hd);
  static void attention_backward(float* dqkv, const float* dctx, const float* qkv,
                                 const float* probs, const std::uint8_t* valid, float* scratch,
                                 std::int64_t B, std::int64_t Tn, std::int64_t nh, std::int64_t hd);
  static void flash_attention_forward(float* ctx, float* lse, const float* qkv, const float* pos,
                                      const std::uint8_t* valid, const float* slopes,
                                      std::int64_t B, std::int64_t Tn, std::int64_t nh,
                                      std::int64_t hd);
  static void flash_attention_backward(float* dqkv, const float* dctx, const float* ctx,
                                       const float* qkv, const float* lse, const float* pos,
                                       const std::uint8_t* valid, const float* slopes, float* delta,
                                       std::int64_t B, std::int64_t Tn, std::int64_t nh,
                                       std::int64_t hd);
  static void kv_store(float* k, float* v, const float* qkv, std::int64_t B, std::int64_t S,
                       std::int64_t nh, std::int64_t hd, std::int64_t cap, std::int64_t t0);
  static void kv_gather(float* dst, const float* src, const std::int32_t* index, std::int64_t B,
                        std::int64_t nh, std::int64_t cap, std::int64_t hd, std::int64_t len);
  static void decode_attention(float* ctx, float* scores, const float* qkv, const float* k,
                               const float* v, const float* pos, const std::uint8_t* valid,
                               const float* slopes, std::int64_t B, std::int64_t nh,
                               std::int64_t hd, std::int64_t cap, std::int64_t len);
  static void next_token_max(float* mx, const float* L, std::int64_t rows, std::int64_t cols,
                             std::int64_t real);
  static void next_token_sum_exp(double* sum, const float* L, const float* mx, std::int64_t rows,
                                 std::int64_t cols, std::int64_t real);
  static void next_token_scores(float* out, const float* L, const float* mx, const float* lse,
                                const std::int32_t* seen, const std::int64_t* seen_start,
                                float penalty, std::int64_t rows, std::int64_t cols,
                                std::int64_t row0, std::int64_t real);
  static void next_token_top_k(float* score, std::int64_t* token, const float* S, const float* base,
                               std::int64_t rows, std::int64_t cols, std::int64_t row0,
                               std::int64_t real, std::int64_t k);
};

}  // namespace seqpar::test

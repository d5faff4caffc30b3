// CpuRef: each function forwards to Ops<Cpu> in float.
#include "cpu_reference.hpp"

#include "seqpar/backend/cpu/ops.hpp"
#include "seqpar/optim/host_adamw.hpp"

namespace seqpar::test {

using O = Ops<Cpu>;

void CpuRef::gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
                  const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta,
                  float* C, std::int64_t ldc) {
  O::gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
void CpuRef::linear_forward(float* y, const float* x, const float* w, const float* b,
                            std::int64_t n, std::int64_t in, std::int64_t out) {
  O::linear_forward(y, x, w, b, n, in, out);
}
void CpuRef::linear_backward(float* dx, float* dw, float* db, const float* dy, const float* x,
                             const float* w, std::int64_t n, std::int64_t in, std::int64_t out,
                             bool accumulate_dx) {
  O::linear_backward(dx, dw, db, dy, x, w, n, in, out, accumulate_dx);
}
void CpuRef::add_bias(float* y, const float* b, std::int64_t n, std::int64_t d) {
  O::add_bias(y, b, n, d);
}
void CpuRef::column_sum(float* acc, const float* y, std::int64_t n, std::int64_t d) {
  O::column_sum(acc, y, n, d);
}
void CpuRef::add_bias_residual(float* y, const float* b, const float* r, std::int64_t n,
                               std::int64_t d) {
  O::add_bias_residual(y, b, r, n, d);
}
void CpuRef::layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* w,
                               const float* b, std::int64_t n, std::int64_t d, double eps) {
  O::layernorm_forward(y, mean, rstd, x, w, b, n, d, eps);
}
void CpuRef::layernorm_backward(float* dx, float* dw, float* db, const float* dy, const float* x,
                                const float* mean, const float* rstd, const float* w,
                                std::int64_t n, std::int64_t d) {
  O::layernorm_backward(dx, dw, db, dy, x, mean, rstd, w, n, d);
}
void CpuRef::gelu_forward(float* y, const float* x, std::int64_t n) { O::gelu_forward(y, x, n); }
void CpuRef::gelu_backward(float* dx, const float* dy, const float* x, std::int64_t n) {
  O::gelu_backward(dx, dy, x, n);
}
void CpuRef::embedding_forward(float* y, const std::int32_t* ids, const float* table,
                               std::int64_t n, std::int64_t d, std::int64_t row0,
                               std::int64_t rows) {
  O::embedding_forward(y, ids, table, n, d, row0, rows);
}
void CpuRef::embedding_backward(float* dtable, const std::int32_t* ids, const float* dy,
                                std::int64_t n, std::int64_t d, std::int64_t row0,
                                std::int64_t rows) {
  O::embedding_backward(dtable, ids, dy, n, d, row0, rows);
}
void CpuRef::add(float* y, const float* x, std::int64_t n) { O::add(y, x, n); }
void CpuRef::scale(float* y, float s, std::int64_t n) { O::scale(y, s, n); }
double CpuRef::sum_squares(const float* x, std::int64_t n) { return O::sum_squares(x, n); }
void CpuRef::sum_squares_accumulate(double* acc, const float* x,
                                    const kernels::Segments<double>& weight) {
  O::sum_squares_accumulate(acc, x, weight);
}
void CpuRef::adamw(float* p, const float* g, float* m, float* v,
                   const kernels::Segments<bool>& decay, const kernels::AdamCoeffs& c) {
  O::adamw(p, g, m, v, decay, c);
}
void CpuRef::attention_forward(float* ctx, float* probs, const float* qkv, const float* pos,
                               const std::uint8_t* valid, const float* slopes, std::int64_t B,
                               std::int64_t Tn, std::int64_t nh, std::int64_t hd) {
  O::attention_forward(ctx, probs, qkv, pos, valid, slopes, B, Tn, nh, hd);
}
void CpuRef::attention_backward(float* dqkv, const float* dctx, const float* qkv,
                                const float* probs, const std::uint8_t* valid, float* scratch,
                                std::int64_t B, std::int64_t Tn, std::int64_t nh, std::int64_t hd) {
  O::attention_backward(dqkv, dctx, qkv, probs, valid, scratch, B, Tn, nh, hd);
}
void CpuRef::flash_attention_forward(float* ctx, float* lse, const float* qkv, const float* pos,
                                     const std::uint8_t* valid, const float* slopes, std::int64_t B,
                                     std::int64_t Tn, std::int64_t nh, std::int64_t hd) {
  O::flash_attention_forward(ctx, lse, qkv, pos, valid, slopes, B, Tn, nh, hd);
}
void CpuRef::flash_attention_backward(float* dqkv, const float* dctx, const float* ctx,
                                      const float* qkv, const float* lse, const float* pos,
                                      const std::uint8_t* valid, const float* slopes, float* delta,
                                      std::int64_t B, std::int64_t Tn, std::int64_t nh,
                                      std::int64_t hd) {
  O::flash_attention_backward(dqkv, dctx, ctx, qkv, lse, pos, valid, slopes, delta, B, Tn, nh, hd);
}
void CpuRef::kv_store(float* k, float* v, const float* qkv, std::int64_t B, std::int64_t S,
                      std::int64_t nh, std::int64_t hd, std::int64_t cap, std::int64_t t0) {
  O::kv_store(k, v, qkv, B, S, nh, hd, cap, t0);
}
void CpuRef::kv_gather(float* dst, const float* src, const std::int32_t* index, std::int64_t B,
                       std::int64_t nh, std::int64_t cap, std::int64_t hd, std::int64_t len) {
  O::kv_gather(dst, src, index, B, nh, cap, hd, len);
}
void CpuRef::decode_attention(float* ctx, float* scores, const float* qkv, const float* k,
                              const float* v, const float* pos, const std::uint8_t* valid,
                              const float* slopes, std::int64_t B, std::int64_t nh, std::int64_t hd,
                              std::int64_t cap, std::int64_t len) {
  O::decode_attention(ctx, scores, qkv, k, v, pos, valid, slopes, B, nh, hd, cap, len);
}

void CpuRef::next_token_max(float* mx, const float* L, std::int64_t rows, std::int64_t cols,
                            std::int64_t real) {
  O::next_token_max(mx, L, rows, cols, real);
}
void CpuRef::next_token_sum_exp(double* sum, const float* L, const float* mx, std::int64_t rows,
                                std::int64_t cols, std::int64_t real) {
  O::next_token_sum_exp(sum, L, mx, rows, cols, real);
}
void CpuRef::next_token_scores(float* out, const float* L, const float* mx, const float* lse,
                               const std::int32_t* seen, const std::int64_t* seen_start,
                               float penalty, std::int64_t rows, std::int64_t cols,
                               std::int64_t row0, std::int64_t real) {
  O::next_token_scores(out, L, mx, lse, seen, seen_start, penalty, rows, cols, row0, real);
}
void CpuRef::next_token_top_k(float* score, std::int64_t* token, const float* S, const float* base,
                              std::int64_t rows, std::int64_t cols, std::int64_t row0,
                              std::int64_t real, std::int64_t k) {
  O::next_token_top_k(score, token, S, base, rows, cols, row0, real, k);
}

void CpuRef::host_adamw(float* p, const float* g, float* m, float* v,
                        const kernels::Segments<bool>& decay, const kernels::AdamCoeffs& c,
                        float grad_factor, int isa) {
  seqpar::host_adamw(p, g, m, v, decay, c, grad_factor, static_cast<HostIsa>(isa));
}

}  // namespace seqpar::test

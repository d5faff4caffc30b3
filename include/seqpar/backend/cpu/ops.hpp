#pragma once
// Ops<Cpu>: the op set on host memory; 16-bit storage is widened to float on read and rounded once
// on write. Upload, download and synchronize are plain copies or no-ops, so device-generic code
// (nn/, the trainer, the offloaded optimizer) runs here unchanged.

#include <concepts>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "seqpar/backend/device.hpp"
#include "seqpar/backend/kernels.hpp"
#include "seqpar/config/units.hpp"

// The headers below are parts of this one and refuse to be included on their own.
#define SEQPAR_BACKEND_CPU_OPS_INCLUDED 1
#include "seqpar/backend/cpu/attention.hpp"
#include "seqpar/backend/cpu/cross_entropy.hpp"
#include "seqpar/backend/cpu/decode_attention.hpp"
#include "seqpar/backend/cpu/elementwise.hpp"
#include "seqpar/backend/cpu/embedding.hpp"
#include "seqpar/backend/cpu/flash_attention.hpp"
#include "seqpar/backend/cpu/gemm.hpp"
#include "seqpar/backend/cpu/layernorm.hpp"
#include "seqpar/backend/cpu/loops.hpp"
#include "seqpar/backend/cpu/next_token.hpp"
#include "seqpar/backend/cpu/optimizer.hpp"
#include "seqpar/backend/cpu/reduce.hpp"

namespace seqpar::inline v0 {

template <>
struct Ops<Cpu> {
  /// Logits of the chunked LM head held at once (nn/lm_head.hpp; config/units.hpp).
  static constexpr std::int64_t logits_chunk_bytes = cpu_logits_budget;

  // --- host <-> device: the same memory ------------------------------------------------
  template <class U>
  static void upload(U* dev, const U* host, std::int64_t n) {
    static_assert(std::is_trivially_copyable_v<U>);
    if (n > 0) std::memcpy(dev, host, sizeof(U) * static_cast<std::size_t>(n));
  }
  template <class U>
  static void download(U* host, const U* dev, std::int64_t n) {
    static_assert(std::is_trivially_copyable_v<U>);
    if (n > 0) std::memcpy(host, dev, sizeof(U) * static_cast<std::size_t>(n));
  }
  /// Every op has finished when it returns.
  static void synchronize() {}

  // --- copies behind the computation (optimizer offload) ---------------------------------
  // The contract, as Ops<Cuda> keeps it on a second stream: record(e) marks the ops queued
  // so far; download_after(host, dev, n, ready, done) copies once `ready` has happened,
  // without holding back the ops queued after it, and marks its end in `done`;
  // wait(done) returns when the copy has landed in host memory; stream_wait(done) makes
  // the ops queued after it wait for the copy (before they overwrite what it reads). Here
  // every op has run when it returns, so an event marks nothing and the copy is a memcpy.

  /// An ordering point between the computation and the copies; nothing to hold on the CPU.
  struct Event {};
  static void record(Event&) {}
  template <class U>
  static void download_after(U* host, const U* dev, std::int64_t n, const Event&, Event&) {
    download(host, dev, n);
  }
  static void wait(Event&) {}
  static void stream_wait(const Event&) {}

  // --- GEMM and linear layers (gemm.hpp) -------------------------------------------------

  /// C[M,N] = alpha * op(A) op(B) + beta * C, with op(A) [M,K] and op(B) [K,N];
  /// A is [M,K] (or [K,M] when ta), B is [K,N] (or [N,K] when tb); ld* are row strides.
  /// 16-bit operands accumulate in float; C may then be float (a sum kept in float over
  /// many products: the LM head's dh over its vocabulary chunks).
  template <class T, class Out>
  static void gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, T alpha,
                   const T* A, std::int64_t lda, const T* B, std::int64_t ldb, T beta, Out* C,
                   std::int64_t ldc) {
    detail::cpu::gemm<T, Out>(ta, tb, M, N, K, widen(alpha), A, lda, B, ldb, widen(beta), C, ldc);
  }
  /// Which code runs GEMMs of storage type T in this translation unit (the flags it was
  /// compiled with decide): for the benchmarks' and programs' logs.
  template <class T>
  static constexpr const char* gemm_path() {
    return detail::cpu::gemm_path<T>();
  }
  // y[N, out] = x[N, in] W[out, in]^T (+ b[out])
  template <class T>
  static void linear_forward(T* y, const T* x, const T* w, const T* b, std::int64_t n,
                             std::int64_t in, std::int64_t out) {
    detail::cpu::linear_forward(y, x, w, b, n, in, out);
  }
  // dx[N, in] (=|+=) dy[N, out] W[out, in];  dW[out, in] += dy^T x;  db[out] += colsum(dy)
  template <class T>
  static void linear_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const T* w,
                              std::int64_t n, std::int64_t in, std::int64_t out,
                              bool accumulate_dx = false) {
    detail::cpu::linear_backward(dx, dw, db, dy, x, w, n, in, out, accumulate_dx);
  }

  // --- biases, vectors, GELU, rows (elementwise.hpp, reduce.hpp) -------------------------

  template <class T>
  static void add_bias(T* y, const T* b, std::int64_t n, std::int64_t d) {
    detail::cpu::add_bias(y, b, n, d);
  }
  // acc[d] += sum over rows of y[n, d]
  template <class T>
  static void column_sum(T* acc, const T* y, std::int64_t n, std::int64_t d) {
    detail::cpu::column_sum(acc, y, n, d);
  }
  // y[n, d] += b[d] + r[n, d]  (the bias of a row-parallel linear, added once after its reduction)
  template <class T>
  static void add_bias_residual(T* y, const T* b, const T* r, std::int64_t n, std::int64_t d) {
    detail::cpu::add_bias_residual(y, b, r, n, d);
  }
  template <class T>
  static void gelu_forward(T* y, const T* x, std::int64_t n) {
    detail::cpu::gelu_forward(y, x, n);
  }
  // dx[i] = dy[i] * gelu'(x[i]); dx may alias dy
  template <class T>
  static void gelu_backward(T* dx, const T* dy, const T* x, std::int64_t n) {
    detail::cpu::gelu_backward(dx, dy, x, n);
  }
  // y[i] += x[i] (x may have another type: a 16-bit term added to a float sum)
  template <class T, class U>
  static void add(T* y, const U* x, std::int64_t n) {
    detail::cpu::add(y, x, n);
  }
  template <class T>
  static void scale(T* y, T s, std::int64_t n) {
    detail::cpu::scale(y, s, n);
  }
  template <class T>
  static void copy(T* y, const T* x, std::int64_t n) {
    detail::cpu::copy(y, x, n);
  }
  template <class T>
  static void fill(T* y, T v, std::int64_t n) {
    detail::cpu::fill(y, v, n);
  }
  /// In double; blocks of a fixed size summed in order, then the block sums in order: the
  /// same result for any number of threads.
  template <class T>
  static double sum_squares(const T* x, std::int64_t n) {
    return detail::cpu::sum_squares(x, n);
  }
  /// acc[0] += the sum over the segments of weight.value[k] x the sum of squares of x over
  /// segment k; acc is device memory (a gradient norm summed over many tensors, read once).
  template <class T>
  static void sum_squares_accumulate(double* acc, const T* x,
                                     const kernels::Segments<double>& weight) {
    detail::cpu::sum_squares_accumulate(acc, x, weight);
  }
  /// y[i] = x[i] converted to To.
  template <class To, class From>
  static void convert(To* y, const From* x, std::int64_t n) {
    detail::cpu::convert(y, x, n);
  }
  // dst[r, :] = src[index[r], :] for r < n
  template <class T, std::integral Id>
  static void gather_rows(T* dst, const T* src, const Id* index, std::int64_t n, std::int64_t d) {
    detail::cpu::gather_rows(dst, src, index, n, d);
  }
  // dst[index[r], :] = src[r, :] for r < n (indices distinct)
  template <class T, std::integral Id>
  static void scatter_rows(T* dst, const T* src, const Id* index, std::int64_t n, std::int64_t d) {
    detail::cpu::scatter_rows(dst, src, index, n, d);
  }

  // --- layernorm (layernorm.hpp) and embedding (embedding.hpp) ---------------------------

  // y[n, d] = layernorm(x) * w + b; keeps mean[n] and rstd[n] (S: float for 16-bit T)
  template <class T, class S>
  static void layernorm_forward(T* y, S* mean, S* rstd, const T* x, const T* w, const T* b,
                                std::int64_t n, std::int64_t d, double eps) {
    detail::cpu::layernorm_forward(y, mean, rstd, x, w, b, n, d, eps);
  }
  // dx[n, d] += layernorm'(dy); dw[d] += sum dy * xhat; db[d] += sum dy
  template <class T, class S>
  static void layernorm_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const S* mean,
                                 const S* rstd, const T* w, std::int64_t n, std::int64_t d) {
    detail::cpu::layernorm_backward(dx, dw, db, dy, x, mean, rstd, w, n, d);
  }
  // y[n, d] = table[ids[n] - row0, :] for ids inside [row0, row0 + rows), else 0
  template <class T, class Id>
  static void embedding_forward(T* y, const Id* ids, const T* table, std::int64_t n, std::int64_t d,
                                std::int64_t row0, std::int64_t rows) {
    detail::cpu::embedding_forward(y, ids, table, n, d, row0, rows);
  }
  // dtable[ids[n] - row0, :] += dy[n, :] (in token order: reproducible)
  template <class T, class Id>
  static void embedding_backward(T* dtable, const Id* ids, const T* dy, std::int64_t n,
                                 std::int64_t d, std::int64_t row0, std::int64_t rows) {
    detail::cpu::embedding_backward(dtable, ids, dy, n, d, row0, rows);
  }

  // --- optimizer (optimizer.hpp) ---------------------------------------------------------

  // AdamW on decay.size() elements, each segment with its decay flag.
  template <class T>
  static void adamw(T* p, const T* g, T* m, T* v, const kernels::Segments<bool>& decay,
                    const kernels::AdamCoeffs& c) {
    detail::cpu::adamw(p, g, m, v, decay, c);
  }
  /// Mixed-precision AdamW over every segment of `decay`: fp32 master weights and moments,
  /// gradient g (bf16, fp16 or float) times grad_factor (1 / loss scale); the updated master
  /// weight is rounded into weight[i], the working copy the model computes with (skipped
  /// when weight is null).
  template <class W, class G>
  static void adamw_mixed(float* master, W* weight, const G* g, float* m, float* v,
                          const kernels::Segments<bool>& decay, const kernels::AdamCoeffs& c,
                          float grad_factor = 1.0f) {
    detail::cpu::adamw_mixed(master, weight, g, m, v, decay, c, grad_factor);
  }

  // --- the chunked cross-entropy (cross_entropy.hpp; nn/lm_head.hpp) ---------------------

  /// One vocabulary chunk L[n, cw] (local columns [col0, col0 + cw)) of an online softmax:
  /// mx[r] = max(mx[r], max_j L[r, j]); sum[r] = sum[r] exp(old mx - mx) + sum_j exp(L - mx);
  /// picked[r] = L[r, target[r] - col0] when that column is in the chunk.
  template <class T, class S, std::integral Id>
  static void softmax_stats(S* mx, S* sum, S* picked, const T* L, const Id* target, std::int64_t n,
                            std::int64_t cw, std::int64_t col0) {
    detail::cpu::softmax_stats(mx, sum, picked, L, target, n, cw, col0);
  }
  /// sum[r] *= exp(mx[r] - global_mx[r]): a shard's sum of exps against the global max.
  template <class S>
  static void softmax_stats_rescale(S* sum, const S* mx, const S* global_mx, std::int64_t n) {
    detail::cpu::softmax_stats_rescale(sum, mx, global_mx, n);
  }
  /// lse[r] = global_mx[r] + log(sum[r]); returns sum_r (lse[r] - picked[r]).
  template <class S>
  static double cross_entropy_loss(S* lse, const S* global_mx, const S* sum, const S* picked,
                                   std::int64_t n) {
    return detail::cpu::cross_entropy_loss(lse, global_mx, sum, picked, n);
  }
  /// In place on a chunk: L[r, j] = (exp(L[r, j] - lse[r]) - [j == target[r] - col0]) grad_scale.
  template <class T, class S, std::integral Id>
  static void cross_entropy_grad(T* L, const S* lse, const Id* target, std::int64_t n,
                                 std::int64_t cw, std::int64_t col0, S grad_scale) {
    detail::cpu::cross_entropy_grad(L, lse, target, n, cw, col0, grad_scale);
  }

  // --- decoding's next-token scores (next_token.hpp; nn/generate.hpp) ---------------------
  // A row of logits L[rows, cols] holds this rank's vocabulary rows from row0, of which the
  // first `real` are tokens; the padding columns are never read.

  /// mx[r] = the largest real logit of row r (-inf without real columns).
  template <class T>
  static void next_token_max(float* mx, const T* L, std::int64_t rows, std::int64_t cols,
                             std::int64_t real) {
    detail::cpu::next_token_max(mx, L, rows, cols, real);
  }
  /// sum[r] = sum over row r's real columns of exp(L - mx[r]), in double.
  template <class T>
  static void next_token_sum_exp(double* sum, const T* L, const float* mx, std::int64_t rows,
                                 std::int64_t cols, std::int64_t real) {
    detail::cpu::next_token_sum_exp(sum, L, mx, rows, cols, real);
  }
  /// out[r, c] (float, the real columns) = L[r, c], or its log-probability (L - mx[r]) -
  /// lse[r] when mx and lse are given (the whole vocabulary's, through the tensor axis); then,
  /// unless seen is null, transformers' repetition penalty on row r's distinct seen token ids
  /// seen[seen_start[r], seen_start[r + 1]). out may be L when T is float.
  template <class T>
  static void next_token_scores(float* out, const T* L, const float* mx, const float* lse,
                                const std::int32_t* seen, const std::int64_t* seen_start,
                                float penalty, std::int64_t rows, std::int64_t cols,
                                std::int64_t row0, std::int64_t real) {
    detail::cpu::next_token_scores(out, L, mx, lse, seen, seen_start, penalty, rows, cols, row0,
                                   real);
  }
  /// score[r, 0:k], token[r, 0:k] = the k best real columns of row r of S[rows, cols] plus
  /// base[r] (base may be null), best first: the larger score, then the smaller token
  /// (row0 + column); a row with fewer than k real columns ends in (-inf, -1).
  template <std::integral Id>
  static void next_token_top_k(float* score, Id* token, const float* S, const float* base,
                               std::int64_t rows, std::int64_t cols, std::int64_t row0,
                               std::int64_t real, std::int64_t k) {
    detail::cpu::next_token_top_k(score, token, S, base, rows, cols, row0, real, k);
  }

  // --- attention (attention.hpp) ---------------------------------------------------------

  /// Causal ALiBi attention for one micro-batch, all local heads.
  /// qkv[B*T, 3*Hl] laid out per head as (head, {q,k,v}, hd); ctx[B*T, Hl]; probs[B, nh, T, T].
  /// pos[B*T] is each key's ALiBi position, valid[B*T] whether it may be attended; a query with
  /// no valid key (left padding) attends uniformly to every key, as the fully masked softmax
  /// row of an additive-mask implementation does.
  /// pos and slopes are S: T, or float for 16-bit T.
  template <class T, class S>
  static void attention_forward(T* ctx, T* probs, const T* qkv, const S* pos,
                                const std::uint8_t* valid, const S* slopes, std::int64_t B,
                                std::int64_t Tn, std::int64_t nh, std::int64_t hd) {
    detail::cpu::attention_forward(ctx, probs, qkv, pos, valid, slopes, B, Tn, nh, hd);
  }
  /// The probabilities of attention_forward alone: the same values bit for bit, so that a
  /// backward can recompute them instead of keeping them.
  template <class T, class S>
  static void attention_probs(T* probs, const T* qkv, const S* pos, const std::uint8_t* valid,
                              const S* slopes, std::int64_t B, std::int64_t Tn, std::int64_t nh,
                              std::int64_t hd) {
    detail::cpu::attention_probs(probs, qkv, pos, valid, slopes, B, Tn, nh, hd);
  }
  // dqkv[B*T, 3*Hl] = attention backward of dctx[B*T, Hl]; scratch holds B*nh*T*T elements (dS per
  // head)
  template <class T>
  static void attention_backward(T* dqkv, const T* dctx, const T* qkv, const T* probs,
                                 const std::uint8_t* valid, T* scratch, std::int64_t B,
                                 std::int64_t Tn, std::int64_t nh, std::int64_t hd) {
    detail::cpu::attention_backward(dqkv, dctx, qkv, probs, valid, scratch, B, Tn, nh, hd);
  }

  /// Decoding (backend/cpu/decode_attention.hpp): k, v[B, nh, cap, hd] at positions
  /// [t0, t0 + S) = the keys and values of qkv[B*S, 3*Hl]; and ctx[B, Hl] = attention of
  /// each row's new query (qkv[B, 3*Hl]) to its cached keys [0, len) (pos, valid [B, cap];
  /// scores [B, nh, cap] scratch).
  template <class T>
  static void kv_store(T* k, T* v, const T* qkv, std::int64_t B, std::int64_t S, std::int64_t nh,
                       std::int64_t hd, std::int64_t cap, std::int64_t t0) {
    detail::cpu_kv_store(k, v, qkv, B, S, nh, hd, cap, t0);
  }
  /// dst[r, :, 0:len, :] = src[index[r], :, 0:len, :] of caches [B, nh, cap, hd] (index[B]
  /// on the device; dst and src distinct): the beams' rows of a KV cache.
  template <class T, std::integral Id>
  static void kv_gather(T* dst, const T* src, const Id* index, std::int64_t B, std::int64_t nh,
                        std::int64_t cap, std::int64_t hd, std::int64_t len) {
    detail::cpu_kv_gather(dst, src, index, B, nh, cap, hd, len);
  }
  template <class T, class S>
  static void decode_attention(T* ctx, S* scores, const T* qkv, const T* k, const T* v,
                               const S* pos, const std::uint8_t* valid, const S* slopes,
                               std::int64_t B, std::int64_t nh, std::int64_t hd, std::int64_t cap,
                               std::int64_t len) {
    detail::cpu_decode_attention(ctx, scores, qkv, k, v, pos, valid, slopes, B, nh, hd, cap, len);
  }

  /// Fused attention (backend/cpu/flash_attention.hpp): attention_forward's ctx without
  /// its probabilities; lse[B, nh, T] keeps each query's log-sum-exp for the backward.
  template <class T, class S>
  static void flash_attention_forward(T* ctx, S* lse, const T* qkv, const S* pos,
                                      const std::uint8_t* valid, const S* slopes, std::int64_t B,
                                      std::int64_t Tn, std::int64_t nh, std::int64_t hd) {
    detail::flash_attention_forward(ctx, lse, qkv, pos, valid, slopes, B, Tn, nh, hd);
  }
  /// attention_backward from the forward's ctx and lse (probabilities made again per tile);
  /// delta[B, nh, T] is scratch.
  template <class T, class S>
  static void flash_attention_backward(T* dqkv, const T* dctx, const T* ctx, const T* qkv,
                                       const S* lse, const S* pos, const std::uint8_t* valid,
                                       const S* slopes, S* delta, std::int64_t B, std::int64_t Tn,
                                       std::int64_t nh, std::int64_t hd) {
    detail::flash_attention_backward(dqkv, dctx, ctx, qkv, lse, pos, valid, slopes, delta, B, Tn,
                                     nh, hd);
  }
};

}  // namespace seqpar::inline v0

#pragma once
// Ops<Cuda>: backend/cpu/ops.hpp's op set on the GPU, queued on the calling thread's stream. The
// kernel ops are defined in impl/ops.hpp, in every kernel unit or once under
// SEQPAR_SEPARATE_COMPILATION (core/separate_compilation.hpp).

#include "seqpar/core/separate_compilation.hpp"

#if defined(SEQPAR_CUDA_BACKEND)

#include <cuda_runtime.h>

#include <concepts>
#include <cstdint>
#include <utility>

#include "seqpar/backend/cuda/context.hpp"
#include "seqpar/backend/cuda/device.hpp"
#include "seqpar/backend/cuda/error.hpp"
#include "seqpar/backend/cuda/numeric.hpp"
#include "seqpar/backend/device.hpp"
#include "seqpar/backend/kernels.hpp"
#include "seqpar/config/units.hpp"

namespace seqpar::inline v0 {

template <>
struct Ops<Cuda> {
  /// Logits of the chunked LM head held at once (nn/lm_head.hpp; config/units.hpp).
  static constexpr std::int64_t logits_chunk_bytes = cuda_logits_budget;

  // --- host <-> device ---------------------------------------------------------------

  /// dev[0..n) = host[0..n), queued on the thread's stream (host may be reused at return).
  template <class U>
  static void upload(U* dev, const U* host, std::int64_t n) {
    if (n <= 0) return;
    SEQPAR_CUDA_CHECK(cudaMemcpyAsync(dev, host, sizeof(U) * static_cast<std::size_t>(n),
                                      cudaMemcpyHostToDevice, CudaContext::current().stream()));
  }
  /// host[0..n) = dev[0..n) once every op queued before has run (waits for the stream).
  template <class U>
  static void download(U* host, const U* dev, std::int64_t n) {
    if (n <= 0) return;
    CudaContext& ctx = CudaContext::current();
    SEQPAR_CUDA_CHECK(cudaMemcpyAsync(host, dev, sizeof(U) * static_cast<std::size_t>(n),
                                      cudaMemcpyDeviceToHost, ctx.stream()));
    ctx.synchronize();
  }
  /// Waits for every op this thread queued; throws if one of them failed.
  static void synchronize() { CudaContext::current().synchronize(); }

  // --- copies behind the computation (the contract of Ops<Cpu>) ----------------------

  /// A CUDA event (timing off), made when first recorded; a never-recorded one has
  /// happened. Movable, not copyable; destroyed with the object.
  class Event {
   public:
    Event() = default;
    Event(Event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
    Event& operator=(Event&& o) noexcept {
      std::swap(e_, o.e_);
      return *this;
    }
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
    ~Event() {
      if (e_) (void)cudaEventDestroy(e_);
    }
    cudaEvent_t get() const { return e_; }
    cudaEvent_t make() {
      if (!e_) SEQPAR_CUDA_CHECK(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming));
      return e_;
    }

   private:
    cudaEvent_t e_ = nullptr;
  };
  /// e marks the ops queued so far on the thread's stream.
  static void record(Event& e) {
    SEQPAR_CUDA_CHECK(cudaEventRecord(e.make(), CudaContext::current().stream()));
  }
  /// host[0..n) = dev[0..n) on the copy stream once `ready` has happened (the ops queued
  /// after it on the thread's stream go on meanwhile); `done` marks the copy's end. host
  /// should be pinned (PinnedHostAllocator): pageable memory makes the copy synchronous.
  template <class U>
  static void download_after(U* host, const U* dev, std::int64_t n, const Event& ready,
                             Event& done) {
    if (n <= 0) return;
    const cudaStream_t copies = CudaContext::current().copy_stream();
    if (ready.get()) SEQPAR_CUDA_CHECK(cudaStreamWaitEvent(copies, ready.get(), 0));
    SEQPAR_CUDA_CHECK(cudaMemcpyAsync(host, dev, sizeof(U) * static_cast<std::size_t>(n),
                                      cudaMemcpyDeviceToHost, copies));
    SEQPAR_CUDA_CHECK(cudaEventRecord(done.make(), copies));
  }
  /// Returns once e has happened (a copy's data is in host memory); throws on a failure.
  static void wait(Event& e) {
    if (e.get()) SEQPAR_CUDA_CHECK(cudaEventSynchronize(e.get()));
  }
  /// The ops queued after this on the thread's stream wait for e (the host does not).
  static void stream_wait(const Event& e) {
    if (e.get())
      SEQPAR_CUDA_CHECK(cudaStreamWaitEvent(CudaContext::current().stream(), e.get(), 0));
  }

  // --- GEMM ---------------------------------------------------------------------------

  /// C[M,N] = alpha * op(A) op(B) + beta * C, row-major, as Ops<Cpu>::gemm; beta == 0
  /// never reads C. fp32 accumulation; fp32 operands use TF32 only where the thread's
  /// context allows it. C may be float for bf16 or fp16 operands: a sum over many
  /// products kept in fp32 (the LM head's dh over its vocabulary chunks).
  template <CudaScalar T, detail::GemmOutputFor<T> Out>
  static void gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, T alpha,
                   const T* A, std::int64_t lda, const T* B, std::int64_t ldb, T beta, Out* C,
                   std::int64_t ldc);

  /// `batch` GEMMs of gemm's shape; product i reads A + i sA, B + i sB, writes C + i sC.
  template <CudaScalar T>
  static void gemm_batched(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K,
                           T alpha, const T* A, std::int64_t lda, std::int64_t sA, const T* B,
                           std::int64_t ldb, std::int64_t sB, T beta, T* C, std::int64_t ldc,
                           std::int64_t sC, std::int64_t batch);

  // --- linear layers ------------------------------------------------------------------

  // y[N, out] = x[N, in] W[out, in]^T (+ b[out])
  template <CudaScalar T>
  static void linear_forward(T* y, const T* x, const T* w, const T* b, std::int64_t n,
                             std::int64_t in, std::int64_t out) {
    gemm<T>(false, true, n, out, in, T(1.0f), x, in, w, in, T(0.0f), y, out);
    if (b) add_bias(y, b, n, out);
  }

  // dx[N, in] (=|+=) dy[N, out] W[out, in];  dW[out, in] += dy^T x;  db[out] += colsum(dy)
  template <CudaScalar T>
  static void linear_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const T* w,
                              std::int64_t n, std::int64_t in, std::int64_t out,
                              bool accumulate_dx = false) {
    if (dx)
      gemm<T>(false, false, n, in, out, T(1.0f), dy, out, w, in, T(accumulate_dx ? 1.0f : 0.0f), dx,
              in);
    gemm<T>(true, false, out, in, n, T(1.0f), dy, out, x, in, T(1.0f), dw, in);
    if (db) column_sum(db, dy, n, out);
  }

  template <CudaScalar T>
  static void add_bias(T* y, const T* b, std::int64_t n, std::int64_t d);

  // acc[d] += sum over rows of y[n, d]  (deterministic: fixed-order partial sums)
  template <CudaScalar T>
  static void column_sum(T* acc, const T* y, std::int64_t n, std::int64_t d);

  // y[n, d] += b[d] + r[n, d]
  template <CudaScalar T>
  static void add_bias_residual(T* y, const T* b, const T* r, std::int64_t n, std::int64_t d);

  // --- layernorm, GELU, embedding -------------------------------------------------------

  /// y[n, d] = layernorm(x) * w + b; mean[n] and rstd[n] kept for the backward, as S:
  /// the storage type (as on the CPU) or float (recommended for bf16 and fp16).
  template <CudaScalar T, CudaScalar S>
  static void layernorm_forward(T* y, S* mean, S* rstd, const T* x, const T* w, const T* b,
                                std::int64_t n, std::int64_t d, double eps);

  // dx[n, d] += layernorm'(dy); dw[d] += sum dy * xhat; db[d] += sum dy  (deterministic)
  template <CudaScalar T, CudaScalar S>
  static void layernorm_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const S* mean,
                                 const S* rstd, const T* w, std::int64_t n, std::int64_t d);

  template <CudaScalar T>
  static void gelu_forward(T* y, const T* x, std::int64_t n);

  // dx[i] = dy[i] * gelu'(x[i]); dx may alias dy
  template <CudaScalar T>
  static void gelu_backward(T* dx, const T* dy, const T* x, std::int64_t n);

  // y[n, d] = table[ids[n] - row0, :] for ids inside [row0, row0 + rows), else 0
  template <CudaScalar T, std::integral Id>
  static void embedding_forward(T* y, const Id* ids, const T* table, std::int64_t n, std::int64_t d,
                                std::int64_t row0, std::int64_t rows);

  // dtable[ids[n] - row0, :] += dy[n, :] in token order, without atomics (reproducible;
  // for float the same bits as Ops<Cpu>)
  template <CudaScalar T, std::integral Id>
  static void embedding_backward(T* dtable, const Id* ids, const T* dy, std::int64_t n,
                                 std::int64_t d, std::int64_t row0, std::int64_t rows);

  // --- vectors ----------------------------------------------------------------------------

  // y[i] += x[i] (x may have another type: a 16-bit term added to a float sum)
  template <CudaScalar T, CudaScalar U>
  static void add(T* y, const U* x, std::int64_t n);
  template <CudaScalar T>
  static void scale(T* y, T s, std::int64_t n);
  template <CudaScalar T>
  static void copy(T* y, const T* x, std::int64_t n) {
    if (n <= 0) return;
    SEQPAR_CUDA_CHECK(cudaMemcpyAsync(y, x, sizeof(T) * static_cast<std::size_t>(n),
                                      cudaMemcpyDeviceToDevice, CudaContext::current().stream()));
  }
  template <CudaScalar T>
  static void fill(T* y, T v, std::int64_t n);
  /// Sum of squares as a double on the host (waits for the stream); fixed-order reduction.
  template <CudaScalar T>
  static double sum_squares(const T* x, std::int64_t n);
  /// acc[0] += the sum of squares of x, each segment's terms times its weight; acc in
  /// device memory: a unit's tensors summed in one pass and the norm read once. Fixed-order
  /// reduction; nothing waits.
  template <CudaScalar T>
  static void sum_squares_accumulate(double* acc, const T* x,
                                     const kernels::Segments<double>& weight);
  /// y[i] = x[i] rounded to To (float <-> bf16 / fp16 copies of weights and gradients).
  template <CudaScalar To, CudaScalar From>
  static void convert(To* y, const From* x, std::int64_t n);

  // --- optimizer ----------------------------------------------------------------------------

  // AdamW on decay.size() elements, each segment with its decay flag, in one launch (the
  // body of backend/kernels.hpp, in float).
  template <CudaScalar T>
  static void adamw(T* p, const T* g, T* m, T* v, const kernels::Segments<bool>& decay,
                    const kernels::AdamCoeffs& c);

  /// Mixed-precision AdamW in one launch over every segment of `decay`: fp32 master
  /// weights and moments, gradient g (bf16, fp16 or float) times grad_factor (1 / loss
  /// scale); the updated master weight is rounded into weight[i], the working copy the
  /// model computes with (skipped when weight is null).
  template <CudaScalar W, CudaScalar G>
  static void adamw_mixed(float* master, W* weight, const G* g, float* m, float* v,
                          const kernels::Segments<bool>& decay, const kernels::AdamCoeffs& c,
                          float grad_factor = 1.0f);

  // --- attention ----------------------------------------------------------------------------

  /// Causal ALiBi attention for one micro-batch, all local heads, as Ops<Cpu>:
  /// qkv[B*T, 3*Hl] laid out per head as (head, {q,k,v}, hd); ctx[B*T, Hl]; probs[B, nh, T, T].
  /// pos[B*T] (each key's ALiBi position) and slopes[nh] are S: the storage type or float
  /// (bf16 holds integers exactly only up to 256). valid[B*T]: the key may be attended; a
  /// query with no valid key attends uniformly to every key.
  template <CudaScalar T, CudaScalar S>
  static void attention_forward(T* ctx, T* probs, const T* qkv, const S* pos,
                                const std::uint8_t* valid, const S* slopes, std::int64_t B,
                                std::int64_t Tn, std::int64_t nh, std::int64_t hd);

  /// The probabilities of attention_forward alone, bit for bit (for a backward that
  /// recomputes them instead of keeping them).
  template <CudaScalar T, CudaScalar S>
  static void attention_probs(T* probs, const T* qkv, const S* pos, const std::uint8_t* valid,
                              const S* slopes, std::int64_t B, std::int64_t Tn, std::int64_t nh,
                              std::int64_t hd);

  // dqkv[B*T, 3*Hl] = attention backward of dctx[B*T, Hl]; scratch holds B*nh*T*T elements
  template <CudaScalar T>
  static void attention_backward(T* dqkv, const T* dctx, const T* qkv, const T* probs,
                                 const std::uint8_t* valid, T* scratch, std::int64_t B,
                                 std::int64_t Tn, std::int64_t nh, std::int64_t hd);

  /// Fused attention (backend/cuda/flash_attention.hpp), as Ops<Cpu>: attention_forward's
  /// ctx without the probabilities; lse[B, nh, T] (float) keeps each query's log-sum-exp.
  /// head_dim at most 128.
  template <CudaScalar T, CudaScalar S>
  static void flash_attention_forward(T* ctx, float* lse, const T* qkv, const S* pos,
                                      const std::uint8_t* valid, const S* slopes, std::int64_t B,
                                      std::int64_t Tn, std::int64_t nh, std::int64_t hd);
  /// attention_backward from the forward's ctx and lse; delta[B, nh, T] (float) is scratch.
  template <CudaScalar T, CudaScalar S>
  static void flash_attention_backward(T* dqkv, const T* dctx, const T* ctx, const T* qkv,
                                       const float* lse, const S* pos, const std::uint8_t* valid,
                                       const S* slopes, float* delta, std::int64_t B,
                                       std::int64_t Tn, std::int64_t nh, std::int64_t hd);
  /// Decoding, as Ops<Cpu> (backend/cuda/decode_attention.hpp): k, v[B, nh, cap, hd] at
  /// positions [t0, t0 + S) = the keys and values of qkv[B*S, 3*Hl]; and ctx[B, Hl] =
  /// attention of each row's new query (qkv[B, 3*Hl]) to its cached keys [0, len) (pos,
  /// valid [B, cap], pos and slopes S as in attention_forward; scores [B, nh, cap] scratch).
  template <CudaScalar T>
  static void kv_store(T* k, T* v, const T* qkv, std::int64_t B, std::int64_t S, std::int64_t nh,
                       std::int64_t hd, std::int64_t cap, std::int64_t t0);
  /// dst[r, :, 0:len, :] = src[index[r], :, 0:len, :] of caches [B, nh, cap, hd], as Ops<Cpu>.
  template <CudaScalar T, std::integral Id>
  static void kv_gather(T* dst, const T* src, const Id* index, std::int64_t B, std::int64_t nh,
                        std::int64_t cap, std::int64_t hd, std::int64_t len);
  template <CudaScalar T, CudaScalar S>
  static void decode_attention(T* ctx, float* scores, const T* qkv, const T* k, const T* v,
                               const S* pos, const std::uint8_t* valid, const S* slopes,
                               std::int64_t B, std::int64_t nh, std::int64_t hd, std::int64_t cap,
                               std::int64_t len);

  // --- decoding's next-token scores, as Ops<Cpu> (backend/cuda/next_token.hpp) --------------
  // A row of logits L[rows, cols] holds this rank's vocabulary rows from row0, of which the
  // first `real` are tokens; the padding columns are never read.

  /// mx[r] = the largest real logit of row r (-inf without real columns).
  template <CudaScalar T>
  static void next_token_max(float* mx, const T* L, std::int64_t rows, std::int64_t cols,
                             std::int64_t real);
  /// sum[r] = sum over row r's real columns of exp(L - mx[r]), in double.
  template <CudaScalar T>
  static void next_token_sum_exp(double* sum, const T* L, const float* mx, std::int64_t rows,
                                 std::int64_t cols, std::int64_t real);
  /// out[r, c] (float, the real columns) = L[r, c], or its log-probability (L - mx[r]) -
  /// lse[r] when mx and lse are given; then, unless seen is null, the repetition penalty on
  /// row r's distinct seen token ids seen[seen_start[r], seen_start[r + 1]). out may be L
  /// when T is float.
  template <CudaScalar T>
  static void next_token_scores(float* out, const T* L, const float* mx, const float* lse,
                                const std::int32_t* seen, const std::int64_t* seen_start,
                                float penalty, std::int64_t rows, std::int64_t cols,
                                std::int64_t row0, std::int64_t real);
  /// score[r, 0:k], token[r, 0:k] = the k best real columns of row r of S plus base[r] (base
  /// may be null), best first: the larger score, then the smaller token (row0 + column); a
  /// row with fewer than k real columns ends in (-inf, -1). k passes over each row.
  template <std::integral Id>
  static void next_token_top_k(float* score, Id* token, const float* S, const float* base,
                               std::int64_t rows, std::int64_t cols, std::int64_t row0,
                               std::int64_t real, std::int64_t k);

  // --- rows and the chunked cross-entropy ------------------------------------------------------

  // dst[r, :] = src[index[r], :] for r < n
  template <CudaScalar T, std::integral Id>
  static void gather_rows(T* dst, const T* src, const Id* index, std::int64_t n, std::int64_t d);
  // dst[index[r], :] = src[r, :] for r < n (indices distinct)
  template <CudaScalar T, std::integral Id>
  static void scatter_rows(T* dst, const T* src, const Id* index, std::int64_t n, std::int64_t d);

  /// One vocabulary chunk L[n, cw] (local columns [col0, col0 + cw)) of an online softmax:
  /// mx[r] = max(mx[r], max_j L[r, j]); sum[r] = sum[r] exp(old mx - mx) + sum_j exp(L - mx);
  /// picked[r] = L[r, target[r] - col0] when that column is in the chunk.
  template <CudaScalar T, CudaScalar S, std::integral Id>
  static void softmax_stats(S* mx, S* sum, S* picked, const T* L, const Id* target, std::int64_t n,
                            std::int64_t cw, std::int64_t col0);
  /// sum[r] *= exp(mx[r] - global_mx[r]): a shard's sum of exps against the global max.
  template <CudaScalar S>
  static void softmax_stats_rescale(S* sum, const S* mx, const S* global_mx, std::int64_t n);
  /// lse[r] = global_mx[r] + log(sum[r]); returns sum_r (lse[r] - picked[r]) on the host.
  template <CudaScalar S>
  static double cross_entropy_loss(S* lse, const S* global_mx, const S* sum, const S* picked,
                                   std::int64_t n);
  /// In place on a chunk: L[r, j] = (exp(L[r, j] - lse[r]) - [j == target[r] - col0]) grad_scale.
  template <CudaScalar T, CudaScalar S, std::integral Id>
  static void cross_entropy_grad(T* L, const S* lse, const Id* target, std::int64_t n,
                                 std::int64_t cw, std::int64_t col0, float grad_scale);
};

}  // namespace seqpar::inline v0

// The ops that launch kernels, defined where this unit compiles them.
#if !defined(SEQPAR_SEPARATE_COMPILATION)
#include "seqpar/backend/cuda/impl/ops.hpp"
#endif

#endif  // SEQPAR_CUDA_BACKEND

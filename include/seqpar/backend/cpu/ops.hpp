#pragma once
// Ops<Cpu>: the op set on host memory. GEMMs through Eigen; row- and element-wise loops
// over the shared bodies of backend/kernels.hpp. Compiled for AVX2 + FMA, float GEMMs take
// the packed kernel of sgemm_avx2.hpp and (except under nvcc) the float loops run eight
// lanes at a time on F32x8 (simd_avx2.hpp). Every op is templated on the scalar so that
// gradient checks run it in double. Matrices are row-major. The device
// is the host: upload, download and synchronize are plain copies and a no-op, so that
// code written once for every device (nn/, the trainer) runs here unchanged.

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "seqpar/backend/cpu/decode_attention.hpp"
#include "seqpar/backend/device.hpp"
#include "seqpar/backend/kernels.hpp"
#if defined(__AVX2__) && defined(__FMA__)
#include "seqpar/backend/cpu/sgemm_avx2.hpp"
#define SEQPAR_CPU_AVX2 1
#else
#define SEQPAR_CPU_AVX2 0
#endif
// The eight-lane loops run the shared __host__ __device__ bodies on F32x8, a type nvcc does
// not accept in them: in translation units that nvcc compiles these loops stay scalar.
#if SEQPAR_CPU_AVX2 && !defined(__CUDACC__)
#include "seqpar/backend/cpu/simd_avx2.hpp"
#define SEQPAR_CPU_SIMD 1
#else
#define SEQPAR_CPU_SIMD 0
#endif

namespace seqpar::inline v0 {

namespace detail {
template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using MatMap = Eigen::Map<RowMat<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T>
using ConstMatMap = Eigen::Map<const RowMat<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
}  // namespace detail

template <>
struct Ops<Cpu> {
  /// Logits of the chunked LM head held at once (nn/lm_head.hpp): a chunk that stays in cache.
  static constexpr std::int64_t logits_chunk_bytes = std::int64_t{32} << 20;
  /// Element-wise loops shorter than this run on one thread.
  static constexpr std::int64_t parallel_min_elements = std::int64_t{1} << 16;

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

  /// C[M,N] = alpha * op(A) op(B) + beta * C, with op(A) [M,K] and op(B) [K,N];
  /// A is [M,K] (or [K,M] when ta), B is [K,N] (or [N,K] when tb); ld* are row strides.
  template <class T>
  static void gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, T alpha, const T* A,
                   std::int64_t lda, const T* B, std::int64_t ldb, T beta, T* C, std::int64_t ldc) {
    using detail::ConstMatMap;
    using detail::MatMap;
#if SEQPAR_CPU_AVX2
    if constexpr (std::is_same_v<T, float>) {
      if (M > 0 && N > 0 && K > 0) return detail::sgemm::gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    }
#endif
    MatMap<T> c(C, M, N, Eigen::OuterStride<>(ldc));
    if (beta == T(0)) {
      c.setZero();
    } else if (beta != T(1)) {
      c *= beta;
    }
    if (M == 0 || N == 0 || K == 0) return;
    const auto a = ta ? ConstMatMap<T>(A, K, M, Eigen::OuterStride<>(lda))
                      : ConstMatMap<T>(A, M, K, Eigen::OuterStride<>(lda));
    const auto b = tb ? ConstMatMap<T>(B, N, K, Eigen::OuterStride<>(ldb))
                      : ConstMatMap<T>(B, K, N, Eigen::OuterStride<>(ldb));
    if (!ta && !tb) c.noalias() += alpha * (a * b);
    if (!ta && tb) c.noalias() += alpha * (a * b.transpose());
    if (ta && !tb) c.noalias() += alpha * (a.transpose() * b);
    if (ta && tb) c.noalias() += alpha * (a.transpose() * b.transpose());
  }

  // y[N, out] = x[N, in] W[out, in]^T (+ b[out])
  template <class T>
  static void linear_forward(T* y, const T* x, const T* w, const T* b, std::int64_t n, std::int64_t in,
                             std::int64_t out) {
    gemm<T>(false, true, n, out, in, T(1), x, in, w, in, T(0), y, out);
    if (b) add_bias(y, b, n, out);
  }

  // dx[N, in] (=|+=) dy[N, out] W[out, in];  dW[out, in] += dy^T x;  db[out] += colsum(dy)
  template <class T>
  static void linear_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const T* w, std::int64_t n,
                              std::int64_t in, std::int64_t out, bool accumulate_dx = false) {
    if (dx) gemm<T>(false, false, n, in, out, T(1), dy, out, w, in, accumulate_dx ? T(1) : T(0), dx, in);
    gemm<T>(true, false, out, in, n, T(1), dy, out, x, in, T(1), dw, in);
    if (db) column_sum(db, dy, n, out);
  }

  template <class T>
  static void add_bias(T* y, const T* b, std::int64_t n, std::int64_t d) {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < d; ++j) y[i * d + j] += b[j];
  }

  // acc[d] += sum over rows of y[n, d]
  template <class T>
  static void column_sum(T* acc, const T* y, std::int64_t n, std::int64_t d) {
    for_columns(d, n * d, [&](std::int64_t j0, std::int64_t j1) {
      std::int64_t i = 0;
      for (; i + 4 <= n; i += 4) {  // four rows a pass: a quarter of the loads and stores of acc
        const T *y0 = y + i * d, *y1 = y0 + d, *y2 = y1 + d, *y3 = y2 + d;
        for (std::int64_t j = j0; j < j1; ++j) acc[j] += (y0[j] + y1[j]) + (y2[j] + y3[j]);
      }
      for (; i < n; ++i)
        for (std::int64_t j = j0; j < j1; ++j) acc[j] += y[i * d + j];
    });
  }

  // y[n, d] += b[d] + r[n, d]  (the bias of a row-parallel linear, added once after its reduction)
  template <class T>
  static void add_bias_residual(T* y, const T* b, const T* r, std::int64_t n, std::int64_t d) {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < d; ++j) y[i * d + j] += b[j] + r[i * d + j];
  }

  // y[n, d] = layernorm(x) * w + b; keeps mean[n] and rstd[n] for the backward
  template <class T>
  static void layernorm_forward(T* y, T* mean, T* rstd, const T* x, const T* w, const T* b, std::int64_t n,
                                std::int64_t d, double eps) {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      const T* xi = x + i * d;
      T m = 0;
      for (std::int64_t j = 0; j < d; ++j) m += xi[j];
      m /= T(d);
      T var = 0;
      for (std::int64_t j = 0; j < d; ++j) var += (xi[j] - m) * (xi[j] - m);
      var /= T(d);
      const T r = T(1) / std::sqrt(var + T(eps));
      T* yi = y + i * d;
      for (std::int64_t j = 0; j < d; ++j) yi[j] = (xi[j] - m) * r * w[j] + b[j];
      mean[i] = m;
      rstd[i] = r;
    }
  }

  // dx[n, d] += layernorm'(dy); dw[d] += sum dy * xhat; db[d] += sum dy
  template <class T>
  static void layernorm_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const T* mean, const T* rstd,
                                 const T* w, std::int64_t n, std::int64_t d) {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      const T* dyi = dy + i * d;
      const T* xi = x + i * d;
      T mean_dxhat = 0, mean_dxhat_xhat = 0;
      for (std::int64_t j = 0; j < d; ++j) {
        const T xhat = (xi[j] - mean[i]) * rstd[i];
        const T dxhat = dyi[j] * w[j];
        mean_dxhat += dxhat;
        mean_dxhat_xhat += dxhat * xhat;
      }
      mean_dxhat /= T(d);
      mean_dxhat_xhat /= T(d);
      T* dxi = dx + i * d;
      for (std::int64_t j = 0; j < d; ++j) {
        const T xhat = (xi[j] - mean[i]) * rstd[i];
        dxi[j] += (dyi[j] * w[j] - mean_dxhat - xhat * mean_dxhat_xhat) * rstd[i];
      }
    }
    // Parameter gradients: each column summed in row order by one thread (reproducible).
    for_columns(d, n * d, [&](std::int64_t j0, std::int64_t j1) {
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = j0; j < j1; ++j) {
          const T xhat = (x[i * d + j] - mean[i]) * rstd[i];
          dw[j] += dy[i * d + j] * xhat;
          db[j] += dy[i * d + j];
        }
    });
  }

  template <class T>
  static void gelu_forward(T* y, const T* x, std::int64_t n) {
    for_lanes<T>(n, [&](auto lane, std::int64_t i) {
      using V = decltype(lane);
      store_lanes(y + i, kernels::gelu(load_lanes<V>(x + i)));
    });
  }

  // dx[i] = dy[i] * gelu'(x[i]); dx may alias dy
  template <class T>
  static void gelu_backward(T* dx, const T* dy, const T* x, std::int64_t n) {
    for_lanes<T>(n, [&](auto lane, std::int64_t i) {
      using V = decltype(lane);
      store_lanes(dx + i, load_lanes<V>(dy + i) * kernels::gelu_grad(load_lanes<V>(x + i)));
    });
  }

  // y[n, d] = table[ids[n] - row0, :] for ids inside [row0, row0 + rows), else 0
  template <class T, class Id>
  static void embedding_forward(T* y, const Id* ids, const T* table, std::int64_t n, std::int64_t d,
                                std::int64_t row0, std::int64_t rows) {
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t r = static_cast<std::int64_t>(ids[i]) - row0;
      T* yi = y + i * d;
      if (r >= 0 && r < rows)
        std::copy(table + r * d, table + (r + 1) * d, yi);
      else
        std::fill(yi, yi + d, T(0));
    }
  }

  // dtable[ids[n] - row0, :] += dy[n, :] (in token order: reproducible)
  template <class T, class Id>
  static void embedding_backward(T* dtable, const Id* ids, const T* dy, std::int64_t n, std::int64_t d,
                                 std::int64_t row0, std::int64_t rows) {
    for_columns(d, n * d, [&](std::int64_t j0, std::int64_t j1) {
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t r = static_cast<std::int64_t>(ids[i]) - row0;
        if (r < 0 || r >= rows) continue;
        for (std::int64_t j = j0; j < j1; ++j) dtable[r * d + j] += dy[i * d + j];
      }
    });
  }

  // y[i] += x[i] (x may have another type: a 16-bit term added to a float sum)
  template <class T, class U>
  static void add(T* y, const U* x, std::int64_t n) {
#pragma omp parallel for schedule(static) if (n > parallel_min_elements)
    for (std::int64_t i = 0; i < n; ++i) y[i] += static_cast<T>(x[i]);
  }
  template <class T>
  static void scale(T* y, T s, std::int64_t n) {
#pragma omp parallel for schedule(static) if (n > parallel_min_elements)
    for (std::int64_t i = 0; i < n; ++i) y[i] *= s;
  }
  template <class T>
  static void copy(T* y, const T* x, std::int64_t n) {
    std::copy(x, x + n, y);
  }
  template <class T>
  static void fill(T* y, T v, std::int64_t n) {
#pragma omp parallel for schedule(static) if (n > parallel_min_elements)
    for (std::int64_t i = 0; i < n; ++i) y[i] = v;
  }
  /// In double; blocks of a fixed size summed in order, then the block sums in order: the
  /// same result for any number of threads.
  template <class T>
  static double sum_squares(const T* x, std::int64_t n) {
    constexpr std::int64_t block = std::int64_t{1} << 14;
    const std::int64_t blocks = (n + block - 1) / block;
    std::vector<double> part(static_cast<std::size_t>(blocks));
#pragma omp parallel for schedule(static) if (n > parallel_min_elements)
    for (std::int64_t b = 0; b < blocks; ++b) {
      double s = 0;
      for (std::int64_t i = b * block; i < std::min(n, (b + 1) * block); ++i)
        s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
      part[static_cast<std::size_t>(b)] = s;
    }
    double s = 0;
    for (double p : part) s += p;
    return s;
  }
  /// acc[0] += the sum over the segments of weight.value[k] x the sum of squares of x over
  /// segment k; acc is device memory (a gradient norm summed over many tensors, read once).
  template <class T>
  static void sum_squares_accumulate(double* acc, const T* x, const kernels::Segments<double>& weight) {
    for (int k = 0; k < weight.count; ++k) {
      const std::int64_t b = weight.begin(k);
      acc[0] += weight.value[k] * sum_squares(x + b, weight.end[k] - b);
    }
  }
  /// y[i] = x[i] converted to To.
  template <class To, class From>
  static void convert(To* y, const From* x, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) y[i] = static_cast<To>(x[i]);
  }

  // AdamW on decay.size() elements, each segment with its decay flag.
  template <class T>
  static void adamw(T* p, const T* g, T* m, T* v, const kernels::Segments<bool>& decay,
                    const kernels::AdamCoeffs& c) {
    for (int k = 0; k < decay.count; ++k) {
      const std::int64_t b = decay.begin(k);
      T *pk = p + b, *mk = m + b, *vk = v + b;
      const T* gk = g + b;
      const bool dk = decay.value[k];
      for_lanes<T>(decay.end[k] - b, [&](auto lane, std::int64_t i) {
        using V = decltype(lane);
        V pv = load_lanes<V>(pk + i), mv = load_lanes<V>(mk + i), vv = load_lanes<V>(vk + i);
        kernels::adamw(pv, load_lanes<V>(gk + i), mv, vv, c, dk);
        store_lanes(pk + i, pv);
        store_lanes(mk + i, mv);
        store_lanes(vk + i, vv);
      });
    }
  }

  /// AdamW on master weights and moments of type M, gradient g times grad_factor, each
  /// segment of `decay` with its flag; the updated master weight is rounded into
  /// weight[i] (skipped when weight is null).
  template <class M, class W, class G>
  static void adamw_mixed(M* master, W* weight, const G* g, M* m, M* v, const kernels::Segments<bool>& decay,
                          const kernels::AdamCoeffs& c, M grad_factor = M(1)) {
    for (int k = 0; k < decay.count; ++k) {
      const bool dk = decay.value[k];
#pragma omp parallel for schedule(static)
      for (std::int64_t i = decay.begin(k); i < decay.end[k]; ++i) {
        kernels::adamw(master[i], static_cast<M>(g[i]) * grad_factor, m[i], v[i], c, dk);
        if (weight) weight[i] = static_cast<W>(master[i]);
      }
    }
  }

  // --- rows and the chunked cross-entropy (nn/lm_head.hpp) ------------------------------

  // dst[r, :] = src[index[r], :] for r < n
  template <class T, std::integral Id>
  static void gather_rows(T* dst, const T* src, const Id* index, std::int64_t n, std::int64_t d) {
    for (std::int64_t r = 0; r < n; ++r) std::copy_n(src + static_cast<std::int64_t>(index[r]) * d, d, dst + r * d);
  }
  // dst[index[r], :] = src[r, :] for r < n (indices distinct)
  template <class T, std::integral Id>
  static void scatter_rows(T* dst, const T* src, const Id* index, std::int64_t n, std::int64_t d) {
    for (std::int64_t r = 0; r < n; ++r) std::copy_n(src + r * d, d, dst + static_cast<std::int64_t>(index[r]) * d);
  }

  /// One vocabulary chunk L[n, cw] (local columns [col0, col0 + cw)) of an online softmax:
  /// mx[r] = max(mx[r], max_j L[r, j]); sum[r] = sum[r] exp(old mx - mx) + sum_j exp(L - mx);
  /// picked[r] = L[r, target[r] - col0] when that column is in the chunk.
  template <class T, class S, std::integral Id>
  static void softmax_stats(S* mx, S* sum, S* picked, const T* L, const Id* target, std::int64_t n,
                            std::int64_t cw, std::int64_t col0) {
    static_assert(std::is_same_v<T, S>, "the CPU keeps logits and their statistics in one type");
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < n; ++r) {
      const T* l = L + r * cw;
      const S m = std::max(mx[r], row_max(l, cw));
      const S s = sum[r] * std::exp(mx[r] - m) + exp_shifted<T>(nullptr, l, cw, m, S(1));
      mx[r] = m;
      sum[r] = s;
      const std::int64_t t = static_cast<std::int64_t>(target[r]) - col0;
      if (t >= 0 && t < cw) picked[r] = static_cast<S>(l[t]);
    }
  }
  /// sum[r] *= exp(mx[r] - global_mx[r]): a shard's sum of exps against the global max.
  template <class S>
  static void softmax_stats_rescale(S* sum, const S* mx, const S* global_mx, std::int64_t n) {
    for (std::int64_t r = 0; r < n; ++r) sum[r] = sum[r] * std::exp(mx[r] - global_mx[r]);
  }
  /// lse[r] = global_mx[r] + log(sum[r]); returns sum_r (lse[r] - picked[r]).
  template <class S>
  static double cross_entropy_loss(S* lse, const S* global_mx, const S* sum, const S* picked, std::int64_t n) {
    double out = 0;
    for (std::int64_t r = 0; r < n; ++r) {
      lse[r] = global_mx[r] + std::log(sum[r]);
      out += static_cast<double>(lse[r] - picked[r]);
    }
    return out;
  }
  /// In place on a chunk: L[r, j] = (exp(L[r, j] - lse[r]) - [j == target[r] - col0]) grad_scale.
  template <class T, class S, std::integral Id>
  static void cross_entropy_grad(T* L, const S* lse, const Id* target, std::int64_t n, std::int64_t cw,
                                 std::int64_t col0, S grad_scale) {
    const T gs = static_cast<T>(grad_scale);
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < n; ++r) {
      T* l = L + r * cw;
      exp_shifted(l, l, cw, static_cast<T>(lse[r]), gs);
      const std::int64_t t = static_cast<std::int64_t>(target[r]) - col0;
      if (t >= 0 && t < cw) l[t] -= gs;
    }
  }

  /// Causal ALiBi attention for one micro-batch, all local heads.
  /// qkv[B*T, 3*Hl] laid out per head as (head, {q,k,v}, hd); ctx[B*T, Hl]; probs[B, nh, T, T].
  /// pos[B*T] is each key's ALiBi position, valid[B*T] whether it may be attended; a query with
  /// no valid key (left padding) attends uniformly to every key, as the fully masked softmax
  /// row of an additive-mask implementation does.
  template <class T>
  static void attention_forward(T* ctx, T* probs, const T* qkv, const T* pos, const std::uint8_t* valid,
                                const T* slopes, std::int64_t B, std::int64_t Tn, std::int64_t nh,
                                std::int64_t hd) {
    const std::int64_t ld = 3 * nh * hd, Hl = nh * hd;
#pragma omp parallel for collapse(2) schedule(static)
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < nh; ++h) {
        const T* P = head_probs(probs, qkv, pos, valid, slopes, b, h, Tn, nh, hd);
        // ctx[T, hd] = P v (while P is still in cache)
        gemm<T>(false, false, Tn, hd, Tn, T(1), P, Tn, qkv + b * Tn * ld + h * 3 * hd + 2 * hd, ld, T(0),
                ctx + b * Tn * Hl + h * hd, Hl);
      }
  }

  /// The probabilities of attention_forward alone: the same values bit for bit, so that a
  /// backward can recompute them instead of keeping them.
  template <class T>
  static void attention_probs(T* probs, const T* qkv, const T* pos, const std::uint8_t* valid, const T* slopes,
                              std::int64_t B, std::int64_t Tn, std::int64_t nh, std::int64_t hd) {
#pragma omp parallel for collapse(2) schedule(static)
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < nh; ++h) head_probs(probs, qkv, pos, valid, slopes, b, h, Tn, nh, hd);
  }

  // dqkv[B*T, 3*Hl] = attention backward of dctx[B*T, Hl]; scratch holds B*nh*T*T elements (dS per head)
  template <class T>
  static void attention_backward(T* dqkv, const T* dctx, const T* qkv, const T* probs, const std::uint8_t* valid,
                                 T* scratch, std::int64_t B, std::int64_t Tn, std::int64_t nh, std::int64_t hd) {
    const std::int64_t ld = 3 * nh * hd, Hl = nh * hd;
    const T scale = T(1) / std::sqrt(T(hd));
#pragma omp parallel for collapse(2) schedule(static)
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < nh; ++h) {
        const T* q = qkv + b * Tn * ld + h * 3 * hd;
        const T* k = q + hd;
        const T* v = q + 2 * hd;
        T* dq = dqkv + b * Tn * ld + h * 3 * hd;
        T* dk = dq + hd;
        T* dv = dq + 2 * hd;
        const T* P = probs + (b * nh + h) * Tn * Tn;
        const T* dc = dctx + b * Tn * Hl + h * hd;
        T* dS = scratch + (b * nh + h) * Tn * Tn;
        // dP[T, T] = dctx v^T;  dv[T, hd] = P^T dctx
        gemm<T>(false, true, Tn, Tn, hd, T(1), dc, Hl, v, ld, T(0), dS, Tn);
        gemm<T>(true, false, Tn, hd, Tn, T(1), P, Tn, dc, Hl, T(0), dv, ld);
        const std::uint8_t* vb = valid + b * Tn;
        bool any_valid = false;
        for (std::int64_t i = 0; i < Tn; ++i) {
          any_valid = any_valid || vb[i];
          // A query with no valid key attended uniformly to all keys through an additive mask;
          // its gradient flows through every score, as autograd passes it through the mask.
          const std::int64_t keys = any_valid ? i + 1 : Tn;
          T* row = dS + i * Tn;
          const T* p = P + i * Tn;
          T dot = 0;
          for (std::int64_t j = 0; j < keys; ++j) dot += p[j] * row[j];
          for (std::int64_t j = 0; j < keys; ++j) row[j] = p[j] * (row[j] - dot);
          std::fill(row + keys, row + Tn, T(0));
        }
        // dq = scale dS k;  dk = scale dS^T q
        gemm<T>(false, false, Tn, hd, Tn, scale, dS, Tn, k, ld, T(0), dq, ld);
        gemm<T>(true, false, Tn, hd, Tn, scale, dS, Tn, q, ld, T(0), dk, ld);
      }
  }

  /// Decoding (backend/cpu/decode_attention.hpp): k, v[B, nh, cap, hd] at positions
  /// [t0, t0 + S) = the keys and values of qkv[B*S, 3*Hl]; and ctx[B, Hl] = attention of
  /// each row's new query (qkv[B, 3*Hl]) to its cached keys [0, len) (pos, valid [B, cap];
  /// scores [B, nh, cap] scratch).
  template <class T>
  static void kv_store(T* k, T* v, const T* qkv, std::int64_t B, std::int64_t S, std::int64_t nh, std::int64_t hd,
                       std::int64_t cap, std::int64_t t0) {
    detail::cpu_kv_store(k, v, qkv, B, S, nh, hd, cap, t0);
  }
  template <class T>
  static void decode_attention(T* ctx, T* scores, const T* qkv, const T* k, const T* v, const T* pos,
                               const std::uint8_t* valid, const T* slopes, std::int64_t B, std::int64_t nh,
                               std::int64_t hd, std::int64_t cap, std::int64_t len) {
    detail::cpu_decode_attention(ctx, scores, qkv, k, v, pos, valid, slopes, B, nh, hd, cap, len);
  }

 private:
  // Head (b, h) of attention_probs: P[T, T] = scale q k^T, then + alibi, masked, softmax
  // per row; returns P.
  template <class T>
  static T* head_probs(T* probs, const T* qkv, const T* pos, const std::uint8_t* valid, const T* slopes,
                       std::int64_t b, std::int64_t h, std::int64_t Tn, std::int64_t nh, std::int64_t hd) {
    const std::int64_t ld = 3 * nh * hd;
    const T scale = T(1) / std::sqrt(T(hd));
    const T* q = qkv + b * Tn * ld + h * 3 * hd;
    T* P = probs + (b * nh + h) * Tn * Tn;
    gemm<T>(false, true, Tn, Tn, hd, scale, q, ld, q + hd, ld, T(0), P, Tn);
    const T* pb = pos + b * Tn;
    const std::uint8_t* vb = valid + b * Tn;
    for (std::int64_t i = 0; i < Tn; ++i) softmax_row(P + i * Tn, pb, vb, slopes[h], i, Tn);
    return P;
  }

  // body(j0, j1) over a split of the columns [0, d) into one contiguous range per thread
  // (whole cache lines), in parallel when the work (elements touched) is worth it. A sum
  // down a column stays on one thread, in row order: the results do not depend on the
  // number of threads.
  template <class Body>
  static void for_columns(std::int64_t d, std::int64_t work, Body&& body) {
#pragma omp parallel if (work > parallel_min_elements)
    {
      int threads = 1, me = 0;
#ifdef _OPENMP
      threads = omp_get_num_threads();
      me = omp_get_thread_num();
#endif
      const std::int64_t lines = (d + 15) / 16;  // 16 floats to a cache line
      const std::int64_t j0 = std::min(d, lines * me / threads * 16), j1 = std::min(d, lines * (me + 1) / threads * 16);
      if (j0 < j1) body(j0, j1);
    }
  }

  // body(lane, i) for i in [0, n): lane is a detail::F32x8 on blocks of eight floats where
  // AVX2 is on, a T for the rest (and for every element of other types); in parallel above
  // parallel_min_elements.
  template <class T, class Body>
  static void for_lanes(std::int64_t n, Body&& body) {
    std::int64_t done = 0;
#if SEQPAR_CPU_SIMD
    if constexpr (std::is_same_v<T, float>) {
      done = n / detail::F32x8::lanes * detail::F32x8::lanes;
#pragma omp parallel for schedule(static) if (done > parallel_min_elements)
      for (std::int64_t i = 0; i < done; i += detail::F32x8::lanes) body(detail::F32x8{}, i);
    }
#endif
#pragma omp parallel for schedule(static) if (n - done > parallel_min_elements)
    for (std::int64_t i = done; i < n; ++i) body(T{}, i);
  }
  template <class V, class T>
  static V load_lanes(const T* p) {
    if constexpr (std::is_same_v<V, T>) return *p;
    else return V::load(p);
  }
  template <class V, class T>
  static void store_lanes(T* p, V v) {
    if constexpr (std::is_same_v<V, T>) *p = v;
    else v.store(p);
  }

  // max of x[0, n), -inf when n == 0
  template <class T>
  static T row_max(const T* x, std::int64_t n) {
    T m = -std::numeric_limits<T>::infinity();
    std::int64_t j = 0;
#if SEQPAR_CPU_SIMD
    if constexpr (std::is_same_v<T, float>) {
      detail::F32x8 acc(m);
      for (; j + detail::F32x8::lanes <= n; j += detail::F32x8::lanes) acc = max(acc, detail::F32x8::load(x + j));
      m = acc.max();
    }
#endif
    for (; j < n; ++j) m = std::max(m, x[j]);
    return m;
  }
  // y[j] = exp(x[j] - shift) * scale for j < n (y may be x; null: not stored); returns the
  // sum of exp(x[j] - shift)
  template <class T>
  static T exp_shifted(T* y, const T* x, std::int64_t n, T shift, T scale) {
    T sum = 0;
    std::int64_t j = 0;
#if SEQPAR_CPU_SIMD
    if constexpr (std::is_same_v<T, float>) {
      using detail::F32x8;
      F32x8 acc(0.0f);
      for (; j + F32x8::lanes <= n; j += F32x8::lanes) {
        const F32x8 e = exp_of(F32x8::load(x + j) - F32x8(shift));
        acc += e;
        if (y) (e * F32x8(scale)).store(y + j);
      }
      sum = acc.sum();
    }
#endif
    for (; j < n; ++j) {
      const T e = std::exp(x[j] - shift);
      sum += e;
      if (y) y[j] = e * scale;
    }
    return sum;
  }

  // One score row of query i: add alibi, mask keys j > i and invalid ones, softmax in place.
  template <class T>
  static void softmax_row(T* s, const T* pos, const std::uint8_t* valid, T slope, std::int64_t i, std::int64_t Tn) {
    constexpr T masked = -std::numeric_limits<T>::infinity();
    T mx = masked;
    for (std::int64_t j = 0; j <= i; ++j) {
      s[j] = valid[j] ? s[j] + slope * pos[j] : masked;
      mx = std::max(mx, s[j]);
    }
    if (mx == masked) {
      std::fill(s, s + Tn, T(1) / T(Tn));
      return;
    }
    const T inv = T(1) / exp_shifted(s, s, i + 1, mx, T(1));  // exp(-inf) = 0 for the masked keys
    for (std::int64_t j = 0; j <= i; ++j) s[j] *= inv;
    std::fill(s + i + 1, s + Tn, T(0));
  }
};

}  // namespace seqpar::inline v0

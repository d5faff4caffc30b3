#pragma once
// Ops<Cpu>: the op set on host memory. GEMMs through Eigen; row- and element-wise
// loops over the shared bodies of backend/kernels.hpp. Every op is templated on the
// scalar so that gradient checks run it in double. Matrices are row-major. The device
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

#include "seqpar/backend/device.hpp"
#include "seqpar/backend/kernels.hpp"

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
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < d; ++j) acc[j] += y[i * d + j];
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
    // Parameter gradients in row order on one thread: the sums stay reproducible.
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < d; ++j) {
        const T xhat = (x[i * d + j] - mean[i]) * rstd[i];
        dw[j] += dy[i * d + j] * xhat;
        db[j] += dy[i * d + j];
      }
  }

  template <class T>
  static void gelu_forward(T* y, const T* x, std::int64_t n) {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) y[i] = kernels::gelu(x[i]);
  }

  // dx[i] = dy[i] * gelu'(x[i]); dx may alias dy
  template <class T>
  static void gelu_backward(T* dx, const T* dy, const T* x, std::int64_t n) {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) dx[i] = dy[i] * kernels::gelu_grad(x[i]);
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
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t r = static_cast<std::int64_t>(ids[i]) - row0;
      if (r < 0 || r >= rows) continue;
      for (std::int64_t j = 0; j < d; ++j) dtable[r * d + j] += dy[i * d + j];
    }
  }

  // y[i] += x[i] (x may have another type: a 16-bit term added to a float sum)
  template <class T, class U>
  static void add(T* y, const U* x, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) y[i] += static_cast<T>(x[i]);
  }
  template <class T>
  static void scale(T* y, T s, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) y[i] *= s;
  }
  template <class T>
  static void copy(T* y, const T* x, std::int64_t n) {
    std::copy(x, x + n, y);
  }
  template <class T>
  static void fill(T* y, T v, std::int64_t n) {
    std::fill(y, y + n, v);
  }
  template <class T>
  static double sum_squares(const T* x, std::int64_t n) {
    double s = 0;
    for (std::int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    return s;
  }
  /// acc[0] += weight * sum of squares of x; acc is device memory (a gradient norm summed
  /// over many tensors, read once).
  template <class T>
  static void sum_squares_accumulate(double* acc, const T* x, std::int64_t n, double weight) {
    acc[0] += weight * sum_squares(x, n);
  }
  /// y[i] = x[i] converted to To.
  template <class To, class From>
  static void convert(To* y, const From* x, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) y[i] = static_cast<To>(x[i]);
  }

  // AdamW on n elements with one decay flag.
  template <class T>
  static void adamw(T* p, const T* g, T* m, T* v, std::int64_t n, const kernels::AdamCoeffs& c, bool decay) {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) kernels::adamw(p[i], g[i], m[i], v[i], c, decay);
  }

  /// AdamW on master weights and moments of type M, gradient g times grad_factor; the
  /// updated master weight is rounded into weight[i] (skipped when weight is null).
  template <class M, class W, class G>
  static void adamw_mixed(M* master, W* weight, const G* g, M* m, M* v, std::int64_t n,
                          const kernels::AdamCoeffs& c, bool decay, M grad_factor = M(1)) {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      kernels::adamw(master[i], static_cast<M>(g[i]) * grad_factor, m[i], v[i], c, decay);
      if (weight) weight[i] = static_cast<W>(master[i]);
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
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < n; ++r) {
      const T* l = L + r * cw;
      S m = mx[r];
      for (std::int64_t j = 0; j < cw; ++j) m = std::max(m, static_cast<S>(l[j]));
      S s = sum[r] * std::exp(mx[r] - m);
      for (std::int64_t j = 0; j < cw; ++j) s += std::exp(static_cast<S>(l[j]) - m);
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
      const T z = static_cast<T>(lse[r]);
      for (std::int64_t j = 0; j < cw; ++j) l[j] = std::exp(l[j] - z) * gs;
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
    const T scale = T(1) / std::sqrt(T(hd));
#pragma omp parallel for collapse(2) schedule(static)
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < nh; ++h) {
        const T* q = qkv + b * Tn * ld + h * 3 * hd;
        const T* k = q + hd;
        const T* v = q + 2 * hd;
        T* P = probs + (b * nh + h) * Tn * Tn;
        // P[T, T] = scale * q k^T, then + alibi, masked, softmax per row
        gemm<T>(false, true, Tn, Tn, hd, scale, q, ld, k, ld, T(0), P, Tn);
        const T* pb = pos + b * Tn;
        const std::uint8_t* vb = valid + b * Tn;
        for (std::int64_t i = 0; i < Tn; ++i) softmax_row(P + i * Tn, pb, vb, slopes[h], i, Tn);
        // ctx[T, hd] = P v
        gemm<T>(false, false, Tn, hd, Tn, T(1), P, Tn, v, ld, T(0), ctx + b * Tn * Hl + h * hd, Hl);
      }
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

 private:
  // One score row of query i: add alibi, mask keys j > i and invalid ones, softmax in place.
  template <class T>
  static void softmax_row(T* s, const T* pos, const std::uint8_t* valid, T slope, std::int64_t i, std::int64_t Tn) {
    T mx = -std::numeric_limits<T>::infinity();
    for (std::int64_t j = 0; j <= i; ++j)
      if (valid[j]) {
        s[j] += slope * pos[j];
        mx = std::max(mx, s[j]);
      }
    if (mx == -std::numeric_limits<T>::infinity()) {
      std::fill(s, s + Tn, T(1) / T(Tn));
      return;
    }
    T sum = 0;
    for (std::int64_t j = 0; j < Tn; ++j) {
      const T e = (j <= i && valid[j]) ? std::exp(s[j] - mx) : T(0);
      s[j] = e;
      sum += e;
    }
    const T inv = T(1) / sum;
    for (std::int64_t j = 0; j < Tn; ++j) s[j] *= inv;
  }
};

}  // namespace seqpar::inline v0

#pragma once
// GEMM and the linear layers on the CPU: float GEMMs take the packed AVX2 + FMA kernel of
// sgemm_avx2.hpp when the translation unit is compiled for it, every other scalar (double
// in gradient checks) and build goes through Eigen. Matrices are row-major. Part of Ops<Cpu>.

#ifndef SEQPAR_BACKEND_CPU_OPS_INCLUDED
#error "backend/cpu/gemm.hpp is a part of Ops<Cpu>: include seqpar/backend/cpu/ops.hpp instead"
#endif

#include <cstdint>
#include <type_traits>

#include "seqpar/backend/cpu/elementwise.hpp"
#include "seqpar/backend/cpu/loops.hpp"
#include "seqpar/backend/cpu/reduce.hpp"
#if SEQPAR_CPU_AVX2
#include "seqpar/backend/cpu/sgemm_avx2.hpp"
#endif

namespace seqpar::inline v0::detail::cpu {

// C[M,N] = alpha * op(A) op(B) + beta * C, with op(A) [M,K] and op(B) [K,N];
// A is [M,K] (or [K,M] when ta), B is [K,N] (or [N,K] when tb); ld* are row strides.
template <class T>
void gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, T alpha, const T* A,
          std::int64_t lda, const T* B, std::int64_t ldb, T beta, T* C, std::int64_t ldc) {
#if SEQPAR_CPU_AVX2
  // Float never reaches Eigen: a unit that trains in float does not instantiate (and
  // optimise) Eigen's GEMM kernels it would never call.
  if constexpr (std::is_same_v<T, float>) {
    if (M > 0 && N > 0 && K > 0)
      return sgemm::gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    for (std::int64_t i = 0; i < M; ++i)  // an empty product: C = beta C
      for (std::int64_t j = 0; j < N; ++j)
        C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    return;
  } else
#endif
  {
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
}

// y[N, out] = x[N, in] W[out, in]^T (+ b[out])
template <class T>
void linear_forward(T* y, const T* x, const T* w, const T* b, std::int64_t n, std::int64_t in,
                    std::int64_t out) {
  gemm<T>(false, true, n, out, in, T(1), x, in, w, in, T(0), y, out);
  if (b) add_bias(y, b, n, out);
}

// dx[N, in] (=|+=) dy[N, out] W[out, in];  dW[out, in] += dy^T x;  db[out] += colsum(dy)
template <class T>
void linear_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const T* w, std::int64_t n,
                     std::int64_t in, std::int64_t out, bool accumulate_dx) {
  if (dx)
    gemm<T>(false, false, n, in, out, T(1), dy, out, w, in, accumulate_dx ? T(1) : T(0), dx, in);
  gemm<T>(true, false, out, in, n, T(1), dy, out, x, in, T(1), dw, in);
  if (db) column_sum(db, dy, n, out);
}

}  // namespace seqpar::inline v0::detail::cpu

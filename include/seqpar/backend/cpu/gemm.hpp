#pragma once
// GEMM and the linear layers on the CPU (part of Ops<Cpu>), row-major; the code path is picked by
// operand type and the unit's own target flags (gemm_path() names it), 16-bit in float.

#ifndef SEQPAR_BACKEND_CPU_OPS_INCLUDED
#error "backend/cpu/gemm.hpp is a part of Ops<Cpu>: include seqpar/backend/cpu/ops.hpp instead"
#endif

#include <cstdint>
#include <type_traits>
#include <vector>

#include "seqpar/backend/cpu/elementwise.hpp"
#include "seqpar/backend/cpu/loops.hpp"
#include "seqpar/backend/cpu/reduce.hpp"
#if SEQPAR_CPU_AVX2
#include "seqpar/backend/cpu/sgemm_avx2.hpp"
#endif
#if SEQPAR_CPU_AVX2 && defined(__AVX512F__) && defined(__AVX512BF16__)
#include "seqpar/backend/cpu/bf16dot_avx512.hpp"
#define SEQPAR_CPU_BF16_DOT 1
#else
#define SEQPAR_CPU_BF16_DOT 0
#endif

namespace seqpar::inline v0::detail::cpu {

/// Which code runs GEMMs of storage type T in this translation unit.
template <class T>
constexpr const char* gemm_path() {
  if constexpr (std::is_same_v<T, Bf16Bits> && SEQPAR_CPU_BF16_DOT)
    return "bf16 dot products (AVX512_BF16)";
  else if constexpr ((std::is_same_v<T, float> || Half<T>)&&SEQPAR_CPU_AVX2)
    return Half<T> ? "widened to float, packed AVX2 + FMA kernel" : "packed AVX2 + FMA kernel";
  else if constexpr (Half<T>)
    return "widened to float, Eigen";
  else
    return "Eigen";
}

// C[M,N] = alpha * op(A) op(B) + beta * C through Eigen, for M, N, K >= 0.
template <class T>
void eigen_gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, T alpha,
                const T* A, std::int64_t lda, const T* B, std::int64_t ldb, T beta, T* C,
                std::int64_t ldc) {
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

// C[M,N] = alpha * op(A) op(B) + beta * C, with op(A) [M,K] and op(B) [K,N];
// A is [M,K] (or [K,M] when ta), B is [K,N] (or [N,K] when tb); ld* are row strides.
// C is T, or float for 16-bit operands (a sum kept in float over many products).
template <class T, class Out = T>
void gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, Wide<T> alpha,
          const T* A, std::int64_t lda, const T* B, std::int64_t ldb, Wide<T> beta, Out* C,
          std::int64_t ldc) {
  static_assert(std::is_same_v<Out, T> || (Half<T> && std::is_same_v<Out, float>),
                "Ops<Cpu>::gemm: C holds the operands' type, or float for 16-bit operands");
  if constexpr (std::is_same_v<T, float> || Half<T>) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {  // an empty product: C = beta C
      for (std::int64_t i = 0; i < M; ++i)
        for (std::int64_t j = 0; j < N; ++j) {
          Out& c = C[i * ldc + j];
          const float v = beta == 0.0f ? 0.0f : beta * static_cast<float>(c);
          if constexpr (std::is_same_v<Out, float>)
            c = v;
          else
            c = Out(v);
        }
      return;
    }
#if SEQPAR_CPU_BF16_DOT
    if constexpr (std::is_same_v<T, Bf16Bits>)
      return bf16dot::gemm<bf16dot::Avx512Dot>(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C,
                                               ldc);
    else
#endif
#if SEQPAR_CPU_AVX2
      // Float never reaches Eigen: a unit that trains in float does not instantiate (and
      // optimise) Eigen's GEMM kernels it would never call.
      return sgemm::gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#else
    if constexpr (std::is_same_v<T, float>) {
      return eigen_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    } else {
      // float copies of the operands (and of C), Eigen's float product, C rounded once
      std::vector<float> a(static_cast<std::size_t>(M * K)), b(static_cast<std::size_t>(K * N)),
          c(static_cast<std::size_t>(M * N));
      const std::int64_t ra = ta ? K : M, ca = ta ? M : K, rb = tb ? N : K, cb = tb ? K : N;
      for (std::int64_t i = 0; i < ra; ++i) convert_n(a.data() + i * ca, A + i * lda, ca);
      for (std::int64_t i = 0; i < rb; ++i) convert_n(b.data() + i * cb, B + i * ldb, cb);
      for (std::int64_t i = 0; i < M; ++i) convert_n(c.data() + i * N, C + i * ldc, N);
      eigen_gemm(ta, tb, M, N, K, alpha, a.data(), ca, b.data(), cb, beta, c.data(), N);
      for (std::int64_t i = 0; i < M; ++i) convert_n(C + i * ldc, c.data() + i * N, N);
    }
#endif
  } else {
    eigen_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
}

// y[N, out] = x[N, in] W[out, in]^T (+ b[out])
template <class T>
void linear_forward(T* y, const T* x, const T* w, const T* b, std::int64_t n, std::int64_t in,
                    std::int64_t out) {
  gemm<T>(false, true, n, out, in, Wide<T>(1), x, in, w, in, Wide<T>(0), y, out);
  if (b) add_bias(y, b, n, out);
}

// dx[N, in] (=|+=) dy[N, out] W[out, in];  dW[out, in] += dy^T x;  db[out] += colsum(dy)
template <class T>
void linear_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const T* w, std::int64_t n,
                     std::int64_t in, std::int64_t out, bool accumulate_dx) {
  if (dx)
    gemm<T>(false, false, n, in, out, Wide<T>(1), dy, out, w, in, Wide<T>(accumulate_dx ? 1 : 0),
            dx, in);
  gemm<T>(true, false, out, in, n, Wide<T>(1), dy, out, x, in, Wide<T>(1), dw, in);
  if (db) column_sum(db, dy, n, out);
}

}  // namespace seqpar::inline v0::detail::cpu

#pragma once
// Row-major GEMMs on cuBLAS, with the semantics of Ops<Cpu>::gemm:
// C[M,N] = alpha op(A) op(B) + beta C, ld* the row strides. bf16 and fp16 operands
// accumulate in fp32 (CUBLAS_COMPUTE_32F); fp32 stays fp32 unless the thread's context
// allows TF32. Compiled only in units that hold kernels (SEQPAR_CUDA_KERNELS).

#if defined(SEQPAR_CUDA_KERNELS)

#include <cublas_v2.h>

#include <climits>
#include <concepts>
#include <cstdint>

#include "seqpar/backend/cuda/context.hpp"
#include "seqpar/backend/cuda/error.hpp"
#include "seqpar/backend/cuda/numeric.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::inline v0::detail {

// C[M, N] = beta C for the K = 0 case (beta == 0 writes zeros and reads nothing, as BLAS).
template <class T>
__global__ void scale_matrix_kernel(T* c, std::int64_t rows, std::int64_t cols, std::int64_t ldc,
                                    std::int64_t stride, std::int64_t batch, float beta) {
  for (std::int64_t r = blockIdx.x; r < rows * batch; r += gridDim.x) {
    T* row = c + (r / rows) * stride + (r % rows) * ldc;
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      row[j] = beta == 0.0f ? from_float<T>(0.0f) : from_float<T>(beta * to_float(row[j]));
  }
}

inline int blas_int(std::int64_t v, const char* what) {
  SEQPAR_CHECK(v >= 0 && v <= INT_MAX, "CUDA gemm: ", what, " = ", v,
               " does not fit cuBLAS's 32-bit sizes");
  return static_cast<int>(v);
}

// `batch` products; operand i starts at A + i sA, B + i sB, C + i sC.
template <CudaScalar T, GemmOutputFor<T> Out = T>
void gemm_strided_batched(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K,
                          float alpha, const T* A, std::int64_t lda, std::int64_t sA, const T* B,
                          std::int64_t ldb, std::int64_t sB, float beta, Out* C, std::int64_t ldc,
                          std::int64_t sC, std::int64_t batch) {
  if (M == 0 || N == 0 || batch == 0) return;
  CudaContext& ctx = CudaContext::current();
  if (K == 0) {
    SEQPAR_LAUNCH(scale_matrix_kernel, grid_for_rows(M * batch), 256, 0, ctx.stream())
    (C, M, N, ldc, sC, batch, beta);
    SEQPAR_CUDA_CHECK_LAUNCH();
    return;
  }
  const cublasComputeType_t compute = std::same_as<T, float> && ctx.allow_tf32()
                                          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F;
  constexpr cudaDataType_t type = cuda_data_type<T>(), out_type = cuda_data_type<Out>();
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLAS gets the
  // operands swapped, each transposed exactly when the row-major one is.
  const cublasOperation_t op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int m = blas_int(N, "N"), n = blas_int(M, "M"), k = blas_int(K, "K");
  const int ld_b = blas_int(ldb, "ldb"), ld_a = blas_int(lda, "lda"), ld_c = blas_int(ldc, "ldc");
  if (batch == 1) {
    SEQPAR_CUBLAS_CHECK(cublasGemmEx(ctx.blas(), op_b, op_a, m, n, k, &alpha, B, type, ld_b, A,
                                     type, ld_a, &beta, C, out_type, ld_c, compute,
                                     CUBLAS_GEMM_DEFAULT));
  } else {
    SEQPAR_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        ctx.blas(), op_b, op_a, m, n, k, &alpha, B, type, ld_b, sB, A, type, ld_a, sA, &beta, C,
        out_type, ld_c, sC, blas_int(batch, "batch"), compute, CUBLAS_GEMM_DEFAULT));
  }
}

}  // namespace seqpar::inline v0::detail

#endif  // SEQPAR_CUDA_KERNELS

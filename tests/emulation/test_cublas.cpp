// cuBLAS on the emulated device against Eigen's column-major products, on random shapes, both
// transposes, odd leading dimensions, strided batches and every type pair seqpar uses; the
// refusals cuBLAS documents; and a wrong leading dimension or an operand past its allocation
// caught.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <Eigen/Core>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "emulation_test_util.hpp"

using namespace emu_test;

namespace {

using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;

template <class T>
cudaDataType_t type_of() {
  if constexpr (std::is_same_v<T, float>) return CUDA_R_32F;
  if constexpr (std::is_same_v<T, __half>) return CUDA_R_16F;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return CUDA_R_16BF;
}

// A column-major rows x cols operand with leading dimension ld (>= rows), random values
// exactly representable in T; the padding rows are NaN, which a correct product never reads.
template <class T>
std::vector<T> random_matrix(int rows, int cols, int ld, int batch, long long stride,
                             std::mt19937& rng) {
  std::normal_distribution<float> normal;
  std::vector<T> m(
      static_cast<std::size_t>((batch - 1) * stride + static_cast<long long>(ld) * cols),
      T(std::numeric_limits<float>::quiet_NaN()));
  for (int b = 0; b < batch; ++b)
    for (int j = 0; j < cols; ++j)
      for (int i = 0; i < rows; ++i)
        m[static_cast<std::size_t>(b * stride + j * ld + i)] = T(normal(rng));
  return m;
}

template <class T>
Mat as_matrix(const std::vector<T>& m, std::size_t base, int rows, int cols, int ld) {
  Mat out(rows, cols);
  for (int j = 0; j < cols; ++j)
    for (int i = 0; i < rows; ++i)
      out(i, j) = static_cast<float>(m[base + static_cast<std::size_t>(j) * ld + i]);
  return out;
}

struct Handle {
  cublasHandle_t h = nullptr;
  Handle() { REQUIRE(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS); }
  ~Handle() { (void)cublasDestroy(h); }
};

// One random strided-batched GEMM of operand type T and output type C, against Eigen in double;
// returns the largest error relative to the largest product entry.
template <class T, class C>
double check_random_gemm(std::mt19937& rng, Handle& handle, bool wrong_lda = false) {
  std::uniform_int_distribution<int> dim(1, 37), pad(0, 5), coin(0, 1);
  const int m = dim(rng), n = dim(rng), k = dim(rng), batch = 1 + coin(rng) * 2;
  const auto ta = coin(rng) ? CUBLAS_OP_T : CUBLAS_OP_N, tb = coin(rng) ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int a_rows = ta == CUBLAS_OP_N ? m : k, a_cols = ta == CUBLAS_OP_N ? k : m;
  const int b_rows = tb == CUBLAS_OP_N ? k : n, b_cols = tb == CUBLAS_OP_N ? n : k;
  const int lda = a_rows + pad(rng) + (wrong_lda ? 1 : 0), ldb = b_rows + pad(rng),
            ldc = m + pad(rng);
  const long long sa = static_cast<long long>(lda) * a_cols + pad(rng),
                  sb = static_cast<long long>(ldb) * b_cols,
                  sc = static_cast<long long>(ldc) * n + 3;
  const float alpha = 0.75f, beta = coin(rng) ? 0.0f : -0.5f;
  const auto A = random_matrix<T>(a_rows, a_cols, lda, batch, sa, rng);
  const auto B = random_matrix<T>(b_rows, b_cols, ldb, batch, sb, rng);
  auto Cm = random_matrix<C>(m, n, ldc, batch, sc, rng);
  if (beta == 0.0f)  // beta = 0 never reads C
    for (auto& x : Cm) x = C(std::numeric_limits<float>::quiet_NaN());
  DeviceArray<T> dA(A), dB(B);
  DeviceArray<C> dC(Cm);
  const int used_lda = wrong_lda ? lda - 1 : lda;  // valid, and wrong
  REQUIRE(cublasGemmStridedBatchedEx(handle.h, ta, tb, m, n, k, &alpha, dA.data(), type_of<T>(),
                                     used_lda, sa, dB.data(), type_of<T>(), ldb, sb, &beta,
                                     dC.data(), type_of<C>(), ldc, sc, batch, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
  const auto got = dC.download();
  double worst = 0;
  for (int b = 0; b < batch; ++b) {
    const Mat a = as_matrix(A, static_cast<std::size_t>(b * sa), a_rows, a_cols, lda);
    const Mat bm = as_matrix(B, static_cast<std::size_t>(b * sb), b_rows, b_cols, ldb);
    const Mat opa = ta == CUBLAS_OP_N ? a : Mat(a.transpose());
    const Mat opb = tb == CUBLAS_OP_N ? bm : Mat(bm.transpose());
    Mat want = alpha * (opa * opb);
    if (beta != 0.0f) want += beta * as_matrix(Cm, static_cast<std::size_t>(b * sc), m, n, ldc);
    const double scale = std::max(1.0, want.cwiseAbs().maxCoeff());
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        const double g = static_cast<float>(got[static_cast<std::size_t>(b * sc + j * ldc + i)]);
        worst = std::max(worst, std::isfinite(g) ? std::abs(g - want(i, j)) / scale
                                                 : std::numeric_limits<double>::infinity());
      }
  }
  return worst;
}

}  // namespace

TEST_CASE("cuBLAS GEMMs equal Eigen's on random shapes, transposes, leading dimensions, batches") {
  EmulatedDevice dev;
  Handle handle;
  std::mt19937 rng(42);
  for (int trial = 0; trial < 30; ++trial) {
    CAPTURE(trial);
    CHECK(check_random_gemm<float, float>(rng, handle) < 1e-6);
    CHECK(check_random_gemm<__nv_bfloat16, float>(rng, handle) < 1e-6);
    CHECK(check_random_gemm<__half, float>(rng, handle) < 1e-6);
    CHECK(check_random_gemm<__nv_bfloat16, __nv_bfloat16>(rng, handle) < 8e-3);  // C rounded
    CHECK(check_random_gemm<__half, __half>(rng, handle) < 1e-3);
  }
}

TEST_CASE("a wrong leading dimension gives products that the comparison catches") {
  EmulatedDevice dev;
  Handle handle;
  std::mt19937 rng(7);
  for (int trial = 0; trial < 5; ++trial)
    CHECK(check_random_gemm<float, float>(rng, handle, true) > 1e-2);
}

TEST_CASE("cuBLAS's refusals: leading dimensions, sizes, type pairs") {
  EmulatedDevice dev;
  Handle handle;
  DeviceArray<float> a(64), b(64), c(64);
  const float one = 1, zero = 0;
  const auto gemm = [&](cublasOperation_t ta, int m, int n, int k, int lda, int ldb, int ldc,
                        cudaDataType_t ct = CUDA_R_32F,
                        cublasComputeType_t compute = CUBLAS_COMPUTE_32F) {
    return cublasGemmEx(handle.h, ta, CUBLAS_OP_N, m, n, k, &one, a.data(), CUDA_R_32F, lda,
                        b.data(), CUDA_R_32F, ldb, &zero, c.data(), ct, ldc, compute,
                        CUBLAS_GEMM_DEFAULT);
  };
  CHECK(gemm(CUBLAS_OP_N, 4, 4, 4, 4, 4, 4) == CUBLAS_STATUS_SUCCESS);
  CHECK(gemm(CUBLAS_OP_N, 4, 4, 4, 3, 4, 4) == CUBLAS_STATUS_INVALID_VALUE);  // lda < m
  CHECK(gemm(CUBLAS_OP_T, 4, 4, 5, 4, 5, 4) == CUBLAS_STATUS_INVALID_VALUE);  // lda < k
  CHECK(gemm(CUBLAS_OP_N, 4, 4, 5, 4, 4, 4) == CUBLAS_STATUS_INVALID_VALUE);  // ldb < k
  CHECK(gemm(CUBLAS_OP_N, 5, 4, 4, 5, 4, 4) == CUBLAS_STATUS_INVALID_VALUE);  // ldc < m
  CHECK(gemm(CUBLAS_OP_N, -1, 4, 4, 4, 4, 4) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(gemm(CUBLAS_OP_N, 4, 4, 4, 4, 4, 4, CUDA_R_16F) == CUBLAS_STATUS_NOT_SUPPORTED);
  CHECK(gemm(CUBLAS_OP_N, 4, 4, 4, 4, 4, 4, CUDA_R_32F, CUBLAS_COMPUTE_16F) ==
        CUBLAS_STATUS_NOT_SUPPORTED);
  CHECK(gemm(CUBLAS_OP_N, 0, 4, 4, 1, 4, 1) == CUBLAS_STATUS_SUCCESS);  // nothing to do
  CHECK(EmulatedDevice::sync_error().empty());
}

TEST_CASE("an operand past its allocation fails as an illegal address, naming the operand") {
  EmulatedDevice dev;
  Handle handle;
  DeviceArray<float> a(16), b(15), c(16);
  const float one = 1, zero = 0;
  REQUIRE(cublasGemmEx(handle.h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, a.data(), CUDA_R_32F, 4,
                       b.data(), CUDA_R_32F, 4, &zero, c.data(), CUDA_R_32F, 4, CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
  const std::string error = EmulatedDevice::sync_error();
  CHECK(error.find("cudaErrorIllegalAddress") != std::string::npos);
  CHECK(error.find("operand B") != std::string::npos);
}

TEST_CASE("TF32 rounds the fp32 operands to 10 bits of mantissa") {
  EmulatedDevice dev;
  Handle handle;
  const float x = 1.0f + 0x1p-12f;  // not a TF32 value: rounds to 1
  DeviceArray<float> a(std::vector<float>{x}), b(std::vector<float>{x}), c(1);
  const float one = 1, zero = 0;
  for (const auto compute : {CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_TF32}) {
    REQUIRE(cublasGemmEx(handle.h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, a.data(), CUDA_R_32F, 1,
                         b.data(), CUDA_R_32F, 1, &zero, c.data(), CUDA_R_32F, 1, compute,
                         CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
    CHECK(c.download()[0] == (compute == CUBLAS_COMPUTE_32F ? x * x : 1.0f));
  }
}

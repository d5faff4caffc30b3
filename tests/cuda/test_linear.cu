// GEMM, linear layers, biases and column sums of Ops<Cuda> against Ops<Cpu> (in float on
// the same values), for float, bf16 and fp16 storage.
#include <doctest/doctest.h>

#include <limits>
#include <utility>
#include <vector>

#include "cpu_reference.hpp"
#include "cuda_test_util.hpp"

using namespace seqpar;
using namespace seqpar::test;
using O = Ops<Cuda>;

#define SEQPAR_STORAGE_TYPES float, __nv_bfloat16, __half

TEST_CASE_TEMPLATE("gemm matches Ops<Cpu>::gemm for every transpose, padded stride and beta", T,
                   SEQPAR_STORAGE_TYPES) {
  CudaArena arena;
  const std::int64_t M = 67, N = 45, K = 129;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (const float beta : {0.0f, 0.5f}) {
        CAPTURE(ta);
        CAPTURE(tb);
        CAPTURE(beta);
        const std::int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
        const auto a = random_values<T>(static_cast<std::size_t>((ta ? K : M) * lda), 1);
        const auto b = random_values<T>(static_cast<std::size_t>((tb ? N : K) * ldb), 2);
        auto c = random_values<T>(static_cast<std::size_t>(M * ldc), 3);
        // beta == 0 must not read C: NaN inside the product's window, finite padding.
        if (beta == 0.0f)
          for (std::int64_t i = 0; i < M; ++i)
            for (std::int64_t j = 0; j < N; ++j)
              c[i * ldc + j] = std::numeric_limits<float>::quiet_NaN();
        auto da = to_device<T>(arena, a), db = to_device<T>(arena, b), dc = to_device<T>(arena, c);
        O::gemm(ta != 0, tb != 0, M, N, K, T(0.75f), da.data(), lda, db.data(), ldb, T(beta),
                dc.data(), ldc);
        CpuRef::gemm(ta != 0, tb != 0, M, N, K, 0.75f, a.data(), lda, b.data(), ldb, beta, c.data(),
                     ldc);
        SEQPAR_CHECK_CLOSE(T, to_host(dc), c);
      }
}

TEST_CASE_TEMPLATE("gemm with K = 0 scales C by beta", T, SEQPAR_STORAGE_TYPES) {
  CudaArena arena;
  for (const float beta : {0.0f, 0.5f}) {
    auto c = random_values<T>(6 * 5, 4);
    auto dc = to_device<T>(arena, c);
    O::gemm(false, false, 6, 4, 0, T(1.0f), dc.data(), 1, dc.data(), 4, T(beta), dc.data(), 5);
    CpuRef::gemm(false, false, 6, 4, 0, 1.0f, c.data(), 1, c.data(), 4, beta, c.data(), 5);
    SEQPAR_CHECK_CLOSE(T, to_host(dc), c);
  }
}

TEST_CASE_TEMPLATE("16-bit gemm into a float C adds to it in fp32, never rounding to 16 bits", T,
                   __nv_bfloat16, __half) {
  // Four products summed into one float C with beta = 1, as the LM head sums dh over its
  // vocabulary chunks; the reference is Ops<Cpu> in float on the same (16-bit) values.
  CudaArena arena;
  const std::int64_t M = 67, N = 45, K = 129, ldc = N + 2;
  auto c = random_values<float>(static_cast<std::size_t>(M * ldc), 7);
  for (float& v : c) v += 1.0f / 3.0f;  // not a 16-bit value: a rounding would show
  DeviceBuffer<float> dc = to_device<float>(arena, c);
  for (int chunk = 0; chunk < 4; ++chunk) {
    const auto a = random_values<T>(static_cast<std::size_t>(M * K), 10 + chunk);
    const auto b = random_values<T>(static_cast<std::size_t>(N * K), 20 + chunk);
    auto da = to_device<T>(arena, a), db = to_device<T>(arena, b);
    O::gemm(false, true, M, N, K, T(1.0f), da.data(), K, db.data(), K, T(1.0f), dc.data(), ldc);
    CpuRef::gemm(false, true, M, N, K, 1.0f, a.data(), K, b.data(), K, 1.0f, c.data(), ldc);
  }
  const double err = rel_err(to_host(dc), c);
  INFO("rel err ", err);
  CHECK(err < 1e-5);  // fp32 sums in another order; a 16-bit rounding would be ~1e-3
  // K = 0: C scaled by beta, in float.
  O::gemm(false, true, M, N, 0, T(1.0f), static_cast<const T*>(nullptr), 1,
          static_cast<const T*>(nullptr), 1, T(0.5f), dc.data(), ldc);
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) c[i * ldc + j] *= 0.5f;
  CHECK(rel_err(to_host(dc), c) < 1e-5);
}

TEST_CASE("fp32 gemm of a large product stays at fp32 accuracy, and within TF32's when allowed") {
  CudaArena arena;
  const std::int64_t M = 256, N = 384, K = 1024;
  const auto a = random_values<float>(M * K, 5), b = random_values<float>(K * N, 6);
  std::vector<float> c(M * N);
  CpuRef::gemm(false, true, M, N, K, 1.0f, a.data(), K, b.data(), K, 0.0f, c.data(), N);
  auto da = to_device<float>(arena, a), db = to_device<float>(arena, b);
  DeviceBuffer<float> dc(arena, M * N, Memory::buffers);
  O::gemm(false, true, M, N, K, 1.0f, da.data(), K, db.data(), K, 0.0f, dc.data(), N);
  const double exact = rel_err(to_host(dc), c);
  CHECK(exact < 1e-6);
  CudaContext::current().set_allow_tf32(true);
  O::gemm(false, true, M, N, K, 1.0f, da.data(), K, db.data(), K, 0.0f, dc.data(), N);
  CudaContext::current().set_allow_tf32(false);
  const double tf32 = rel_err(to_host(dc), c);
  CHECK(tf32 < 5e-3);
}

TEST_CASE_TEMPLATE("gemm_batched matches a loop of Ops<Cpu>::gemm", T, SEQPAR_STORAGE_TYPES) {
  CudaArena arena;
  const std::int64_t M = 33, N = 20, K = 48, batch = 5;
  const std::int64_t sA = M * K + 7, sB = N * K + 3, sC = M * N + 11;
  const auto a = random_values<T>(static_cast<std::size_t>(sA * batch), 7);
  const auto b = random_values<T>(static_cast<std::size_t>(sB * batch), 8);
  auto c = random_values<T>(static_cast<std::size_t>(sC * batch), 9);
  auto da = to_device<T>(arena, a), db = to_device<T>(arena, b), dc = to_device<T>(arena, c);
  O::gemm_batched(true, true, M, N, K, T(1.5f), da.data(), M, sA, db.data(), K, sB, T(-1.0f),
                  dc.data(), N, sC, batch);
  for (std::int64_t i = 0; i < batch; ++i)
    CpuRef::gemm(true, true, M, N, K, 1.5f, a.data() + i * sA, M, b.data() + i * sB, K, -1.0f,
                 c.data() + i * sC, N);
  SEQPAR_CHECK_CLOSE(T, to_host(dc), c);
}

TEST_CASE_TEMPLATE("linear forward and backward match Ops<Cpu>, with and without bias and dx", T,
                   SEQPAR_STORAGE_TYPES) {
  CudaArena arena;
  const std::int64_t n = 40, in = 48, out = 72;
  const auto x = random_values<T>(n * in, 10), w = random_values<T>(out * in, 11, 0.2);
  const auto b = random_values<T>(out, 12), dy = random_values<T>(n * out, 13);
  auto dx_x = to_device<T>(arena, x), dx_w = to_device<T>(arena, w), dx_b = to_device<T>(arena, b);
  auto d_dy = to_device<T>(arena, dy);

  for (const bool with_bias : {true, false}) {
    CAPTURE(with_bias);
    std::vector<float> y(n * out);
    CpuRef::linear_forward(y.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, n, in,
                           out);
    DeviceBuffer<T> dy_out(arena, n * out, Memory::buffers);
    O::linear_forward(dy_out.data(), dx_x.data(), dx_w.data(), with_bias ? dx_b.data() : nullptr, n,
                      in, out);
    SEQPAR_CHECK_CLOSE(T, to_host(dy_out), y);
  }

  for (const bool accumulate : {false, true}) {
    for (const bool with_dx_db : {true, false}) {
      CAPTURE(accumulate);
      CAPTURE(with_dx_db);
      // Gradients accumulate into what is there.
      auto gx = random_values<T>(n * in, 14), gw = random_values<T>(out * in, 15),
           gb = random_values<T>(out, 16);
      auto d_gx = to_device<T>(arena, gx), d_gw = to_device<T>(arena, gw),
           d_gb = to_device<T>(arena, gb);
      CpuRef::linear_backward(with_dx_db ? gx.data() : nullptr, gw.data(),
                              with_dx_db ? gb.data() : nullptr, dy.data(), x.data(), w.data(), n,
                              in, out, accumulate);
      O::linear_backward(with_dx_db ? d_gx.data() : nullptr, d_gw.data(),
                         with_dx_db ? d_gb.data() : nullptr, d_dy.data(), dx_x.data(), dx_w.data(),
                         n, in, out, accumulate);
      SEQPAR_CHECK_CLOSE(T, to_host(d_gx), gx);
      SEQPAR_CHECK_CLOSE(T, to_host(d_gw), gw);
      SEQPAR_CHECK_CLOSE(T, to_host(d_gb), gb);
    }
  }
}

TEST_CASE_TEMPLATE("add_bias, add_bias_residual and column_sum match Ops<Cpu>", T,
                   SEQPAR_STORAGE_TYPES) {
  CudaArena arena;
  // Odd widths (not a multiple of the 32-column tile) and enough rows for many chunks.
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{300, 100}, {5000, 33}, {3, 1}};
  for (const auto& [n, d] : shapes) {
    CAPTURE(n);
    CAPTURE(d);
    auto y = random_values<T>(n * d, 20), r = random_values<T>(n * d, 21);
    const auto b = random_values<T>(d, 22);
    auto acc = random_values<T>(d, 23);
    auto d_y = to_device<T>(arena, y), d_r = to_device<T>(arena, r), d_b = to_device<T>(arena, b);
    auto d_acc = to_device<T>(arena, acc);

    O::column_sum(d_acc.data(), d_y.data(), n, d);
    CpuRef::column_sum(acc.data(), y.data(), n, d);
    SEQPAR_CHECK_CLOSE(T, to_host(d_acc), acc);

    O::add_bias(d_y.data(), d_b.data(), n, d);
    CpuRef::add_bias(y.data(), b.data(), n, d);
    SEQPAR_CHECK_CLOSE(T, to_host(d_y), y);

    O::add_bias_residual(d_y.data(), d_b.data(), d_r.data(), n, d);
    CpuRef::add_bias_residual(y.data(), b.data(), r.data(), n, d);
    SEQPAR_CHECK_CLOSE(T, to_host(d_y), y);
  }
}

TEST_CASE("column_sum and gemm give the same bits when run twice") {
  CudaArena arena;
  const std::int64_t n = 4099, d = 257;
  const auto y = random_values<float>(n * d, 24);
  auto d_y = to_device<float>(arena, y);
  std::vector<std::vector<float>> runs;
  for (int run = 0; run < 2; ++run) {
    DeviceBuffer<float> acc(arena, d, Memory::buffers);
    O::column_sum(acc.data(), d_y.data(), n, d);
    DeviceBuffer<float> c(arena, d * d, Memory::buffers);
    O::gemm(true, false, d, d, n, 1.0f, d_y.data(), d, d_y.data(), d, 0.0f, c.data(), d);
    auto v = to_host(acc);
    const auto cv = to_host(c);
    v.insert(v.end(), cv.begin(), cv.end());
    runs.push_back(std::move(v));
  }
  CHECK(same_bits(runs[0], runs[1]));
}

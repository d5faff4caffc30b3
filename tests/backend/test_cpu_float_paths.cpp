// The float paths of Ops<Cpu>: the packed GEMM and the eight-lane loops that an AVX2 + FMA
// build takes (this repository's tests are built with -march=native), each checked against
// the same op evaluated in double. Lengths are chosen to leave tails of every size, and
// shapes to cross every block boundary of the packed GEMM.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "../support/random.hpp"
#include "seqpar/backend/cpu/ops.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

using namespace seqpar;
using O = Ops<Cpu>;

namespace {
std::vector<float> randf(std::size_t n, std::uint64_t seed, double scale = 1.0) {
  return test::normal_values<float>(n, seed, scale, "float paths");
}
std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Runs f with OpenMP using `threads` threads (a no-op without OpenMP).
template <class F>
void with_threads(int threads, F&& f) {
#ifdef _OPENMP
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  f();
  omp_set_num_threads(before);
#else
  (void)threads;
  f();
#endif
}

// C = alpha op(A) op(B) + beta C in float through Ops<Cpu>::gemm, against a double loop;
// strides wider than the matrices, whose padding must stay untouched; with beta == 0 C
// starts as NaN, which must not leak into the result.
void check_gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float beta) {
  CAPTURE(ta);
  CAPTURE(tb);
  CAPTURE(M);
  CAPTURE(N);
  CAPTURE(K);
  CAPTURE(beta);
  const std::int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
  const auto A = randf(static_cast<std::size_t>((ta ? K : M) * lda), 1);
  const auto B = randf(static_cast<std::size_t>((tb ? N : K) * ldb), 2);
  auto C = beta == 0.0f ? std::vector<float>(static_cast<std::size_t>(M * ldc),
                                             std::numeric_limits<float>::quiet_NaN())
                        : randf(static_cast<std::size_t>(M * ldc), 3);
  const auto C0 = C;
  const float alpha = 0.75f;
  O::gemm<float>(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
  double worst = 0;
  bool padding_kept = true;
  for (std::int64_t i = 0; i < M; ++i) {
    for (std::int64_t j = N; j < ldc; ++j) {
      const float now = C[i * ldc + j], was = C0[i * ldc + j];
      padding_kept = padding_kept && (now == was || (std::isnan(now) && std::isnan(was)));
    }
    for (std::int64_t j = 0; j < N; ++j) {
      double ref = 0, mag = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        const double p = double(ta ? A[k * lda + i] : A[i * lda + k]) *
                         double(tb ? B[j * ldb + k] : B[k * ldb + j]);
        ref += p;
        mag += std::fabs(p);
      }
      ref = alpha * ref + (beta == 0.0f ? 0.0 : beta * double(C0[i * ldc + j]));
      // float accumulation of K products: error grows like sqrt(K) ulps of the magnitude
      const double err = std::fabs(C[i * ldc + j] - ref) / (alpha * mag + std::fabs(ref) + 1e-30);
      worst = std::isnan(err) ? std::numeric_limits<double>::infinity() : std::max(worst, err);
    }
  }
  CHECK(padding_kept);
  CHECK(worst < 2e-6);
}
}  // namespace

TEST_CASE("float gemm: every transposition, beta, edge tile and block boundary against double") {
  // edge tiles (M % 6, N % 16), depth past one K block (256), rows past several row
  // blocks, columns past one column panel (4096)
  const std::int64_t shapes[][3] = {{1, 1, 1},     {5, 7, 3},      {6, 16, 8},     {7, 17, 9},
                                    {13, 33, 300}, {150, 40, 257}, {97, 300, 520}, {8, 4100, 40}};
  for (int threads : {1, 2})
    with_threads(threads, [&] {
      CAPTURE(threads);
      for (const auto& s : shapes)
        for (int ta = 0; ta < 2; ++ta)
          for (int tb = 0; tb < 2; ++tb)
            for (float beta : {0.0f, 1.0f, 0.5f}) check_gemm(ta, tb, s[0], s[1], s[2], beta);
    });
}

TEST_CASE("float gemm: the same bits from one thread, two threads, or inside a parallel region") {
  const std::int64_t M = 300, N = 70, K = 300;
  const auto A = randf(M * K, 4), B = randf(K * N, 5);
  std::vector<float> serial(M * N), nested(4 * M * N);
  O::gemm<float>(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, serial.data(), N);
  with_threads(2, [&] {
#pragma omp parallel for
    for (int t = 0; t < 4; ++t)
      O::gemm<float>(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f,
                     nested.data() + t * M * N, N);
  });
  for (int t = 0; t < 4; ++t)
    for (std::int64_t i = 0; i < M * N; ++i) REQUIRE(nested[t * M * N + i] == serial[i]);
  // every element is summed in one order whichever thread computes it: two threads give the same
  // bits
  std::vector<float> two(M * N);
  with_threads(2, [&] {
    O::gemm<float>(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, two.data(), N);
  });
  CHECK(two == serial);
}

TEST_CASE("float gemm: K == 0 scales C by beta, M or N == 0 touches nothing") {
  std::vector<float> C = {1, 2, 3, 4};
  O::gemm<float>(false, false, 2, 2, 0, 1.0f, nullptr, 0, nullptr, 2, 0.5f, C.data(), 2);
  CHECK(C == std::vector<float>{0.5f, 1, 1.5f, 2});
  O::gemm<float>(false, false, 2, 2, 0, 1.0f, nullptr, 0, nullptr, 2, 0.0f, C.data(), 2);
  CHECK(C == std::vector<float>{0, 0, 0, 0});
}

TEST_CASE("float element-wise ops: gelu, its gradient and AdamW equal the double bodies") {
  for (std::int64_t n : {1, 7, 8, 9, 1000, 4099}) {
    CAPTURE(n);
    const auto x = randf(n, 10, 3.0), dy = randf(n, 11);
    std::vector<float> y(n), dx(n);
    O::gelu_forward(y.data(), x.data(), n);
    O::gelu_backward(dx.data(), dy.data(), x.data(), n);
    double worst_y = 0, worst_dx = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const double xd = x[i];
      worst_y = std::max(worst_y, std::fabs(y[i] - kernels::gelu(xd)) / (std::fabs(xd) + 1e-3));
      worst_dx = std::max(
          worst_dx, std::fabs(dx[i] - dy[i] * kernels::gelu_grad(xd)) / (std::fabs(dy[i]) + 1e-3));
    }
    CHECK(worst_y < 1e-6);
    // gelu' = 0.5 x (1 - t^2)(0.798 + 0.107 x^2) + ...: tanh's 4e-7 relative error grows by
    // up to ~5 through 1 - t^2 for |x| near 2
    CHECK(worst_dx < 4e-6);

    auto p = randf(n, 12), m = randf(n, 13, 0.1), v = randf(n, 14, 0.01);
    for (auto& e : v) e = std::fabs(e);
    const auto g = randf(n, 15);
    auto pd = widen(p), md = widen(m), vd = widen(v);
    const kernels::AdamCoeffs c{
        1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1e-3f / (1 - 0.9f * 0.9f), std::sqrt(1 - 0.95f * 0.95f)};
    const auto decay = kernels::Segments<bool>::uniform(n, true);
    O::adamw(p.data(), g.data(), m.data(), v.data(), decay, c);
    const auto gd = widen(g);
    O::adamw(pd.data(), gd.data(), md.data(), vd.data(), decay, c);
    double worst_p = 0, worst_v = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      worst_p = std::max(worst_p, std::fabs(p[i] - pd[i]) / (std::fabs(pd[i]) + 1e-3));
      worst_v = std::max(worst_v, std::fabs(v[i] - vd[i]) / (vd[i] + 1e-12));
    }
    CHECK(worst_p < 1e-6);
    CHECK(worst_v < 1e-6);
  }
}

TEST_CASE("float softmax statistics and cross-entropy gradient equal the double ones") {
  const std::int64_t rows = 5;
  for (std::int64_t cw : {1, 7, 8, 9, 333}) {
    CAPTURE(cw);
    const auto L = randf(rows * cw, 20, 4.0);
    const std::vector<std::int32_t> target = {0, static_cast<std::int32_t>(cw - 1), -1, 3, 1000};
    std::vector<float> mx(rows, -1.0f), sum(rows, 0.5f), picked(rows, 0.0f);  // a running state
    std::vector<double> mxd(rows, -1.0), sumd(rows, 0.5), pickedd(rows, 0.0);
    const auto Ld = widen(L);
    O::softmax_stats(mx.data(), sum.data(), picked.data(), L.data(), target.data(), rows, cw, 0);
    O::softmax_stats(mxd.data(), sumd.data(), pickedd.data(), Ld.data(), target.data(), rows, cw,
                     0);
    for (std::int64_t r = 0; r < rows; ++r) {
      CHECK(mx[r] == mxd[r]);
      CHECK(sum[r] == doctest::Approx(sumd[r]).epsilon(1e-6));
      CHECK(picked[r] == pickedd[r]);
    }
    std::vector<float> lse(rows);
    std::vector<double> lsed(rows);
    for (std::int64_t r = 0; r < rows; ++r)
      lsed[r] = lse[r] = static_cast<float>(mxd[r] + std::log(sumd[r]));
    auto G = L;
    auto Gd = Ld;
    O::cross_entropy_grad(G.data(), lse.data(), target.data(), rows, cw, 0, 0.25f);
    O::cross_entropy_grad(Gd.data(), lsed.data(), target.data(), rows, cw, 0, 0.25);
    double worst = 0;
    for (std::int64_t i = 0; i < rows * cw; ++i) worst = std::max(worst, std::fabs(G[i] - Gd[i]));
    CHECK(worst < 1e-7);  // |G| <= 0.25: absolute error a few float ulps of 0.25
  }
}

TEST_CASE("float attention with ALiBi, causal and padding masks equals the double one") {
  const std::int64_t B = 2, T = 19, nh = 3, hd = 8, H = nh * hd;
  const auto qkv = randf(B * T * 3 * H, 30);
  const auto dctx = randf(B * T * H, 31);
  std::vector<float> pos(B * T), slopes(nh);
  std::vector<std::uint8_t> valid(B * T, 1);
  for (std::int64_t t = 0; t < 5; ++t) valid[T + t] = 0;  // row 1 left-padded by 5
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0, p = 0; t < T; ++t)
      pos[b * T + t] = valid[b * T + t] ? static_cast<float>(p++) : 0.0f;
  for (std::int64_t h = 0; h < nh; ++h) slopes[h] = static_cast<float>(kernels::alibi_slope(h, nh));
  std::vector<float> ctx(B * T * H), probs(B * nh * T * T), dqkv(B * T * 3 * H),
      scratch(B * nh * T * T);
  O::attention_forward(ctx.data(), probs.data(), qkv.data(), pos.data(), valid.data(),
                       slopes.data(), B, T, nh, hd);
  O::attention_backward(dqkv.data(), dctx.data(), qkv.data(), probs.data(), valid.data(),
                        scratch.data(), B, T, nh, hd);
  const auto qkvd = widen(qkv), dctxd = widen(dctx), posd = widen(pos), slopesd = widen(slopes);
  std::vector<double> ctxd(ctx.size()), probsd(probs.size()), dqkvd(dqkv.size()),
      scratchd(scratch.size());
  O::attention_forward(ctxd.data(), probsd.data(), qkvd.data(), posd.data(), valid.data(),
                       slopesd.data(), B, T, nh, hd);
  O::attention_backward(dqkvd.data(), dctxd.data(), qkvd.data(), probsd.data(), valid.data(),
                        scratchd.data(), B, T, nh, hd);
  const auto max_diff = [](const auto& a, const auto& b) {
    double m = 0;
    for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
    return m;
  };
  CHECK(max_diff(probs, probsd) < 1e-6);
  CHECK(max_diff(ctx, ctxd) < 1e-5);
  CHECK(max_diff(dqkv, dqkvd) < 1e-5);
}

#if SEQPAR_CPU_SIMD
TEST_CASE("F32x8 exp and tanh: within their stated error of the double functions, edges exact") {
  using detail::F32x8;
  double worst_exp = 0, worst_tanh = 0;
  for (float x0 = -90.0f; x0 < 90.0f; x0 += 0.0037f) {
    alignas(32) float in[8], e[8], t[8];
    for (int l = 0; l < 8; ++l) in[l] = x0 + 1e-4f * static_cast<float>(l);
    exp_of(F32x8::load(in)).store(e);
    tanh_of(F32x8::load(in)).store(t);
    for (int l = 0; l < 8; ++l) {
      const double re = std::exp(double(in[l])), rt = std::tanh(double(in[l]));
      if (re > std::numeric_limits<float>::min() && re < std::numeric_limits<float>::max())
        worst_exp = std::max(worst_exp, std::fabs(e[l] - re) / re);
      if (rt != 0) worst_tanh = std::max(worst_tanh, std::fabs(t[l] - rt) / std::fabs(rt));
    }
  }
  for (float x = -1e-3f; x < 1e-3f; x += 3.3e-7f) {  // the polynomial branch near 0
    alignas(32) float t[8];
    tanh_of(F32x8(x)).store(t);
    if (x != 0)
      worst_tanh = std::max(
          worst_tanh, std::fabs(t[0] - std::tanh(double(x))) / std::fabs(std::tanh(double(x))));
  }
  CHECK(worst_exp < 2 * 5.97e-8);  // 2 ulp at the bottom of a binade
  CHECK(worst_tanh < 4e-7);

  const float inf = std::numeric_limits<float>::infinity(),
              nan = std::numeric_limits<float>::quiet_NaN();
  alignas(32) float in[8] = {-inf, inf, nan, -100.0f, 100.0f, 0.0f, -87.5f, 88.7f}, e[8], t[8];
  exp_of(F32x8::load(in)).store(e);
  tanh_of(F32x8::load(in)).store(t);
  CHECK(e[0] == 0.0f);
  CHECK(e[1] == inf);
  CHECK(std::isnan(e[2]));
  CHECK(e[3] == 0.0f);
  CHECK(e[4] == inf);
  CHECK(e[5] == 1.0f);
  CHECK(e[6] == 0.0f);  // below the normal range: flushed
  CHECK(e[7] == doctest::Approx(std::exp(double(88.7f))).epsilon(2e-7));
  CHECK(t[0] == -1.0f);
  CHECK(t[1] == 1.0f);
  CHECK(std::isnan(t[2]));
  CHECK(t[3] == -1.0f);
  CHECK(t[4] == 1.0f);
  CHECK(t[5] == 0.0f);
}
#else
TEST_CASE("F32x8 exp and tanh" * doctest::skip()) {
  MESSAGE("this build is not compiled for AVX2 + FMA: the float paths are the scalar ones");
}
#endif

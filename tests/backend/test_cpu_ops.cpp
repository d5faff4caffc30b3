// Finite-difference gradient checks of every CPU op, in double precision. Each op's
// backward is compared with central differences of a scalar objective sum(r * out)
// for a fixed random r.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "../support/gradcheck.hpp"
#include "../support/random.hpp"
#include "seqpar/backend/cpu/ops.hpp"
#include "seqpar/core/rng.hpp"
#include "seqpar/nn/lm_head.hpp"
#include "seqpar/parallel/tensor_axis.hpp"

using namespace seqpar;
using O = Ops<Cpu>;

namespace {
std::vector<double> randn(std::size_t n, std::uint64_t seed, double scale = 1.0) {
  return test::normal_values<double>(n, seed, scale, "test");
}
double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}
// Checks analytic gradient `ana` of objective f with respect to every element of x.
// Central differences with h = 1e-6 carry about 1e-16 * |f| / 1e-6 of rounding noise.
void check_all(std::vector<double>& x, const std::vector<double>& ana,
               const std::function<double()>& f, double tol = 1e-5) {
  REQUIRE(x.size() == ana.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    CAPTURE(i);
    const double num = test::numeric_grad(x.data(), static_cast<std::int64_t>(i), f);
    CHECK(test::rel_err(ana[i], num, 1e-4) < tol);  // floor: gradients near zero
  }
}
}  // namespace

TEST_CASE("gemm agrees with a naive triple loop for all four transpositions") {
  const std::int64_t M = 5, N = 4, K = 3;
  const auto A = randn(M * K, 1), B = randn(K * N, 2);
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      std::vector<double> C(M * N, 1.0);
      O::gemm<double>(ta, tb, M, N, K, 2.0, A.data(), ta ? M : K, B.data(), tb ? K : N, 0.5,
                      C.data(), N);
      for (std::int64_t i = 0; i < M; ++i)
        for (std::int64_t j = 0; j < N; ++j) {
          double s = 0;
          for (std::int64_t k = 0; k < K; ++k)
            s += (ta ? A[k * M + i] : A[i * K + k]) * (tb ? B[j * K + k] : B[k * N + j]);
          CHECK(C[i * N + j] == doctest::Approx(0.5 + 2.0 * s));
        }
    }
}

TEST_CASE("linear: forward and backward match finite differences") {
  const std::int64_t n = 3, in = 4, out = 5;
  auto x = randn(n * in, 3), w = randn(out * in, 4), b = randn(out, 5);
  const auto r = randn(n * out, 6);
  const auto f = [&] {
    std::vector<double> y(n * out);
    O::linear_forward(y.data(), x.data(), w.data(), b.data(), n, in, out);
    return dot(y, r);
  };
  std::vector<double> dx(n * in), dw(out * in), db(out);
  O::linear_backward(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(), n, in, out);
  check_all(x, dx, f);
  check_all(w, dw, f);
  check_all(b, db, f);
}

TEST_CASE("layernorm: forward statistics and backward match finite differences") {
  const std::int64_t n = 3, d = 7;
  auto x = randn(n * d, 7, 2.0), w = randn(d, 8), b = randn(d, 9);
  const auto r = randn(n * d, 10);
  std::vector<double> y(n * d), mean(n), rstd(n);
  const auto f = [&] {
    O::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, d,
                         1e-5);
    return dot(y, r);
  };
  f();
  for (std::int64_t i = 0; i < n; ++i) {  // normalised rows have mean b and the right spread
    double m = 0;
    for (std::int64_t j = 0; j < d; ++j) m += x[i * d + j];
    CHECK(mean[i] == doctest::Approx(m / d));
  }
  std::vector<double> dx(n * d), dw(d), db(d);
  O::layernorm_backward(dx.data(), dw.data(), db.data(), r.data(), x.data(), mean.data(),
                        rstd.data(), w.data(), n, d);
  check_all(x, dx, f);
  check_all(w, dw, f);
  check_all(b, db, f);
}

TEST_CASE("gelu: tanh form values and derivative") {
  CHECK(kernels::gelu(1.0) == doctest::Approx(0.8411919906));
  CHECK(kernels::gelu(-2.0) == doctest::Approx(-0.0454023059));
  auto x = randn(20, 11, 2.0);
  const auto r = randn(20, 12);
  const auto f = [&] {
    std::vector<double> y(20);
    O::gelu_forward(y.data(), x.data(), 20);
    return dot(y, r);
  };
  std::vector<double> dx(20);
  O::gelu_backward(dx.data(), r.data(), x.data(), 20);
  check_all(x, dx, f);
}

TEST_CASE("embedding: gather and scatter-add over a local row range") {
  const std::int64_t rows = 6, d = 3, n = 5;
  auto table = randn(rows * d, 13);
  const std::vector<int> ids = {1, 4, 1, 7, 2};  // 7 is outside rows [0, 6): reads zero
  const auto r = randn(n * d, 14);
  const auto f = [&] {
    std::vector<double> y(n * d);
    O::embedding_forward(y.data(), ids.data(), table.data(), n, d, 0, rows);
    return dot(y, r);
  };
  std::vector<double> dt(rows * d);
  O::embedding_backward(dt.data(), ids.data(), r.data(), n, d, 0, rows);
  check_all(table, dt, f);
  // A shard holding rows [4, 8) sees ids 4 and 7 only.
  std::vector<double> y(n * d);
  O::embedding_forward(y.data(), ids.data(), table.data(), n, d, 4, 2);
  CHECK(y[1 * d] == table[0]);
  CHECK(y[0] == 0.0);
}

TEST_CASE("alibi slopes follow BLOOM for 16 and 12 heads") {
  for (int h = 0; h < 16; ++h)
    CHECK(kernels::alibi_slope(h, 16) == doctest::Approx(std::pow(2.0, -(h + 1) / 2.0)));
  const double want12[] = {0.5,
                           0.25,
                           0.125,
                           0.0625,
                           0.03125,
                           0.015625,
                           0.0078125,
                           0.00390625,
                           std::pow(2.0, -0.5),
                           std::pow(2.0, -1.5),
                           std::pow(2.0, -2.5),
                           std::pow(2.0, -3.5)};
  for (int h = 0; h < 12; ++h) CHECK(kernels::alibi_slope(h, 12) == doctest::Approx(want12[h]));
}

TEST_CASE("attention: ALiBi, causal and padding masks; backward matches finite differences") {
  const std::int64_t B = 2, T = 5, nh = 3, hd = 2, ld = 3 * nh * hd;
  auto qkv = randn(B * T * ld, 15);
  const auto r = randn(B * T * nh * hd, 16);
  std::vector<double> pos(B * T), slopes(nh);
  std::vector<std::uint8_t> valid(B * T, 1);
  for (std::int64_t t = 0; t < T; ++t) pos[t] = double(t);
  valid[T + 0] = valid[T + 1] = 0;  // row 1: two left-padding tokens
  for (std::int64_t t = 2; t < T; ++t) pos[T + t] = double(t - 2);
  for (std::int64_t h = 0; h < nh; ++h) slopes[h] = kernels::alibi_slope(h, nh);
  std::vector<double> ctx(B * T * nh * hd), probs(B * nh * T * T);
  const auto f = [&] {
    O::attention_forward(ctx.data(), probs.data(), qkv.data(), pos.data(), valid.data(),
                         slopes.data(), B, T, nh, hd);
    return dot(ctx, r);
  };
  f();
  // Reference for one entry: batch 1, head 2, query 3 over keys 2..3 (keys 0, 1 are padding).
  {
    const auto q = [&](std::int64_t t, int part, std::int64_t d) {
      return qkv[(T + t) * ld + 2 * 3 * hd + part * hd + d];
    };
    double s[2], m = -1e300;
    for (int j = 0; j < 2; ++j) {
      const std::int64_t k = 2 + j;
      s[j] = (q(3, 0, 0) * q(k, 1, 0) + q(3, 0, 1) * q(k, 1, 1)) / std::sqrt(2.0) +
             slopes[2] * pos[T + k];
      m = std::max(m, s[j]);
    }
    const double e0 = std::exp(s[0] - m), e1 = std::exp(s[1] - m);
    CHECK(probs[((1 * nh + 2) * T + 3) * T + 2] == doctest::Approx(e0 / (e0 + e1)));
    CHECK(probs[((1 * nh + 2) * T + 3) * T + 0] == 0.0);
    CHECK(probs[((1 * nh + 2) * T + 3) * T + 4] == 0.0);  // causal
    CHECK(probs[((1 * nh + 2) * T + 0) * T + 4] ==
          doctest::Approx(1.0 / T));  // no valid key: uniform
  }
  // Finite differences where the function is smooth: padding queries contribute nothing.
  auto rr = r;
  for (std::int64_t t = 0; t < 2; ++t)
    for (std::int64_t c = 0; c < nh * hd; ++c) rr[(T + t) * nh * hd + c] = 0;
  const auto g = [&] {
    O::attention_forward(ctx.data(), probs.data(), qkv.data(), pos.data(), valid.data(),
                         slopes.data(), B, T, nh, hd);
    return dot(ctx, rr);
  };
  g();
  std::vector<double> dqkv(qkv.size()), scratch(B * nh * T * T);
  O::attention_backward(dqkv.data(), rr.data(), qkv.data(), probs.data(), valid.data(),
                        scratch.data(), B, T, nh, hd);
  check_all(qkv, dqkv, g);
}

TEST_CASE(
    "LM head loss: chunked online softmax equals the one-chunk result and finite differences") {
  const std::int64_t N = 6, H = 5, V = 300, rows = 384;  // 84 padded rows
  auto h = randn(N * H, 17), W = randn(rows * H, 18, 0.5);
  for (std::int64_t i = V * H; i < rows * H; ++i)
    W[i] = 100.0;  // padding must never win the softmax
  const std::vector<std::int32_t> targets = {5, -100, 299, 0, 130, 250};
  Arena arena;
  HeadScratch<double, Arena> sc;
  NoTensorAxis axis;
  const VocabShard vs{0, rows, V};
  const double scale = 0.25;
  std::vector<double> dh1(N * H), dW1(rows * H), dh2(N * H), dW2(rows * H);
  const auto one = lm_head_loss<Cpu>(dh1.data(), dW1.data(), h.data(), W.data(), targets, H, vs,
                                     scale, sc, arena, axis);
  // A budget that forces 128-column chunks (three of them, the last partial).
  const auto many = lm_head_loss<Cpu>(dh2.data(), dW2.data(), h.data(), W.data(), targets, H, vs,
                                      scale, sc, arena, axis, 128 * N * 8);
  CHECK(one.tokens == 5);
  CHECK(many.sum == doctest::Approx(one.sum).epsilon(1e-12));
  for (std::size_t i = 0; i < dh1.size(); ++i)
    CHECK(dh2[i] == doctest::Approx(dh1[i]).epsilon(1e-10));
  // Reference loss from full logits over the real vocabulary.
  double ref = 0;
  for (std::int64_t n = 0; n < N; ++n) {
    if (targets[n] < 0) continue;
    std::vector<double> l(V);
    double m = -1e300;
    for (std::int64_t v = 0; v < V; ++v) {
      for (std::int64_t k = 0; k < H; ++k) l[v] += h[n * H + k] * W[v * H + k];
      m = std::max(m, l[v]);
    }
    double s = 0;
    for (double x : l) s += std::exp(x - m);
    ref += m + std::log(s) - l[targets[n]];
  }
  CHECK(one.sum == doctest::Approx(ref).epsilon(1e-12));
  const auto f = [&] {
    std::vector<double> unused(N * H);
    return scale * lm_head_loss<Cpu>(unused.data(), static_cast<double*>(nullptr), h.data(),
                                     W.data(), targets, H, vs, 0.0, sc, arena, axis, 128 * N * 8)
                       .sum;
  };
  check_all(h, dh2, f);
  std::vector<double> Wreal(W.begin(), W.begin() + V * H);  // padded rows get no gradient
  for (std::int64_t i = V * H; i < rows * H; ++i) CHECK(dW2[i] == 0.0);
  for (std::int64_t i = 0; i < V * H; i += 37) {
    CAPTURE(i);
    CHECK(test::rel_err(dW2[i], test::numeric_grad(W.data(), i, f), 1e-4) <
          1e-4);  // |f| ~ 10, dW ~ 1e-3
  }
}

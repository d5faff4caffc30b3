// Fused (flash-style) attention on the CPU against the standard attention ops: the same
// ctx and dqkv in double to rounding, in float to float rounding, a log-sum-exp equal to
// the one of the scores, and finite differences of the fused pair itself. Shapes cross the
// query (32) and key (64) tiles and end inside them; sequences are left-padded by less
// than a tile, by more than a key tile, and entirely; the heads are a tensor rank's share
// (their ALiBi slopes start at head0).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "../support/gradcheck.hpp"
#include "../support/random.hpp"
#include "seqpar/backend/cpu/ops.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

using namespace seqpar;
using O = Ops<Cpu>;

namespace {

// Inputs of one attention call: qkv, dctx, the ALiBi positions and validity of each key,
// and the slopes of a rank's heads [head0, head0 + nh) out of heads_total.
template <class T>
struct AttentionCase {
  std::int64_t B, Tn, nh, hd;
  std::vector<T> qkv, dctx, pos, slopes;
  std::vector<std::uint8_t> valid;

  // padding[b] leading tokens of row b are left padding (Tn: the whole row).
  AttentionCase(std::int64_t Tn_, std::int64_t nh_, std::int64_t hd_,
                std::vector<std::int64_t> padding, std::int64_t head0, std::int64_t heads_total,
                std::uint64_t seed)
      : B(static_cast<std::int64_t>(padding.size())), Tn(Tn_), nh(nh_), hd(hd_) {
    qkv = test::normal_values<T>(static_cast<std::size_t>(B * Tn * 3 * nh * hd), seed, 1.0,
                                 "flash qkv");
    dctx =
        test::normal_values<T>(static_cast<std::size_t>(B * Tn * nh * hd), seed, 1.0, "flash dctx");
    pos.assign(static_cast<std::size_t>(B * Tn), T(0));
    valid.assign(static_cast<std::size_t>(B * Tn), 0);
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t t = padding[static_cast<std::size_t>(b)], p = 0; t < Tn; ++t, ++p) {
        pos[static_cast<std::size_t>(b * Tn + t)] = static_cast<T>(p);
        valid[static_cast<std::size_t>(b * Tn + t)] = 1;
      }
    for (std::int64_t h = 0; h < nh; ++h)
      slopes.push_back(static_cast<T>(kernels::alibi_slope(head0 + h, heads_total)));
  }
  // The same case in another scalar type (values converted exactly when widening).
  template <class U>
  explicit AttentionCase(const AttentionCase<U>& o)
      : B(o.B),
        Tn(o.Tn),
        nh(o.nh),
        hd(o.hd),
        qkv(o.qkv.begin(), o.qkv.end()),
        dctx(o.dctx.begin(), o.dctx.end()),
        pos(o.pos.begin(), o.pos.end()),
        slopes(o.slopes.begin(), o.slopes.end()),
        valid(o.valid) {}
  std::size_t tokens() const { return static_cast<std::size_t>(B * Tn); }
};

template <class T>
struct Result {
  std::vector<T> ctx, dqkv, lse;
};

template <class T>
Result<T> standard(const AttentionCase<T>& c) {
  Result<T> r{std::vector<T>(c.tokens() * c.nh * c.hd), std::vector<T>(c.qkv.size()), {}};
  std::vector<T> probs(static_cast<std::size_t>(c.B * c.nh * c.Tn * c.Tn)), scratch(probs.size());
  O::attention_forward(r.ctx.data(), probs.data(), c.qkv.data(), c.pos.data(), c.valid.data(),
                       c.slopes.data(), c.B, c.Tn, c.nh, c.hd);
  O::attention_backward(r.dqkv.data(), c.dctx.data(), c.qkv.data(), probs.data(), c.valid.data(),
                        scratch.data(), c.B, c.Tn, c.nh, c.hd);
  return r;
}

template <class T>
Result<T> fused(const AttentionCase<T>& c) {
  Result<T> r{std::vector<T>(c.tokens() * c.nh * c.hd), std::vector<T>(c.qkv.size()),
              std::vector<T>(c.tokens() * c.nh)};
  std::vector<T> delta(r.lse.size());
  O::flash_attention_forward(r.ctx.data(), r.lse.data(), c.qkv.data(), c.pos.data(), c.valid.data(),
                             c.slopes.data(), c.B, c.Tn, c.nh, c.hd);
  O::flash_attention_backward(r.dqkv.data(), c.dctx.data(), r.ctx.data(), c.qkv.data(),
                              r.lse.data(), c.pos.data(), c.valid.data(), c.slopes.data(),
                              delta.data(), c.B, c.Tn, c.nh, c.hd);
  return r;
}

template <class A, class B>
double max_abs_diff(const std::vector<A>& a, const std::vector<B>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
  return m;
}

// log sum_j exp(s_ij) over the keys query i attends, straight from the definition
// (all T keys with score 0 for a query with no valid key).
std::vector<double> reference_lse(const AttentionCase<double>& c) {
  std::vector<double> lse(c.tokens() * c.nh);
  const std::int64_t ld = 3 * c.nh * c.hd;
  for (std::int64_t b = 0; b < c.B; ++b)
    for (std::int64_t h = 0; h < c.nh; ++h) {
      bool seen = false;
      for (std::int64_t i = 0; i < c.Tn; ++i) {
        seen = seen || c.valid[static_cast<std::size_t>(b * c.Tn + i)];
        double& out = lse[static_cast<std::size_t>((b * c.nh + h) * c.Tn + i)];
        if (!seen) {
          out = std::log(double(c.Tn));
          continue;
        }
        std::vector<double> s;
        for (std::int64_t j = 0; j <= i; ++j) {
          if (!c.valid[static_cast<std::size_t>(b * c.Tn + j)]) continue;
          double qk = 0;
          for (std::int64_t d = 0; d < c.hd; ++d)
            qk += c.qkv[static_cast<std::size_t>((b * c.Tn + i) * ld + h * 3 * c.hd + d)] *
                  c.qkv[static_cast<std::size_t>((b * c.Tn + j) * ld + h * 3 * c.hd + c.hd + d)];
          s.push_back(qk / std::sqrt(double(c.hd)) +
                      c.slopes[static_cast<std::size_t>(h)] *
                          c.pos[static_cast<std::size_t>(b * c.Tn + j)]);
        }
        double m = s[0], sum = 0;
        for (double x : s) m = std::max(m, x);
        for (double x : s) sum += std::exp(x - m);
        out = m + std::log(sum);
      }
    }
  return lse;
}

}  // namespace

TEST_CASE(
    "fused attention equals the standard ops in double: ctx, lse and dqkv, across tiles and "
    "padding") {
  // Padding: none; 37 (past a query tile); 70 (past a key tile); the whole row; 130 (past
  // the standard ops' first block of 96 query rows, whose products stop at their last key).
  for (const std::int64_t Tn : {1, 33, 64, 150, 300}) {
    CAPTURE(Tn);
    std::vector<std::int64_t> padding = {0, std::min<std::int64_t>(37, Tn - 1),
                                         std::min<std::int64_t>(70, Tn), Tn,
                                         std::min<std::int64_t>(130, Tn)};
    // Heads 3..5 of 6: the second tensor rank's share under a split of two.
    const AttentionCase<double> c(Tn, 3, 8, padding, 3, 6, 40 + static_cast<std::uint64_t>(Tn));
    const auto want = standard(c);
    const auto got = fused(c);
    CHECK(max_abs_diff(got.ctx, want.ctx) < 1e-12);
    CHECK(max_abs_diff(got.dqkv, want.dqkv) < 1e-10);
    CHECK(max_abs_diff(got.lse, reference_lse(c)) < 1e-12);
  }
}

TEST_CASE(
    "fused attention in float equals the double ops to float rounding; the same bits on 1 and 2 "
    "threads") {
  const std::vector<std::int64_t> padding = {0, 5, 97, 150};
  const AttentionCase<float> c(150, 4, 16, padding, 0, 4, 7);
  const AttentionCase<double> cd(c);  // the same values, widened
  const auto want = standard(cd);
  const auto got = fused(c);
  const auto plain = standard(c);
  // About 32 float ulps at the values' scale of 1: which products the compiler contracts
  // into FMAs (it differs between -O1 and -O3) moves the error by a few ulps.
  CHECK(max_abs_diff(got.ctx, want.ctx) < 4e-6);
  CHECK(max_abs_diff(got.dqkv, want.dqkv) < 2e-5);
  // No worse than the float standard ops against the same double reference (x 2 for margin).
  CHECK(max_abs_diff(got.dqkv, want.dqkv) < 2 * max_abs_diff(plain.dqkv, want.dqkv) + 1e-6);
#ifdef _OPENMP
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto one = fused(c);
  omp_set_num_threads(2);
  const auto two = fused(c);
  omp_set_num_threads(saved);
  CHECK(one.ctx == two.ctx);
  CHECK(one.lse == two.lse);
  CHECK(one.dqkv == two.dqkv);
#endif
}

TEST_CASE("fused attention's backward matches finite differences of its forward (double)") {
  // Row 1 is left-padded across the first query tile; its padding queries attend uniformly
  // (constant in q and k), so their objective weight is 0 where the function is smooth.
  AttentionCase<double> c(70, 2, 4, {0, 35}, 0, 2, 11);
  auto r = c.dctx;
  const std::int64_t Hl = c.nh * c.hd;
  for (std::int64_t t = 0; t < 35; ++t)
    for (std::int64_t k = 0; k < Hl; ++k) r[static_cast<std::size_t>((c.Tn + t) * Hl + k)] = 0;
  std::vector<double> ctx(c.tokens() * Hl), lse(c.tokens() * c.nh), delta(lse.size()),
      dqkv(c.qkv.size());
  const std::function<double()> f = [&] {
    O::flash_attention_forward(ctx.data(), lse.data(), c.qkv.data(), c.pos.data(), c.valid.data(),
                               c.slopes.data(), c.B, c.Tn, c.nh, c.hd);
    double s = 0;
    for (std::size_t i = 0; i < ctx.size(); ++i) s += ctx[i] * r[i];
    return s;
  };
  f();
  O::flash_attention_backward(dqkv.data(), r.data(), ctx.data(), c.qkv.data(), lse.data(),
                              c.pos.data(), c.valid.data(), c.slopes.data(), delta.data(), c.B,
                              c.Tn, c.nh, c.hd);
  double worst = 0;
  for (std::size_t i = 0; i < c.qkv.size(); ++i) {
    const double num = test::numeric_grad(c.qkv.data(), static_cast<std::int64_t>(i), f);
    // Central differences of an objective near 30 in size carry about 1e-8 of rounding
    // noise: the floor keeps gradients near zero from reading it as relative error.
    worst = std::max(worst, test::rel_err(dqkv[i], num, 1e-3));
  }
  CHECK(worst < 1e-5);
}

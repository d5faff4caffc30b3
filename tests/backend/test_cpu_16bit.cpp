// Ops<Cpu> on 16-bit storage (bf16, fp16: Float16). Every op widens to float as it reads and
// rounds once as it writes, so each is held to the same op run in float on the widened
// inputs, its outputs rounded once: bit for bit where it computes in float from the inputs
// it is given (element-wise ops, layernorm, column sums, the embedding's backward, the
// cross-entropy rows, the mixed AdamW, the attention probabilities) and within the rounding
// of its bf16 intermediates where it keeps one (the attention's context and backward). The
// GEMM is held to the float GEMM of the widened operands (the conversion path) or to the
// scalar model of the bf16 dot products (where the build targets AVX512_BF16), and both to
// the product in double. Conversions: every 16-bit pattern, the ties between neighbours and
// the doubles a float cannot tell from a tie.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string_view>
#include <vector>

#include "../support/dot_bf16_model.hpp"
#include "../support/golden.hpp"
#include "../support/random.hpp"
#include "seqpar/backend/cpu/bf16dot_gemm.hpp"
#include "seqpar/backend/cpu/ops.hpp"
#include "seqpar/optim/adamw.hpp"
#include "seqpar/optim/offload.hpp"

using namespace seqpar;
using O = Ops<Cpu>;

namespace {

template <class H>
std::vector<H> rand16(std::size_t n, std::uint64_t seed, double scale = 1.0) {
  return test::normal_values<H>(n, seed, scale, "16-bit paths");
}
template <class H>
std::vector<float> widened(const std::vector<H>& v) {
  std::vector<float> w(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) w[i] = v[i].to_float();
  return w;
}
template <class H>
std::vector<H> narrowed(const std::vector<float>& v) {
  std::vector<H> h(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) h[i] = H(v[i]);
  return h;
}
template <class H>
bool same_bits(const std::vector<H>& a, const std::vector<H>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(H)) == 0;
}
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The value halfway between 16-bit patterns b and b + 1 (both finite, same sign), exactly.
template <class H>
double midpoint(std::uint16_t b) {
  return (static_cast<double>(H::from_bits(b).to_float()) +
          static_cast<double>(H::from_bits(static_cast<std::uint16_t>(b + 1)).to_float())) /
         2;
}

template <class H>
constexpr std::uint16_t inf_bits() {
  return H::dtype == DType::bf16 ? 0x7f80 : 0x7c00;
}

}  // namespace

TEST_CASE_TEMPLATE("Float16 rounds a double once, to nearest even; integers are numbers", H,
                   Bf16Bits, F16Bits) {
  // every positive finite pattern below the largest: its tie with the next one goes to the
  // even one, and doubles just off the tie (closer than a float can tell) to the nearer one,
  // which a double rounded to float first would make a tie
  int wrong_tie = 0, wrong_above = 0, wrong_below = 0;
  for (std::uint32_t b = 0; b + 1 < inf_bits<H>(); ++b) {
    const auto lo = static_cast<std::uint16_t>(b), hi = static_cast<std::uint16_t>(b + 1);
    const double m = midpoint<H>(lo), off = std::max(std::fabs(m), 1e-300) * 0x1p-40;
    wrong_tie += H(m).bits != ((lo & 1) == 0 ? lo : hi);
    wrong_above += H(m + off).bits != hi;
    wrong_below += H(m - off).bits != lo;
    // the float path and the negative side agree
    if (b % 7 == 0) {
      wrong_tie += H(static_cast<float>(m)).bits != H(m).bits;
      wrong_tie += H(-m).bits != (H(m).bits | 0x8000);
    }
  }
  CHECK(wrong_tie == 0);
  CHECK(wrong_above == 0);
  CHECK(wrong_below == 0);
  CHECK(H(3).to_float() == 3.0f);
  CHECK(H(-2).bits == H(-2.0).bits);
  CHECK(H(std::int64_t{0x3c00}).to_float() == 15360.0f);  // a number, not bits
  CHECK(H::from_bits(0x3c00).bits == 0x3c00);
  CHECK(std::isinf(H(1e300).to_float()));
  CHECK(std::isnan(H(std::numeric_limits<double>::quiet_NaN()).to_float()));
  CHECK(static_cast<float>(H(0.5f)) == 0.5f);  // converts to float implicitly, as CUDA's types
}

TEST_CASE_TEMPLATE("16-bit conversions eight at a time give the scalar conversion's bits", H,
                   Bf16Bits, F16Bits) {
  // widening: every pattern (8192 blocks of eight and a tail through Ops<Cpu>::convert)
  std::vector<H> all(65536 + 5);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = H::from_bits(static_cast<std::uint16_t>(i));
  std::vector<float> wide(all.size());
  O::convert(wide.data(), all.data(), static_cast<std::int64_t>(all.size()));
  int wrong = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const float want = all[i].to_float();
    wrong += std::isnan(want)
                 ? !std::isnan(wide[i])
                 : std::bit_cast<std::uint32_t>(wide[i]) != std::bit_cast<std::uint32_t>(want);
  }
  CHECK(wrong == 0);
  // narrowing: every pattern's value, the ties on both sides of it and the floats next to
  // them, infinities, NaNs, subnormals, values past the largest finite one
  std::vector<float> f;
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const float v = H::from_bits(static_cast<std::uint16_t>(b)).to_float();
    f.push_back(v);
    if (!std::isfinite(v) || (b & 0x7fff) + 1 >= inf_bits<H>()) continue;
    const auto m = static_cast<float>(midpoint<H>(static_cast<std::uint16_t>(b)));
    f.insert(f.end(), {m, std::nextafter(m, 0.0f), std::nextafter(m, 2 * m)});
  }
  f.insert(f.end(), {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::max(),
                     std::bit_cast<float>(0x7fc12345u), std::bit_cast<float>(0xffa00001u),
                     std::numeric_limits<float>::denorm_min(), 65519.99f, 65520.0f, 3e38f});
  std::vector<H> narrow(f.size());
  O::convert(narrow.data(), f.data(), static_cast<std::int64_t>(f.size()));
  wrong = 0;
  for (std::size_t i = 0; i < f.size(); ++i) wrong += narrow[i].bits != H(f[i]).bits;
  CHECK(wrong == 0);
}

namespace {

// C = alpha op(A) op(B) + beta C with 16-bit A and B and C of type Out (H or float), against
// (1) what the path this build takes must give bit for bit: the float GEMM of the widened
// operands rounded once, or the dot products' scalar model; (2) the product in double.
template <class H, class Out>
void check_gemm16(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float beta) {
  CAPTURE(ta);
  CAPTURE(tb);
  CAPTURE(M);
  CAPTURE(N);
  CAPTURE(K);
  CAPTURE(beta);
  const std::int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
  const auto A = rand16<H>(static_cast<std::size_t>((ta ? K : M) * lda), 1);
  const auto B = rand16<H>(static_cast<std::size_t>((tb ? N : K) * ldb), 2);
  std::vector<Out> C(static_cast<std::size_t>(M * ldc));
  const auto c0 = test::normal_values<float>(C.size(), 3, 1.0, "16-bit paths");
  for (std::size_t i = 0; i < C.size(); ++i) C[i] = Out(c0[i]);
  const auto C0 = C;
  const float alpha = 0.75f;
  O::gemm(ta, tb, M, N, K, H(alpha), A.data(), lda, B.data(), ldb, H(beta), C.data(), ldc);

  const auto a = widened(A), b = widened(B);
  // (1) the path's own arithmetic
  std::vector<Out> want = C0;
  if constexpr (std::is_same_v<H, Bf16Bits> && SEQPAR_CPU_BF16_DOT) {
    test::dot_gemm_model(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, want.data(),
                         ldc);
  } else {
    std::vector<float> c(C0.size());
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = static_cast<float>(C0[i]);
    O::gemm<float>(ta, tb, M, N, K, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
    for (std::size_t i = 0; i < c.size(); ++i)
      if constexpr (std::is_same_v<Out, float>)
        want[i] = c[i];
      else
        want[i] = Out(c[i]);
  }
  CHECK(same_bits(C, want));

  // (2) against double: float sums, then (for a 16-bit C) one rounding of 2^-8 or 2^-11
  const double unit = std::is_same_v<Out, float> ? 0 : H::dtype == DType::bf16 ? 0x1p-8 : 0x1p-11;
  double worst = 0;
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      double ref = 0, mag = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        const double p = double(ta ? a[k * lda + i] : a[i * lda + k]) *
                         double(tb ? b[j * ldb + k] : b[k * ldb + j]);
        ref += p;
        mag += std::fabs(p);
      }
      ref = alpha * ref + (beta == 0.0f ? 0.0 : beta * double(C0[i * ldc + j]));
      const double got = static_cast<float>(C[i * ldc + j]);
      const double err = std::fabs(got - ref) - unit * std::fabs(ref);
      worst = std::max(worst, err / (alpha * mag + std::fabs(ref) + 1e-30));
    }
  CHECK(worst < 2e-6);
  // the padding past N in each row of C is untouched
  bool padding_kept = true;
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = N; j < ldc; ++j)
      padding_kept =
          padding_kept && std::memcmp(&C[i * ldc + j], &C0[i * ldc + j], sizeof(Out)) == 0;
  CHECK(padding_kept);
}

}  // namespace

TEST_CASE_TEMPLATE("16-bit gemm: the path's own arithmetic bit for bit, and the product in double",
                   H, Bf16Bits, F16Bits) {
  MESSAGE("gemm path for ", dtype_name(H::dtype), ": ", std::string(O::gemm_path<H>()));
  // edge tiles, depths past one block (the dot products' 1024, the float kernel's 256: a
  // 16-bit C is then summed in float over the blocks), odd depths (a pair half empty), rows
  // past several row blocks and past a band (576 rows), whole slivers of 32 columns over
  // several K blocks in bands (op(B) packed once for them)
  const std::int64_t shapes[][3] = {{1, 1, 1},      {5, 7, 3},      {13, 33, 300},
                                    {97, 70, 520},  {150, 40, 257}, {8, 37, 1031},
                                    {97, 70, 2100}, {600, 9, 300},  {600, 40, 1100}};
  for (const auto& s : shapes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (float beta : {0.0f, 1.0f, 0.5f}) {
          check_gemm16<H, H>(ta, tb, s[0], s[1], s[2], beta);
          check_gemm16<H, float>(ta, tb, s[0], s[1], s[2], beta);
        }
}

TEST_CASE("the dot products' scalar model: the product in double, inputs DAZ, results FTZ") {
  // (what the bf16 dot-product GEMM is held to where it runs; the model itself, here)
  const std::int64_t K = 600;
  const auto A = rand16<Bf16Bits>(3 * K, 7), B = rand16<Bf16Bits>(K * 2, 8);
  std::vector<float> C(6);
  test::dot_gemm_model(false, false, 3, 2, K, 1.0f, A.data(), K, B.data(), 2, 0.0f, C.data(), 2);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) {
      double ref = 0, mag = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        const double p = double(A[i * K + k].to_float()) * double(B[k * 2 + j].to_float());
        ref += p;
        mag += std::fabs(p);
      }
      CHECK(std::fabs(C[i * 2 + j] - ref) < 1e-6 * mag);
    }
  // a subnormal bf16 input counts as zero: 2^-133 x 2^100 would be 2^-33
  const Bf16Bits tiny = Bf16Bits::from_bits(0x0001), big(0x1p100f);
  CHECK(test::dot_pair(0.0f, tiny, tiny, big, big) == 0.0f);
  // a product that lands among fp32's subnormals is flushed: 2^-70 x 2^-70 = 2^-140
  const Bf16Bits small(0x1p-70f);
  CHECK(test::dot_pair(0.0f, small, small, small, small) == 0.0f);
  // the odd product is added first: (1 + 2^-24) is lost to 1 when 2^-24 comes second
  const Bf16Bits one(1.0f), eps(0x1p-24f), half_eps(0x1p-25f);
  CHECK(test::dot_pair(0.0f, eps, one, one, one) == 1.0f);
  CHECK(test::dot_pair(0.0f, one, half_eps, one, half_eps) == 1.0f);
}

TEST_CASE("the dot-product gemm's driver on emulated lanes gives the model's bits") {
  // packing, pairs, blocking, edge tiles and C's rounding of the AVX512_BF16 path, run
  // here on scalar lanes of the instruction's arithmetic (the instruction itself only
  // runs in test_backend_dot_bf16, on a CPU that has it)
  const std::int64_t shapes[][3] = {{1, 1, 1},    {13, 33, 255}, {100, 70, 257},
                                    {3, 5, 1031}, {600, 9, 300}, {600, 40, 1100}};
  for (const auto& s : shapes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (float beta : {0.0f, 0.5f}) {
          const std::int64_t M = s[0], N = s[1], K = s[2];
          CAPTURE(ta);
          CAPTURE(tb);
          CAPTURE(M);
          CAPTURE(N);
          CAPTURE(K);
          CAPTURE(beta);
          const std::int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
          const auto A = rand16<Bf16Bits>(static_cast<std::size_t>((ta ? K : M) * lda), 50);
          const auto B = rand16<Bf16Bits>(static_cast<std::size_t>((tb ? N : K) * ldb), 51);
          const auto C0 = rand16<Bf16Bits>(static_cast<std::size_t>(M * ldc), 52);
          auto C = C0, want = C0;
          std::vector<float> Cf = widened(C0), wantf = Cf;
          detail::bf16dot::gemm<test::EmulatedDot>(ta, tb, M, N, K, 0.75f, A.data(), lda, B.data(),
                                                   ldb, beta, C.data(), ldc);
          test::dot_gemm_model(ta, tb, M, N, K, 0.75f, A.data(), lda, B.data(), ldb, beta,
                               want.data(), ldc);
          CHECK(same_bits(C, want));
          detail::bf16dot::gemm<test::EmulatedDot>(ta, tb, M, N, K, 1.0f, A.data(), lda, B.data(),
                                                   ldb, beta, Cf.data(), ldc);
          test::dot_gemm_model(ta, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, beta,
                               wantf.data(), ldc);
          CHECK(same_bits(Cf, wantf));
        }
}

TEST_CASE_TEMPLATE("16-bit element-wise and row ops: the float op on widened inputs, rounded once",
                   H, Bf16Bits, F16Bits) {
  const std::int64_t n = 37, d = 75, N = n * d;  // tails of every eight-lane loop
  const auto x = rand16<H>(N, 20, 2.0), y = rand16<H>(N, 21), w = rand16<H>(d, 22),
             b = rand16<H>(d, 23);
  const auto xf = widened(x), yf = widened(y), wf = widened(w), bf = widened(b);

  SUBCASE("gelu and its gradient") {
    std::vector<H> g(N), dg(N);
    std::vector<float> gf(N), dgf(N);
    O::gelu_forward(g.data(), x.data(), N);
    O::gelu_forward(gf.data(), xf.data(), N);
    O::gelu_backward(dg.data(), y.data(), x.data(), N);
    O::gelu_backward(dgf.data(), yf.data(), xf.data(), N);
    CHECK(same_bits(g, narrowed<H>(gf)));
    CHECK(same_bits(dg, narrowed<H>(dgf)));
  }
  SUBCASE("biases, sums, scaling") {
    auto z = y;
    auto zf = yf;
    O::add_bias(z.data(), b.data(), n, d);
    O::add_bias(zf.data(), bf.data(), n, d);
    CHECK(same_bits(z, narrowed<H>(zf)));
    z = y, zf = yf;
    O::add_bias_residual(z.data(), b.data(), x.data(), n, d);
    O::add_bias_residual(zf.data(), bf.data(), xf.data(), n, d);
    CHECK(same_bits(z, narrowed<H>(zf)));
    z = y, zf = yf;
    O::add(z.data(), x.data(), N);
    O::add(zf.data(), xf.data(), N);
    CHECK(same_bits(z, narrowed<H>(zf)));
    O::scale(z.data(), H(0.375f), N);
    zf = widened(narrowed<H>(zf));
    O::scale(zf.data(), 0.375f, N);
    CHECK(same_bits(z, narrowed<H>(zf)));
    // a 16-bit term into a float sum
    auto s = yf;
    O::add(s.data(), x.data(), N);
    auto sf = yf;
    O::add(sf.data(), xf.data(), N);
    CHECK(same_bits(s, sf));
    // column sums: in float over all the rows, the 16-bit accumulator rounded once
    auto acc = b;
    auto accf = bf;
    O::column_sum(acc.data(), x.data(), n, d);
    O::column_sum(accf.data(), xf.data(), n, d);
    CHECK(same_bits(acc, narrowed<H>(accf)));
    const double ss = O::sum_squares(x.data(), N), ssf = O::sum_squares(xf.data(), N);
    CHECK(ss == ssf);
  }
  SUBCASE("layernorm forward and backward, statistics in float") {
    std::vector<H> out(N);
    std::vector<float> outf(N), mean(n), rstd(n), meanf(n), rstdf(n);
    O::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, d,
                         1e-5);
    O::layernorm_forward(outf.data(), meanf.data(), rstdf.data(), xf.data(), wf.data(), bf.data(),
                         n, d, 1e-5);
    CHECK(same_bits(out, narrowed<H>(outf)));
    CHECK(same_bits(mean, meanf));
    CHECK(same_bits(rstd, rstdf));
    auto dx = x;
    auto dxf = xf;
    auto dw = w, db = b;
    auto dwf = wf, dbf = bf;
    O::layernorm_backward(dx.data(), dw.data(), db.data(), y.data(), x.data(), mean.data(),
                          rstd.data(), w.data(), n, d);
    O::layernorm_backward(dxf.data(), dwf.data(), dbf.data(), yf.data(), xf.data(), meanf.data(),
                          rstdf.data(), wf.data(), n, d);
    CHECK(same_bits(dx, narrowed<H>(dxf)));
    CHECK(same_bits(dw, narrowed<H>(dwf)));
    CHECK(same_bits(db, narrowed<H>(dbf)));
  }
  SUBCASE("the embedding's backward: each row's tokens summed in float, rounded once") {
    const std::vector<std::int32_t> ids = {3, 5, 3, 9, 3, 5, 20, 4, 4};  // 20 is another shard's
    const auto dy = rand16<H>(ids.size() * d, 24);
    auto table = rand16<H>(10 * d, 25);
    auto tablef = widened(table);
    O::embedding_backward(table.data(), ids.data(), dy.data(), 9, d, 0, 10);
    O::embedding_backward(tablef.data(), ids.data(), widened(dy).data(), 9, d, 0, 10);
    CHECK(same_bits(table, narrowed<H>(tablef)));
  }
  SUBCASE("the cross-entropy's rows in float") {
    const std::int64_t rows = 5, cw = 203, col0 = 100;
    const auto L = rand16<H>(rows * cw, 26, 4.0);
    const auto Lf = widened(L);
    const std::vector<std::int32_t> target = {100, 150, 302, 99, 303};  // two outside the chunk
    std::vector<float> mx(rows, 1.5f), sum(rows, 2.0f), picked(rows, 0.0f);
    auto mxf = mx, sumf = sum, pickedf = picked;
    O::softmax_stats(mx.data(), sum.data(), picked.data(), L.data(), target.data(), rows, cw, col0);
    O::softmax_stats(mxf.data(), sumf.data(), pickedf.data(), Lf.data(), target.data(), rows, cw,
                     col0);
    CHECK(same_bits(mx, mxf));
    CHECK(same_bits(sum, sumf));
    CHECK(same_bits(picked, pickedf));
    std::vector<float> lse(rows);
    for (std::int64_t r = 0; r < rows; ++r) lse[r] = mx[r] + std::log(sum[r]);
    auto G = L;
    auto Gf = Lf;
    O::cross_entropy_grad(G.data(), lse.data(), target.data(), rows, cw, col0, 0.125f);
    O::cross_entropy_grad(Gf.data(), lse.data(), target.data(), rows, cw, col0, 0.125f);
    CHECK(same_bits(G, narrowed<H>(Gf)));
  }
}

TEST_CASE_TEMPLATE("mixed AdamW: fp32 master and moments, 16-bit gradient and weights", H, Bf16Bits,
                   F16Bits) {
  // the update on the device (Ops<Cpu>::adamw_mixed) and the offloaded one on the host
  // (host_adamw over the gradients widened as the device widens) give the same bits
  const std::int64_t n = 1000 + 3;
  auto master = test::normal_values<float>(n, 30, 0.02, "adam");
  auto m = test::normal_values<float>(n, 31, 1e-3, "adam"), v = m;
  for (auto& x : v) x = x * x;
  const auto g = rand16<H>(n, 32, 1e-2);
  kernels::Segments<bool> decay;
  decay.append(400, true);
  decay.append(n - 400, false);
  const auto c = adam_coeffs({0.9, 0.999, 1e-8, 0.1}, 1e-3, 3);
  auto master2 = master, m2 = m, v2 = v;
  std::vector<H> weight(n);
  O::adamw_mixed(master.data(), weight.data(), g.data(), m.data(), v.data(), decay, c, 0.5f);
  std::vector<float> gw(n);
  host_widen(gw.data(), g.data(), n, H::dtype);
  host_adamw(master2.data(), gw.data(), m2.data(), v2.data(), decay, c, 0.5f);
  CHECK(same_bits(master, master2));
  CHECK(same_bits(m, m2));
  CHECK(same_bits(v, v2));
  CHECK(same_bits(weight, narrowed<H>(master)));
}

TEST_CASE_TEMPLATE("16-bit attention: probabilities from float scores, context and backward close",
                   H, Bf16Bits, F16Bits) {
  const std::int64_t B = 2, Tn = 19, nh = 2, hd = 8, N = B * Tn, Hl = nh * hd;
  const auto qkv = rand16<H>(N * 3 * Hl, 40), dctx = rand16<H>(N * Hl, 41);
  const auto qkvf = widened(qkv), dctxf = widened(dctx);
  std::vector<float> pos(N), slopes = {0.25f, 0.0625f};
  std::vector<std::uint8_t> valid(N, 1);
  for (std::int64_t t = 0; t < 3; ++t) valid[Tn + t] = 0;  // row 1: left padding
  for (std::int64_t r = 0; r < B; ++r) {
    std::int64_t seen = 0;
    for (std::int64_t t = 0; t < Tn; ++t) {
      seen += valid[r * Tn + t];
      pos[r * Tn + t] = valid[r * Tn + t] ? static_cast<float>(seen - 1) : 0.0f;
    }
  }
  std::vector<H> ctx(N * Hl), probs(B * nh * Tn * Tn), dqkv(N * 3 * Hl), scratch(probs.size());
  std::vector<float> ctxf(ctx.size()), probsf(probs.size()), dqkvf(dqkv.size()),
      scratchf(probs.size());
  O::attention_forward(ctx.data(), probs.data(), qkv.data(), pos.data(), valid.data(),
                       slopes.data(), B, Tn, nh, hd);
  O::attention_forward(ctxf.data(), probsf.data(), qkvf.data(), pos.data(), valid.data(),
                       slopes.data(), B, Tn, nh, hd);
  if (std::string_view(O::gemm_path<H>()).starts_with("widened"))
    CHECK(same_bits(probs, narrowed<H>(probsf)));  // the scores' GEMM is the float one
  const double tol = H::dtype == DType::bf16 ? 1e-2 : 2e-3;
  CHECK(test::rel_norm_err(widened(probs), probsf) < tol);
  CHECK(test::rel_norm_err(widened(ctx), ctxf) < tol);
  O::attention_backward(dqkv.data(), dctx.data(), qkv.data(), probs.data(), valid.data(),
                        scratch.data(), B, Tn, nh, hd);
  O::attention_backward(dqkvf.data(), dctxf.data(), qkvf.data(), probsf.data(), valid.data(),
                        scratchf.data(), B, Tn, nh, hd);
  CHECK(test::rel_norm_err(widened(dqkv), dqkvf) < tol);
  // the fused form: the float loops on the widened inputs, rounded once
  std::vector<H> fctx(ctx.size()), fdqkv(dqkv.size());
  std::vector<float> lse(B * nh * Tn), delta(lse.size()), fctxf(ctx.size()), lsef(lse.size());
  O::flash_attention_forward(fctx.data(), lse.data(), qkv.data(), pos.data(), valid.data(),
                             slopes.data(), B, Tn, nh, hd);
  O::flash_attention_forward(fctxf.data(), lsef.data(), qkvf.data(), pos.data(), valid.data(),
                             slopes.data(), B, Tn, nh, hd);
  CHECK(same_bits(fctx, narrowed<H>(fctxf)));
  CHECK(same_bits(lse, lsef));
  O::flash_attention_backward(fdqkv.data(), dctx.data(), fctx.data(), qkv.data(), lse.data(),
                              pos.data(), valid.data(), slopes.data(), delta.data(), B, Tn, nh, hd);
  CHECK(test::rel_norm_err(widened(fdqkv), dqkvf) < tol);
}

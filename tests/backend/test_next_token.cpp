// Decoding's next-token ops of Ops<Cpu> (next_token_max, _sum_exp, _scores, _top_k) against
// references written here: a double-precision log_softmax, the penalty rule applied by hand,
// and a stable sort of every (score, token) pair. Rows hold padding columns set to NaN, which
// the ops must never read.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "../support/random.hpp"
#include "seqpar/backend/cpu/ops.hpp"

using namespace seqpar;
using O = Ops<Cpu>;

namespace {

constexpr float nan_value = std::numeric_limits<float>::quiet_NaN();
constexpr float inf = std::numeric_limits<float>::infinity();

// rows x cols logits whose first `real` columns are random, the rest NaN.
std::vector<float> logits(std::int64_t rows, std::int64_t cols, std::int64_t real,
                          std::uint64_t seed) {
  const auto v =
      test::normal_values<float>(static_cast<std::size_t>(rows * cols), seed, 3.0f, "next_token");
  std::vector<float> L(v.begin(), v.end());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = real; c < cols; ++c)
      L[static_cast<std::size_t>(r * cols + c)] = nan_value;
  return L;
}

}  // namespace

TEST_CASE("next_token_max, _sum_exp and _scores give log_softmax over the real columns") {
  const std::int64_t rows = 3, cols = 37, real = 33;
  const auto L = logits(rows, cols, real, 11);
  std::vector<float> mx(rows), lse(rows), out(rows * cols, -7.0f);
  std::vector<double> sum(rows);
  O::next_token_max(mx.data(), L.data(), rows, cols, real);
  O::next_token_sum_exp(sum.data(), L.data(), mx.data(), rows, cols, real);
  for (std::int64_t r = 0; r < rows; ++r) lse[r] = static_cast<float>(std::log(sum[r]));
  O::next_token_scores(out.data(), L.data(), mx.data(), lse.data(), nullptr, nullptr, 1.0f, rows,
                       cols, 0, real);
  for (std::int64_t r = 0; r < rows; ++r) {
    CAPTURE(r);
    const float* l = L.data() + r * cols;
    CHECK(mx[r] == *std::max_element(l, l + real));
    double z = 0;
    for (std::int64_t c = 0; c < real; ++c) z += std::exp(static_cast<double>(l[c]));
    double total = 0;
    for (std::int64_t c = 0; c < real; ++c) {
      const double want = static_cast<double>(l[c]) - std::log(z);
      CHECK(std::abs(out[r * cols + c] - want) < 1e-5);
      total += std::exp(static_cast<double>(out[r * cols + c]));
    }
    CHECK(total == doctest::Approx(1.0).epsilon(1e-5));
    for (std::int64_t c = real; c < cols; ++c) CHECK(out[r * cols + c] == -7.0f);  // untouched
  }
  // Without real columns (a rank whose vocabulary slice is all padding): -inf and 0.
  O::next_token_max(mx.data(), L.data(), rows, cols, 0);
  O::next_token_sum_exp(sum.data(), L.data(), mx.data(), rows, cols, 0);
  CHECK(mx[0] == -inf);
  CHECK(sum[0] == 0.0);
}

TEST_CASE("next_token_scores penalises each row's seen ids that fall in its vocabulary slice") {
  const std::int64_t rows = 2, cols = 12, real = 10, row0 = 20, p = 2;
  std::vector<float> L(rows * cols, nan_value);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < real; ++c)
      L[r * cols + c] = static_cast<float>(c - 4) * 0.75f + static_cast<float>(r);
  // Row 0 saw 3 (another rank's), 21, 24 and 29 (its first, a negative, its last real id) and
  // 30 (padding: not a token of this slice); row 1 saw 25 (logit 0.75 + 1) only.
  const std::vector<std::int32_t> seen = {3, 21, 24, 29, 30, 25};
  const std::vector<std::int64_t> start = {0, 5, 6};
  std::vector<float> out(rows * cols, -7.0f);
  O::next_token_scores(out.data(), L.data(), nullptr, nullptr, seen.data(), start.data(),
                       static_cast<float>(p), rows, cols, row0, real);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < real; ++c) {
      CAPTURE(r);
      CAPTURE(c);
      const float x = L[r * cols + c];
      const std::int32_t id = static_cast<std::int32_t>(row0 + c);
      const bool hit = std::find(seen.begin() + start[r], seen.begin() + start[r + 1], id) !=
                       seen.begin() + start[r + 1];
      CHECK(out[r * cols + c] == (!hit ? x : x > 0 ? x / 2 : x * 2));
    }
  CHECK(out[0 * cols + 1] == -4.5f);      // id 21: logit -2.25, multiplied
  CHECK(out[1 * cols + 5] == 1.75f / 2);  // id 25 of row 1: 1.75, divided
  CHECK(out[0 * cols + 10] == -7.0f);     // padding stays
  // In place on the logits (out == L, as decoding does for float).
  std::vector<float> in_place = L;
  O::next_token_scores(in_place.data(), in_place.data(), nullptr, nullptr, seen.data(),
                       start.data(), static_cast<float>(p), rows, cols, row0, real);
  for (std::int64_t i = 0; i < rows * cols; ++i)
    if (i % cols < real) CHECK(in_place[i] == out[i]);
}

TEST_CASE(
    "next_token_top_k: each row's k best of scores plus base, in order, ties to the lower id") {
  const std::int64_t rows = 4, cols = 50, real = 45, row0 = 100, k = 7;
  // Scores on a coarse grid, so that many are equal; and one row with a -inf entry.
  std::vector<float> S = logits(rows, cols, real, 5);
  for (float& x : S)
    if (!std::isnan(x)) x = std::round(x);
  S[2 * cols + 3] = -inf;
  const std::vector<float> base = {0.0f, -1.0e9f, 2.5f, -0.5f};
  for (const bool with_base : {false, true}) {
    CAPTURE(with_base);
    std::vector<float> score(rows * k);
    std::vector<std::int64_t> token(rows * k);
    O::next_token_top_k(score.data(), token.data(), S.data(), with_base ? base.data() : nullptr,
                        rows, cols, row0, real, k);
    for (std::int64_t r = 0; r < rows; ++r) {
      CAPTURE(r);
      std::vector<std::int64_t> order(real);
      std::iota(order.begin(), order.end(), 0);
      const auto value = [&](std::int64_t c) {
        return with_base ? S[r * cols + c] + base[r] : S[r * cols + c];
      };
      std::stable_sort(order.begin(), order.end(),
                       [&](std::int64_t a, std::int64_t b) { return value(a) > value(b); });
      for (std::int64_t i = 0; i < k; ++i) {
        CHECK(token[r * k + i] == row0 + order[i]);
        CHECK(score[r * k + i] == value(order[i]));
      }
    }
  }
  // Fewer real columns than k: the real ones in order, then (-inf, -1).
  std::vector<float> score(rows * k);
  std::vector<std::int32_t> token(rows * k);
  O::next_token_top_k(score.data(), token.data(), S.data(), nullptr, rows, cols, row0, 3, k);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 3; i < k; ++i) {
      CHECK(score[r * k + i] == -inf);
      CHECK(token[r * k + i] == -1);
    }
  CHECK(token[0] >= row0);
  CHECK(token[0] < row0 + 3);
}

TEST_CASE("next_token_top_k ranks a NaN first, so that decoding sees and refuses it") {
  const std::vector<float> S = {1.0f, nan_value, 3.0f, nan_value, -inf};
  std::vector<float> score(3);
  std::vector<std::int64_t> token(3);
  O::next_token_top_k(score.data(), token.data(), S.data(), nullptr, 1, 5, 10, 5, 3);
  CHECK(std::isnan(score[0]));
  CHECK(token[0] == 11);  // of two NaNs the first
  CHECK(std::isnan(score[1]));
  CHECK(token[1] == 13);
  CHECK(score[2] == 3.0f);
  CHECK(token[2] == 12);
}

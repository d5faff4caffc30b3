// The block's decoding form: the decode attention op against a double-precision reference
// and against the training forward's attention; prefill + decoding steps against the full
// forward at every position (left padding); greedy generation under TensorSplit<2>
// against one rank; the cache's memory in the arena.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <vector>

#include "nn_test_util.hpp"
#include "seqpar/backend/cpu/ops.hpp"
#include "seqpar/comm/thread_comm.hpp"
#include "seqpar/core/rng.hpp"
#include "seqpar/nn/generate.hpp"
#include "seqpar/train/trainer.hpp"

using namespace seqpar;
using O = Ops<Cpu>;

namespace {
// 12 heads: ALiBi slopes of a non-power-of-two head count; 6 a rank under TensorSplit<2>.
using Tiny = test::DecodeModel;
using test::pad;

using test::random_model;

std::vector<double> normals(std::size_t n, std::uint64_t seed) {
  const CounterRng rng(seed, "test-decode");
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = rng.normal(i);
  return v;
}

template <class T>
std::vector<T> as(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return worst / scale;
}

template <class T>
std::vector<double> to_double(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// A cache of B rows, nh heads, cap positions of which len are filled: row 0 all valid,
// row 1 left-padded by 3 with key 6 masked, row 2 only its last key valid. Positions are
// (cumsum(valid) - 1) over the valid keys.
struct DecodeCase {
  std::int64_t B = 3, nh = 2, hd = 5, cap = 11, len = 9;
  std::vector<double> qkv, k, v, pos, slopes;
  std::vector<std::uint8_t> valid;

  DecodeCase() {
    qkv = normals(static_cast<std::size_t>(B * 3 * nh * hd), 1);
    k = normals(static_cast<std::size_t>(B * nh * cap * hd), 2);
    v = normals(k.size(), 3);
    pos.assign(static_cast<std::size_t>(B * cap), 0.0);
    valid.assign(pos.size(), 0);
    for (std::int64_t b = 0; b < B; ++b) {
      std::int64_t seen = 0;
      for (std::int64_t j = 0; j < len; ++j) {
        const bool ok = b == 0 || (b == 1 && j >= 3 && j != 6) || (b == 2 && j == len - 1);
        const auto i = static_cast<std::size_t>(b * cap + j);
        valid[i] = ok;
        seen += ok;
        pos[i] = ok ? static_cast<double>(seen - 1) : 0.0;
      }
    }
    for (std::int64_t h = 0; h < nh; ++h) slopes.push_back(kernels::alibi_slope(h, nh));
    // Positions past len are never read: NaN there shows it.
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < nh; ++h)
        for (std::int64_t j = len; j < cap; ++j)
          for (std::int64_t d = 0; d < hd; ++d) {
            const auto i = static_cast<std::size_t>(((b * nh + h) * cap + j) * hd + d);
            k[i] = v[i] = nan;
          }
  }

  // The straightforward formula in double: softmax over the valid keys of
  // q.k_j / sqrt(hd) + slope pos_j, then the probabilities times v.
  std::vector<double> reference() const {
    std::vector<double> out(static_cast<std::size_t>(B * nh * hd), 0.0);
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < nh; ++h) {
        std::vector<double> s(static_cast<std::size_t>(len), -INFINITY);
        double mx = -INFINITY;
        for (std::int64_t j = 0; j < len; ++j) {
          if (!valid[static_cast<std::size_t>(b * cap + j)]) continue;
          double dot = 0;
          for (std::int64_t d = 0; d < hd; ++d)
            dot += qkv[static_cast<std::size_t>(b * 3 * nh * hd + h * 3 * hd + d)] *
                   k[static_cast<std::size_t>(((b * nh + h) * cap + j) * hd + d)];
          s[static_cast<std::size_t>(j)] =
              dot / std::sqrt(static_cast<double>(hd)) +
              slopes[static_cast<std::size_t>(h)] * pos[static_cast<std::size_t>(b * cap + j)];
          mx = std::max(mx, s[static_cast<std::size_t>(j)]);
        }
        double sum = 0;
        for (auto& x : s) sum += (x = std::exp(x - mx));
        for (std::int64_t j = 0; j < len; ++j)
          for (std::int64_t d = 0; d < hd; ++d)
            if (valid[static_cast<std::size_t>(b * cap + j)])
              out[static_cast<std::size_t>((b * nh + h) * hd + d)] +=
                  s[static_cast<std::size_t>(j)] / sum *
                  v[static_cast<std::size_t>(((b * nh + h) * cap + j) * hd + d)];
      }
    return out;
  }

  template <class T>
  std::vector<T> run() const {
    std::vector<T> ctx(static_cast<std::size_t>(B * nh * hd), T(-7)),
        scores(static_cast<std::size_t>(B * nh * cap));
    const auto q = as<T>(qkv), kk = as<T>(k), vv = as<T>(v), p = as<T>(pos), sl = as<T>(slopes);
    O::decode_attention(ctx.data(), scores.data(), q.data(), kk.data(), vv.data(), p.data(),
                        valid.data(), sl.data(), B, nh, hd, cap, len);
    return ctx;
  }
};
}  // namespace

TEST_CASE("decode attention matches a double-precision reference, with padding and masked keys") {
  const DecodeCase c;
  const auto ref = c.reference();
  CHECK(max_rel_diff(to_double(c.run<double>()), ref) < 1e-13);
  CHECK(max_rel_diff(to_double(c.run<float>()), ref) < 1e-6);
  // A slope of the wrong head changes the result: the check sees ALiBi.
  DecodeCase swapped = c;
  std::swap(swapped.slopes[0], swapped.slopes[1]);
  CHECK(max_rel_diff(to_double(swapped.run<double>()), ref) > 1e-3);
}

TEST_CASE("kv_store puts each head's keys and values at their cache positions") {
  constexpr std::int64_t B = 2, S = 3, nh = 2, hd = 4, cap = 7, t0 = 2, ld = 3 * nh * hd;
  const auto qkv = as<float>(normals(B * S * ld, 4));
  std::vector<float> k(B * nh * cap * hd, -1.0f), v(k.size(), -1.0f);
  O::kv_store(k.data(), v.data(), qkv.data(), B, S, nh, hd, cap, t0);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < nh; ++h)
      for (std::int64_t t = 0; t < cap; ++t)
        for (std::int64_t d = 0; d < hd; ++d) {
          const auto i = static_cast<std::size_t>(((b * nh + h) * cap + t) * hd + d);
          const bool stored = t >= t0 && t < t0 + S;
          const std::size_t src =
              static_cast<std::size_t>((b * S + (t - t0)) * ld + h * 3 * hd + d);
          CHECK(k[i] == (stored ? qkv[src + hd] : -1.0f));
          CHECK(v[i] == (stored ? qkv[src + 2 * hd] : -1.0f));
        }
}

TEST_CASE("the decode attention of a sequence's last token equals the training forward's") {
  // Two rows of 9 tokens, row 1 left-padded by 4: attention_forward over all of them, and
  // kv_store of the same qkv then decode_attention of the last query alone.
  constexpr std::int64_t B = 2, Tn = 9, nh = 3, hd = 8, Hl = nh * hd, ld = 3 * Hl, cap = 12;
  const auto qkv = as<float>(normals(B * Tn * ld, 5));
  std::vector<float> pos(B * Tn), slopes;
  std::vector<std::uint8_t> valid(B * Tn);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < Tn; ++t) {
      const bool ok = b == 0 || t >= 4;
      valid[static_cast<std::size_t>(b * Tn + t)] = ok;
      pos[static_cast<std::size_t>(b * Tn + t)] =
          ok ? static_cast<float>(b == 0 ? t : t - 4) : 0.0f;
    }
  for (std::int64_t h = 0; h < nh; ++h)
    slopes.push_back(static_cast<float>(kernels::alibi_slope(h, nh)));
  std::vector<float> ctx(B * Tn * Hl), probs(B * nh * Tn * Tn);
  O::attention_forward(ctx.data(), probs.data(), qkv.data(), pos.data(), valid.data(),
                       slopes.data(), B, Tn, nh, hd);

  std::vector<float> k(B * nh * cap * hd), v(k.size()), cpos(B * cap), q(B * ld), out(B * Hl),
      scores(B * nh * cap);
  std::vector<std::uint8_t> cvalid(B * cap);
  O::kv_store(k.data(), v.data(), qkv.data(), B, Tn, nh, hd, cap, std::int64_t{0});
  for (std::int64_t b = 0; b < B; ++b) {
    std::copy_n(pos.data() + b * Tn, Tn, cpos.data() + b * cap);
    std::copy_n(valid.data() + b * Tn, Tn, cvalid.data() + b * cap);
    std::copy_n(qkv.data() + (b * Tn + Tn - 1) * ld, ld, q.data() + b * ld);
  }
  O::decode_attention(out.data(), scores.data(), q.data(), k.data(), v.data(), cpos.data(),
                      cvalid.data(), slopes.data(), B, nh, hd, cap, Tn);
  std::vector<double> want, got(out.begin(), out.end());
  for (std::int64_t b = 0; b < B; ++b)
    want.insert(want.end(), ctx.begin() + (b * Tn + Tn - 1) * Hl, ctx.begin() + (b * Tn + Tn) * Hl);
  CHECK(max_rel_diff(got, want) < 1e-6);
}

TEST_CASE(
    "prefill and decoding steps give the full forward's logits at every position, with left "
    "padding") {
  // Rows of 10, 6 and 8 tokens left-padded to 10; the first 7 columns are the prompt, the
  // other 3 are fed one step at a time (teacher forcing).
  Trainer<Tiny, Replicated<1>> t(random_model());
  constexpr std::int64_t B = 3, T = 10, P = 7;
  const std::int64_t lengths[B] = {10, 6, 8};
  Batch full(B, T);
  for (std::int64_t r = 0; r < B; ++r)
    for (std::int64_t k = 0; k < T; ++k) {
      const auto i = static_cast<std::size_t>(r * T + k);
      const bool ok = k >= T - lengths[r];
      full.attention_mask[i] = ok;
      full.input_ids[i] = ok ? static_cast<std::int32_t>(5 + (r * 31 + k * 17) % 90) : pad;
    }
  const std::vector<float> want = t.logits(full);  // [B*T, V]
  Batch prompt(B, P);
  for (std::int64_t r = 0; r < B; ++r)
    for (std::int64_t k = 0; k < P; ++k) {
      prompt.input_ids[static_cast<std::size_t>(r * P + k)] =
          full.input_ids[static_cast<std::size_t>(r * T + k)];
      prompt.attention_mask[static_cast<std::size_t>(r * P + k)] =
          full.attention_mask[static_cast<std::size_t>(r * T + k)];
    }
  auto& m = t.model();
  const std::int64_t before =
      m.arena().stats().current[static_cast<std::size_t>(Memory::activations)];
  Decoder dec(m);
  auto cache = dec.kv_cache(B, T);
  // Keys and values of 3 blocks x 12 heads x 10 positions x 4 dims for 3 rows, in float,
  // the positions, the mask and the last hidden state: the arena's activations.
  const std::int64_t kv_bytes = 2 * 3 * B * 12 * T * 4 * 4 + B * T * (4 + 1) + B * 48 * 4;
  CHECK(m.arena().stats().current[static_cast<std::size_t>(Memory::activations)] - before ==
        kv_bytes);
  dec.prefill(prompt, cache);
  CHECK(cache.length == P);
  const std::int64_t cols = m.vocab_shard().rows;
  std::vector<float> got(static_cast<std::size_t>(B * cols));
  double worst = 0;
  for (std::int64_t pos = P - 1; pos < T; ++pos) {
    if (pos >= P) {
      std::vector<std::int32_t> ids;
      for (std::int64_t r = 0; r < B; ++r)
        ids.push_back(full.input_ids[static_cast<std::size_t>(r * T + pos)]);
      dec.decode(ids, cache);
      CHECK(cache.length == pos + 1);
    }
    m.logits(cache.hidden.data(), B, got.data());
    for (std::int64_t r = 0; r < B; ++r) {
      CAPTURE(pos);
      CAPTURE(r);
      std::vector<double> a(got.begin() + r * cols, got.begin() + r * cols + Tiny::vocab_size);
      std::vector<double> b(want.begin() + (r * T + pos) * Tiny::vocab_size,
                            want.begin() + (r * T + pos + 1) * Tiny::vocab_size);
      worst = std::max(worst, max_rel_diff(a, b));
    }
  }
  CHECK(worst < 1e-5);
  // A full cache refuses another step, naming its size.
  CHECK_THROWS_WITH_AS(dec.decode(std::vector<std::int32_t>(B, 5), cache),
                       doctest::Contains("10 positions"), Error);
}

TEST_CASE("greedy generation under TensorSplit<2> equals the single-rank one") {
  const std::vector<std::vector<std::int32_t>> rows{
      {11, 25, 40, 7, 93, 60, 18}, {52, 8, 71}, {30, 30, 64, 12, 5}};
  Batch p(3, 7);
  for (std::size_t r = 0; r < rows.size(); ++r)
    for (std::size_t k = 0; k < 7; ++k) {
      const std::size_t off = 7 - rows[r].size(), i = r * 7 + k;
      p.attention_mask[i] = k >= off;
      p.input_ids[i] = k >= off ? rows[r][k - off] : pad;
    }
  const auto options = [](std::vector<std::vector<float>>& logits) {
    GenerateOptions o;
    o.max_new_tokens = 10;
    o.eos_id = -1;
    o.on_step = [&logits](std::int64_t, std::span<const float> l, std::span<const std::uint8_t>) {
      logits.emplace_back(l.begin(), l.end());
    };
    return o;
  };
  Trainer<Tiny, Replicated<1>> one(random_model());
  std::vector<std::vector<float>> one_logits;
  const Generated want = greedy_generate(one.model(), p.view(), options(one_logits));
  REQUIRE(one_logits.size() == 10);

  std::vector<Generated> got(2);
  std::vector<std::vector<std::vector<float>>> got_logits(2);
  run_ranks(2, [&](ThreadComm& comm) {
    Trainer<Tiny, TP2> t(comm, random_model());
    const auto r = static_cast<std::size_t>(comm.rank());
    got[r] = greedy_generate(t.model(), p.view(), options(got_logits[r]));
  });
  for (std::size_t r = 0; r < 2; ++r) {
    CAPTURE(r);
    CHECK(got[r].tokens == want.tokens);
    CHECK(got[r].steps == want.steps);
    REQUIRE(got_logits[r].size() == one_logits.size());
    double worst = 0;
    for (std::size_t s = 0; s < one_logits.size(); ++s)
      worst = std::max(worst, max_rel_diff(to_double(got_logits[r][s]), to_double(one_logits[s])));
    CHECK(worst < 1e-5);
  }
  // Without on_step the ranks gather no logits and still agree on every token.
  run_ranks(2, [&](ThreadComm& comm) {
    Trainer<Tiny, TP2> t(comm, random_model());
    GenerateOptions o;
    o.max_new_tokens = 10;
    o.eos_id = -1;
    got[static_cast<std::size_t>(comm.rank())] = greedy_generate(t.model(), p.view(), o);
  });
  CHECK(got[0].tokens == want.tokens);
  CHECK(got[1].tokens == want.tokens);
}

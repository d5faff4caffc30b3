// Decoding on the GPU: the KV-cache store and decode attention of Ops<Cuda> against Ops<Cpu>
// (in float on the same values, with left padding and a masked key); prefill + decoding
// steps against the same device's full forward at every position; greedy tokens of the
// fp32 model equal to the CPU's; the cache's row gather, the next-token ops (scores, penalty,
// top k) and beam search (the cache rows reordered and the candidates chosen on the device)
// equal to the CPU's.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "cpu_reference.hpp"
#include "cuda_test_util.hpp"
#include "seqpar/backend/kernels.hpp"
#include "seqpar/nn/generate.hpp"
#include "seqpar/train/trainer.hpp"
#include "trainer_reference.hpp"

using namespace seqpar;
using namespace seqpar::test;
using O = Ops<Cuda>;

namespace {

struct DecodeShape {
  std::int64_t B, nh, hd, cap, len;
};

// Runs both backends on a cache of s.len filled positions: row 0 all valid, row 1
// left-padded by 3 with key 5 masked, row 2 (if any) only its last key valid. S is the
// type of pos and slopes on the device.
template <class T, class S>
void check_decode(const DecodeShape& s, std::uint64_t seed) {
  CAPTURE(s.B);
  CAPTURE(s.nh);
  CAPTURE(s.hd);
  CAPTURE(s.len);
  CudaArena arena;
  const std::int64_t Hl = s.nh * s.hd, ld = 3 * Hl, kv = s.B * s.nh * s.cap * s.hd;
  std::vector<float> pos(s.B * s.cap, 0.0f), slopes(s.nh);
  std::vector<std::uint8_t> valid(s.B * s.cap, 0);
  for (std::int64_t b = 0; b < s.B; ++b) {
    std::int64_t seen = 0;
    for (std::int64_t j = 0; j < s.len; ++j) {
      const bool ok =
          b % 3 == 0 || (b % 3 == 1 && j >= 3 && j != 5) || (b % 3 == 2 && j == s.len - 1);
      const auto i = static_cast<std::size_t>(b * s.cap + j);
      valid[i] = ok;
      seen += ok;
      pos[i] = ok ? detail::to_float(detail::from_float<S>(static_cast<float>(seen - 1))) : 0.0f;
    }
  }
  for (std::int64_t h = 0; h < s.nh; ++h)
    slopes[static_cast<std::size_t>(h)] =
        detail::to_float(detail::from_float<S>(static_cast<float>(kernels::alibi_slope(h, s.nh))));
  // The prompt's qkv [B*len, 3Hl] fills positions [0, len - 1); the new token's [B, 3Hl]
  // goes to len - 1 and attends to all of them.
  const auto prompt = random_values<T>(s.B * (s.len - 1) * ld, seed);
  const auto step = random_values<T>(s.B * ld, seed + 1);

  std::vector<float> k(kv, 0.0f), v(kv, 0.0f), ctx(s.B * Hl), scores(s.B * s.nh * s.cap);
  CpuRef::kv_store(k.data(), v.data(), prompt.data(), s.B, s.len - 1, s.nh, s.hd, s.cap, 0);
  CpuRef::kv_store(k.data(), v.data(), step.data(), s.B, 1, s.nh, s.hd, s.cap, s.len - 1);
  CpuRef::decode_attention(ctx.data(), scores.data(), step.data(), k.data(), v.data(), pos.data(),
                           valid.data(), slopes.data(), s.B, s.nh, s.hd, s.cap, s.len);

  auto d_prompt = to_device<T>(arena, prompt), d_step = to_device<T>(arena, step);
  auto d_pos = to_device<S>(arena, pos), d_slopes = to_device<S>(arena, slopes);
  auto d_valid = to_device_raw(arena, valid);
  DeviceBuffer<T> d_k(arena, kv, Memory::buffers), d_v(arena, kv, Memory::buffers);
  DeviceBuffer<T> d_ctx(arena, s.B * Hl, Memory::buffers);
  DeviceBuffer<float> d_scores(arena, s.B * s.nh * s.cap, Memory::buffers);
  O::fill(d_ctx.data(), detail::from_float<T>(123.0f), s.B * Hl);  // overwritten whole
  O::kv_store(d_k.data(), d_v.data(), d_prompt.data(), s.B, s.len - 1, s.nh, s.hd, s.cap, 0);
  O::kv_store(d_k.data(), d_v.data(), d_step.data(), s.B, 1, s.nh, s.hd, s.cap, s.len - 1);
  O::decode_attention(d_ctx.data(), d_scores.data(), d_step.data(), d_k.data(), d_v.data(),
                      d_pos.data(), d_valid.data(), d_slopes.data(), s.B, s.nh, s.hd, s.cap, s.len);
  // The store moves values: the same bits.
  CHECK(same_bits(to_host(d_k), k));
  CHECK(same_bits(to_host(d_v), v));
  SEQPAR_CHECK_CLOSE(T, to_host(d_ctx), ctx);
}

// ||a - b|| / ||b|| over the real vocabulary columns of rows [0, rows): a holds `cols`
// columns a row, b `vocab` from row b0 on with a stride of `stride` rows.
double logits_err(const std::vector<float>& a, std::int64_t cols, const std::vector<float>& b,
                  std::int64_t b0, std::int64_t stride, std::int64_t rows, std::int64_t vocab) {
  std::vector<float> x, y;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < vocab; ++c) {
      x.push_back(a[static_cast<std::size_t>(r * cols + c)]);
      y.push_back(b[static_cast<std::size_t>((b0 + r * stride) * vocab + c)]);
    }
  return rel_err(x, y);
}

// Prefill of the first 8 columns of generation_batch(), then the other 4 fed one step at
// a time: each step's logits against the full forward's at that position, on the device.
// 16-bit storage: the full forward rounds the attention probabilities to T before P v,
// decoding keeps them in float; 2e-2 leaves room for that over 2 layers.
template <class Prec>
void check_cached_equals_full(double tol) {
  using TrainerT = Trainer<TrainTiny, Replicated<1>, Cuda, Prec>;
  using T = typename TrainerT::T;
  constexpr std::int64_t B = 3, Tn = 12, P = 8, V = TrainTiny::vocab_size;
  TrainerT t(generation_options());
  const Batch full = generation_batch(Tn);
  std::vector<float> want;
  for (const auto& x : t.logits(full)) want.push_back(static_cast<float>(x));  // [B*Tn, V]
  auto& m = t.model();
  Decoder dec(m);
  auto cache = dec.kv_cache(B, Tn);
  dec.prefill(generation_batch(P), cache);
  const std::int64_t cols = m.vocab_shard().rows;
  DeviceBuffer<T> logits(m.arena(), B * cols, Memory::buffers);
  for (std::int64_t pos = P - 1; pos < Tn; ++pos) {
    CAPTURE(pos);
    if (pos >= P) {
      std::vector<std::int32_t> ids;
      for (std::int64_t r = 0; r < B; ++r)
        ids.push_back(full.input_ids[static_cast<std::size_t>(r * Tn + pos)]);
      dec.decode(ids, cache);
    }
    m.logits(cache.hidden.data(), B, logits.data());
    const double err = logits_err(to_host(logits), cols, want, pos, Tn, B, V);
    INFO("rel err ", err);
    CHECK(err < tol);
  }
}

}  // namespace

TEST_CASE_TEMPLATE("kv_store and decode attention match Ops<Cpu>", T, float, __nv_bfloat16,
                   __half) {
  // hd 64 as in BLOOM, a head of 8, a cache longer than a block of threads, 3 x 4 heads.
  for (const DecodeShape& s : {DecodeShape{3, 4, 64, 40, 37}, DecodeShape{2, 3, 8, 9, 9},
                               DecodeShape{3, 2, 64, 300, 257}}) {
    check_decode<T, float>(s, 500);
    check_decode<T, T>(s, 600);
  }
}

TEST_CASE("decoding steps give the full forward's logits on the GPU, fp32") {
  check_cached_equals_full<Fp32>(1e-4);
}

TEST_CASE("decoding steps give the full forward's logits on the GPU, bf16 and fp16") {
  check_cached_equals_full<Bf16Mixed>(2e-2);
  check_cached_equals_full<Fp16Mixed>(2e-2);
}

TEST_CASE("greedy generation on the GPU chooses the CPU's tokens (fp32)") {
  Trainer<TrainTiny, Replicated<1>, Cuda, Fp32> t(generation_options());
  GenerateOptions o;
  o.max_new_tokens = 10;
  o.eos_id = -1;
  std::int64_t calls = 0;
  o.on_step = [&](std::int64_t, std::span<const float> l, std::span<const std::uint8_t> a) {
    ++calls;
    CHECK(l.size() == std::size_t{3} * TrainTiny::vocab_size);
    CHECK(a.size() == 3);
  };
  const Generated g = greedy_generate(t.model(), generation_batch(8).view(), o);
  CHECK(calls == 10);
  CHECK(g.tokens == cpu_greedy_tokens(8, 10));
}

TEST_CASE("greedy generation runs on a bf16 model") {
  Trainer<TrainTiny, Replicated<1>, Cuda, Bf16Mixed> t(generation_options());
  GenerateOptions o;
  o.max_new_tokens = 6;
  o.eos_id = -1;
  const Generated g = greedy_generate(t.model(), generation_batch(8).view(), o);
  CHECK(g.steps == 6);
  for (const auto& row : g.tokens) {
    CHECK(row.size() == 6);
    for (auto id : row) CHECK((id >= 0 && id < TrainTiny::vocab_size));
  }
}

TEST_CASE_TEMPLATE("kv_gather matches Ops<Cpu> and leaves the unfilled positions", T, float,
                   __nv_bfloat16, __half) {
  CudaArena arena;
  constexpr std::int64_t B = 5, nh = 3, cap = 70, hd = 64, len = 41, n = B * nh * cap * hd;
  const auto src = random_values<T>(n, 700);
  const std::vector<std::int32_t> index{4, 0, 0, 2, 4};
  std::vector<float> want(n, 5.0f);
  CpuRef::kv_gather(want.data(), src.data(), index.data(), B, nh, cap, hd, len);
  auto d_src = to_device<T>(arena, src);
  auto d_dst = to_device<T>(arena, std::vector<float>(n, 5.0f));
  auto d_index = to_device_raw(arena, index);
  O::kv_gather(d_dst.data(), d_src.data(), d_index.data(), B, nh, cap, hd, len);
  CHECK(same_bits(to_host(d_dst), want));
}

TEST_CASE_TEMPLATE(
    "the next-token ops match Ops<Cpu>: maxima, sums of exps, scores, penalty, top k", T, float,
    __nv_bfloat16, __half) {
  CudaArena arena;
  // A vocabulary slice of 4990 real columns and 10 of padding (NaN: never read), from id 300;
  // logits rounded through T, and to integers in row 1 (many ties for the top k).
  constexpr std::int64_t rows = 6, cols = 5000, real = 4990, row0 = 300, k = 8;
  auto L = random_values<T>(rows * cols, 900, 3.0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      float& x = L[static_cast<std::size_t>(r * cols + c)];
      if (c >= real)
        x = std::numeric_limits<float>::quiet_NaN();
      else if (r == 1)
        x = std::round(x);
    }
  auto d_L = to_device<T>(arena, L);

  std::vector<float> mx(rows);
  DeviceBuffer<float> d_mx(arena, rows, Memory::buffers);
  CpuRef::next_token_max(mx.data(), L.data(), rows, cols, real);
  O::next_token_max(d_mx.data(), d_L.data(), rows, cols, real);
  CHECK(same_bits(to_host(d_mx), mx));

  std::vector<double> sum(rows), d_sum_host(rows);
  DeviceBuffer<double> d_sum(arena, rows, Memory::buffers);
  CpuRef::next_token_sum_exp(sum.data(), L.data(), mx.data(), rows, cols, real);
  O::next_token_sum_exp(d_sum.data(), d_L.data(), d_mx.data(), rows, cols, real);
  O::download(d_sum_host.data(), d_sum.data(), rows);
  for (std::int64_t r = 0; r < rows; ++r)
    CHECK(d_sum_host[r] == doctest::Approx(sum[r]).epsilon(1e-12));

  // Scores from the same max and lse, with seen ids in and out of the slice.
  std::vector<float> lse(rows);
  for (std::int64_t r = 0; r < rows; ++r) lse[r] = static_cast<float>(std::log(sum[r]));
  std::vector<std::int32_t> seen;
  std::vector<std::int64_t> start{0};
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int32_t id = static_cast<std::int32_t>(r); id < row0 + cols + 40; id += 97)
      seen.push_back(id);
    start.push_back(static_cast<std::int64_t>(seen.size()));
  }
  auto d_lse = to_device_raw(arena, lse);
  auto d_seen = to_device_raw(arena, seen);
  auto d_start = to_device_raw(arena, start);
  for (const bool log_probs : {false, true}) {
    CAPTURE(log_probs);
    std::vector<float> out(rows * cols, -7.0f);
    auto d_out = to_device_raw(arena, out);
    CpuRef::next_token_scores(out.data(), L.data(), log_probs ? mx.data() : nullptr,
                              log_probs ? lse.data() : nullptr, seen.data(), start.data(), 2.0f,
                              rows, cols, row0, real);
    O::next_token_scores(d_out.data(), d_L.data(), log_probs ? d_mx.data() : nullptr,
                         log_probs ? d_lse.data() : nullptr, d_seen.data(), d_start.data(), 2.0f,
                         rows, cols, row0, real);
    CHECK(same_bits(to_host(d_out), out));

    // The top k of those scores, plus a base a row, on both from the same scores.
    const std::vector<float> base{0.0f, -1.0e9f, 2.5f, -0.5f, 1.0f, 0.25f};
    auto d_base = to_device_raw(arena, base);
    for (const bool with_base : {false, true}) {
      CAPTURE(with_base);
      std::vector<float> score(rows * k);
      std::vector<std::int64_t> token(rows * k), d_token_host(rows * k);
      DeviceBuffer<float> d_score(arena, rows * k, Memory::buffers);
      DeviceBuffer<std::int64_t> d_token(arena, rows * k, Memory::buffers);
      CpuRef::next_token_top_k(score.data(), token.data(), out.data(),
                               with_base ? base.data() : nullptr, rows, cols, row0, real, k);
      O::next_token_top_k(d_score.data(), d_token.data(), d_out.data(),
                          with_base ? d_base.data() : nullptr, rows, cols, row0, real, k);
      CHECK(same_bits(to_host(d_score), score));
      O::download(d_token_host.data(), d_token.data(), rows * k);
      CHECK(d_token_host == token);
    }
  }
  // Fewer real columns than k: the rest (-inf, -1), as on the CPU.
  std::vector<float> score(rows * k);
  std::vector<std::int64_t> token(rows * k), d_token_host(rows * k);
  DeviceBuffer<float> d_score(arena, rows * k, Memory::buffers);
  DeviceBuffer<std::int64_t> d_token(arena, rows * k, Memory::buffers);
  std::vector<float> Lf(L);
  CpuRef::next_token_top_k(score.data(), token.data(), Lf.data(), nullptr, rows, cols, row0, 3, k);
  auto d_Lf = to_device_raw(arena, Lf);
  O::next_token_top_k(d_score.data(), d_token.data(), d_Lf.data(), nullptr, rows, cols, row0, 3, k);
  CHECK(same_bits(to_host(d_score), score));
  O::download(d_token_host.data(), d_token.data(), rows * k);
  CHECK(d_token_host == token);
  CHECK(token[k - 1] == -1);
  // NaNs rank first, the first of them first, as on the CPU (decoding then refuses the row).
  const std::vector<float> with_nan{1.0f, std::numeric_limits<float>::quiet_NaN(), 3.0f,
                                    std::numeric_limits<float>::quiet_NaN(), -INFINITY};
  std::vector<float> nan_score(3);
  std::vector<std::int64_t> nan_token(3), d_nan_token_host(3);
  CpuRef::next_token_top_k(nan_score.data(), nan_token.data(), with_nan.data(), nullptr, 1, 5, 10,
                           5, 3);
  auto d_with_nan = to_device_raw(arena, with_nan);
  O::next_token_top_k(d_score.data(), d_token.data(), d_with_nan.data(), nullptr, 1, 5, 10, 5, 3);
  O::download(d_nan_token_host.data(), d_token.data(), 3);
  CHECK(d_nan_token_host == nan_token);
  CHECK(nan_token == std::vector<std::int64_t>{11, 13, 12});
}

TEST_CASE("beam search on the GPU chooses the CPU's tokens (fp32), with and without the penalty") {
  for (const double penalty : {1.0, 2.0}) {
    CAPTURE(penalty);
    Trainer<TrainTiny, Replicated<1>, Cuda, Fp32> t(generation_options());
    GenerateOptions o;
    o.max_new_tokens = 10;
    o.eos_id = 60;
    o.num_beams = 4;
    o.repetition_penalty = penalty;
    const Generated g = generate(t.model(), generation_batch(8).view(), o);
    const Generated want = cpu_beam_search(8, 10, 4, penalty);
    CHECK(g.tokens == want.tokens);
    CHECK(g.finished == want.finished);
    REQUIRE(g.scores.size() == want.scores.size());
    for (std::size_t r = 0; r < want.scores.size(); ++r)
      CHECK(g.scores[r] == doctest::Approx(want.scores[r]).epsilon(1e-4));
  }
}

TEST_CASE("beam search runs on a bf16 model") {
  Trainer<TrainTiny, Replicated<1>, Cuda, Bf16Mixed> t(generation_options());
  GenerateOptions o;
  o.max_new_tokens = 6;
  o.eos_id = -1;
  o.num_beams = 3;
  o.repetition_penalty = 2.0;
  const Generated g = generate(t.model(), generation_batch(8).view(), o);
  for (const auto& row : g.tokens) {
    CHECK(row.size() == 6);
    for (auto id : row) CHECK((id >= 0 && id < TrainTiny::vocab_size));
  }
}

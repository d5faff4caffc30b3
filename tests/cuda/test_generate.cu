// Decoding on the GPU: the KV-cache store and decode attention of Ops<Cuda> against Ops<Cpu>
// (in float on the same values, with left padding and a masked key); prefill + decoding
// steps against the same device's full forward at every position; greedy tokens of the
// fp32 model equal to the CPU's; the cache's row gather and beam search (the cache rows
// reordered on the device) equal to the CPU's.
#include <doctest/doctest.h>

#include <cstdint>
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
  auto cache = m.kv_cache(B, Tn);
  m.prefill(generation_batch(P), cache);
  const std::int64_t cols = m.vocab_shard().rows;
  DeviceBuffer<T> logits(m.arena(), B * cols, Memory::buffers);
  for (std::int64_t pos = P - 1; pos < Tn; ++pos) {
    CAPTURE(pos);
    if (pos >= P) {
      std::vector<std::int32_t> ids;
      for (std::int64_t r = 0; r < B; ++r)
        ids.push_back(full.input_ids[static_cast<std::size_t>(r * Tn + pos)]);
      m.decode(ids, cache);
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

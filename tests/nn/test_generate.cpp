// Greedy decoding with a KV cache against full re-forwards: on a tiny random model with
// left padding, every step's logits and every chosen token equal those of the whole
// growing sequence run through Trainer::logits without a cache.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "nn_test_util.hpp"
#include "seqpar/backend/cpu/ops.hpp"
#include "seqpar/nn/generate.hpp"
#include "seqpar/train/trainer.hpp"

using namespace seqpar;

namespace {
// 12 heads: ALiBi slopes of a non-power-of-two head count.
using Tiny = test::DecodeModel;
using test::pad;

// Prompts of lengths 7, 3 and 5, left-padded to 7.
Batch prompts() {
  const std::vector<std::vector<std::int32_t>> rows{
      {11, 25, 40, 7, 93, 60, 18}, {52, 8, 71}, {30, 30, 64, 12, 5}};
  Batch b(3, 7);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const std::size_t off = 7 - rows[r].size();
    for (std::size_t t = 0; t < 7; ++t) {
      const std::size_t i = r * 7 + t;
      b.attention_mask[i] = t >= off;
      b.input_ids[i] = t >= off ? rows[r][t - off] : pad;
    }
  }
  return b;
}

using test::random_model;

// The tokens of row r: its prompt's and those generated so far.
std::vector<std::int32_t> row_tokens(const Batch& p, std::int64_t r,
                                     const std::vector<std::int32_t>& gen) {
  std::vector<std::int32_t> out;
  for (std::int64_t t = 0; t < p.seq; ++t)
    if (p.attention_mask[static_cast<std::size_t>(r * p.seq + t)])
      out.push_back(p.input_ids[static_cast<std::size_t>(r * p.seq + t)]);
  out.insert(out.end(), gen.begin(), gen.end());
  return out;
}

// Next-token logits of each row by re-running the whole left-padded batch of sequences.
std::vector<std::vector<float>> reforward(Trainer<Tiny, Replicated<1>>& t,
                                          const std::vector<std::vector<std::int32_t>>& seqs) {
  std::size_t seq = 0;
  for (const auto& s : seqs) seq = std::max(seq, s.size());
  Batch b(static_cast<std::int64_t>(seqs.size()), static_cast<std::int64_t>(seq));
  for (std::size_t r = 0; r < seqs.size(); ++r)
    for (std::size_t k = 0; k < seq; ++k) {
      const std::size_t off = seq - seqs[r].size(), i = r * seq + k;
      b.attention_mask[i] = k >= off;
      b.input_ids[i] = k >= off ? seqs[r][k - off] : pad;
    }
  const std::vector<float> all = t.logits(b);
  std::vector<std::vector<float>> out;
  for (std::size_t r = 0; r < seqs.size(); ++r) {
    const auto* row = all.data() + ((r + 1) * seq - 1) * Tiny::vocab_size;
    out.emplace_back(row, row + Tiny::vocab_size);
  }
  return out;
}

double max_rel_diff(const float* a, const std::vector<float>& b) {
  double worst = 0, scale = 0;
  for (std::size_t v = 0; v < b.size(); ++v) {
    worst = std::max(worst, std::abs(static_cast<double>(a[v]) - b[v]));
    scale = std::max(scale, std::abs(static_cast<double>(b[v])));
  }
  return worst / scale;
}
}  // namespace

TEST_CASE("cached greedy decoding equals full re-forwards step by step, with left padding") {
  Trainer<Tiny, Replicated<1>> t(random_model());
  const Batch p = prompts();
  std::vector<std::vector<float>> step_logits;
  std::vector<std::vector<std::uint8_t>> step_active;
  GenerateOptions o;
  o.max_new_tokens = 12;
  o.eos_id = -1;  // no eos: every row runs all 12 steps
  o.on_step = [&](std::int64_t, std::span<const float> l, std::span<const std::uint8_t> a) {
    step_logits.emplace_back(l.begin(), l.end());
    step_active.emplace_back(a.begin(), a.end());
  };
  const Generated g = greedy_generate(t.model(), p.view(), o);
  CHECK(g.steps == 12);
  REQUIRE(step_logits.size() == 12);
  for (std::int64_t r = 0; r < 3; ++r) {
    CHECK(g.tokens[static_cast<std::size_t>(r)].size() == 12);
    CHECK_FALSE(g.finished[static_cast<std::size_t>(r)]);
  }
  double worst = 0;
  std::int64_t close_calls = 0;
  for (std::size_t s = 0; s < 12; ++s) {
    std::vector<std::vector<std::int32_t>> seqs;
    for (std::int64_t r = 0; r < 3; ++r) {
      const auto& gen = g.tokens[static_cast<std::size_t>(r)];
      seqs.push_back(row_tokens(
          p, r,
          std::vector<std::int32_t>(gen.begin(), gen.begin() + static_cast<std::ptrdiff_t>(s))));
    }
    const auto ref = reforward(t, seqs);
    for (std::size_t r = 0; r < 3; ++r) {
      CAPTURE(s);
      CAPTURE(r);
      CHECK(step_active[s][r] == 1);
      const float* got = step_logits[s].data() + r * Tiny::vocab_size;
      worst = std::max(worst, max_rel_diff(got, ref[r]));
      // The chosen token is the re-forward's argmax (unless the best two are a hair apart).
      auto sorted = ref[r];
      std::sort(sorted.begin(), sorted.end(), std::greater<>());
      const auto best = static_cast<std::int32_t>(std::max_element(ref[r].begin(), ref[r].end()) -
                                                  ref[r].begin());
      if (sorted[0] - sorted[1] > 1e-4f * std::abs(sorted[0]))
        CHECK(g.tokens[r][s] == best);
      else
        ++close_calls;
    }
  }
  CHECK(worst < 1e-5);
  CHECK(close_calls == 0);
}

TEST_CASE("a row's generation does not depend on the other rows or on its padding") {
  Trainer<Tiny, Replicated<1>> t(random_model());
  const Batch p = prompts();
  GenerateOptions o;
  o.max_new_tokens = 8;
  o.eos_id = -1;
  const Generated batched = greedy_generate(t.model(), p.view(), o);
  for (std::int64_t r = 0; r < 3; ++r) {
    const auto toks = row_tokens(p, r, {});
    // Alone, without padding; and alone with three extra padding positions.
    for (std::size_t extra : {std::size_t{0}, std::size_t{3}}) {
      Batch one(1, static_cast<std::int64_t>(toks.size() + extra));
      for (std::size_t k = 0; k < toks.size() + extra; ++k) {
        one.attention_mask[k] = k >= extra;
        one.input_ids[k] = k >= extra ? toks[k - extra] : pad;
      }
      const Generated alone = greedy_generate(t.model(), one.view(), o);
      CHECK(alone.tokens[0] == batched.tokens[static_cast<std::size_t>(r)]);
    }
  }
}

TEST_CASE("rows stop at eos, the rest run on to max_new_tokens") {
  Trainer<Tiny, Replicated<1>> t(random_model());
  const Batch p = prompts();
  GenerateOptions o;
  o.max_new_tokens = 10;
  o.eos_id = -1;
  const Generated free = greedy_generate(t.model(), p.view(), o);
  // Make row 1's third token the eos: row 1 stops there, the others are unchanged.
  o.eos_id = free.tokens[1][2];
  std::vector<std::vector<std::uint8_t>> active;
  o.on_step = [&](std::int64_t, std::span<const float>, std::span<const std::uint8_t> a) {
    active.emplace_back(a.begin(), a.end());
  };
  const Generated g = greedy_generate(t.model(), p.view(), o);
  CHECK(g.finished[1] == 1);
  CHECK(g.tokens[1] ==
        std::vector<std::int32_t>(free.tokens[1].begin(), free.tokens[1].begin() + 2));
  for (std::size_t r : {std::size_t{0}, std::size_t{2}}) {
    const auto& f = free.tokens[r];
    const auto stop = std::find(f.begin(), f.end(), o.eos_id);
    CHECK(g.tokens[r] == std::vector<std::int32_t>(f.begin(), stop));
    CHECK(g.finished[r] == (stop != f.end()));
  }
  REQUIRE(active.size() >= 4);
  CHECK(active[2][1] == 1);
  CHECK(active[3][1] == 0);
  // max_new_tokens = 0 generates nothing.
  o.max_new_tokens = 0;
  const Generated none = greedy_generate(t.model(), p.view(), o);
  CHECK(none.steps == 0);
  CHECK(none.tokens[0].empty());
}

TEST_CASE("generation refuses right-padded or empty prompts and partial models") {
  Trainer<Tiny, Replicated<1>> t(random_model());
  Batch right(1, 3);
  right.input_ids = {5, 6, pad};
  right.attention_mask = {1, 1, 0};
  CHECK_THROWS_WITH_AS(greedy_generate(t.model(), right.view()), doctest::Contains("left-padded"),
                       Error);
  Batch empty(1, 2);
  empty.attention_mask = {0, 0};
  CHECK_THROWS_WITH_AS(greedy_generate(t.model(), empty.view()), doctest::Contains("has no tokens"),
                       Error);
  Batch outside(1, 1);
  outside.input_ids = {97};
  CHECK_THROWS_WITH_AS(greedy_generate(t.model(), outside.view()),
                       doctest::Contains("outside the vocabulary"), Error);
  Arena arena;
  BloomStack<Tiny, Cpu, float> stage(arena, {}, StageLayers{0, 2, true, false});
  Batch ok(1, 1);
  ok.input_ids = {5};
  CHECK_THROWS_WITH_AS(greedy_generate(stage, ok.view()),
                       doctest::Contains("needs the whole model"), Error);
}

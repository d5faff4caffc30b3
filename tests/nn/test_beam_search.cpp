// Beam search with the KV cache: the cache's row gather (kv_gather, select_cache_rows); the
// returned hypothesis' score against full re-forwards of its tokens (which it only matches
// if every step's cache rows followed the chosen beams); one beam against greedy; a prompt's
// result independent of the batch and its padding; TensorSplit<2> against one rank; the
// repetition penalty's rule on greedy logits; the options a user can get wrong; NaN logits
// refused on every rank.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "nn_test_util.hpp"
#include "seqpar/backend/cpu/ops.hpp"
#include "seqpar/comm/thread_comm.hpp"
#include "seqpar/nn/generate.hpp"
#include "seqpar/train/trainer.hpp"

using namespace seqpar;

namespace {
// 12 heads (6 a rank under TensorSplit<2>); vocab 97 is padded to 256 there, so rank 1
// holds 0 real columns past 128: the top candidates must come from rank 0.
using Tiny = test::DecodeModel;
using test::pad;

using test::random_model;

Batch left_padded(const std::vector<std::vector<std::int32_t>>& rows) {
  std::size_t seq = 0;
  for (const auto& r : rows) seq = std::max(seq, r.size());
  Batch b(static_cast<std::int64_t>(rows.size()), static_cast<std::int64_t>(seq));
  for (std::size_t r = 0; r < rows.size(); ++r)
    for (std::size_t k = 0; k < seq; ++k) {
      const std::size_t off = seq - rows[r].size(), i = r * seq + k;
      b.attention_mask[i] = k >= off;
      b.input_ids[i] = k >= off ? rows[r][k - off] : pad;
    }
  return b;
}

const std::vector<std::vector<std::int32_t>> kPrompts{
    {11, 25, 40, 7, 93, 60, 18}, {52, 8, 71}, {30, 30, 64, 12, 5}};

// sum_t penalised log_softmax(logits of prefix_t)[token_t] over the generated tokens (and
// the eos if it ended there), by re-running the whole growing sequence without a cache.
double reforward_score(Trainer<Tiny, Replicated<1>>& t, const std::vector<std::int32_t>& prompt,
                       std::vector<std::int32_t> gen, bool finished, std::int32_t eos,
                       double penalty) {
  if (finished) gen.push_back(eos);
  double sum = 0;
  std::vector<std::int32_t> seq = prompt;
  for (const std::int32_t tok : gen) {
    const Batch b = left_padded({seq});
    const auto all = t.logits(b.view());
    const float* l = all.data() + (seq.size() - 1) * Tiny::vocab_size;
    double mx = -1e300, s = 0;
    for (int v = 0; v < Tiny::vocab_size; ++v) mx = std::max(mx, double(l[v]));
    for (int v = 0; v < Tiny::vocab_size; ++v) s += std::exp(double(l[v]) - mx);
    double lp = double(l[tok]) - mx - std::log(s);
    if (std::find(seq.begin(), seq.end(), tok) != seq.end())
      lp = lp < 0 ? lp * penalty : lp / penalty;
    sum += lp;
    seq.push_back(tok);
  }
  return sum / static_cast<double>(gen.size());
}
// Element 0 of token id's row of the (tied) word embeddings set to NaN, on the rank that
// holds the row: its logit is NaN for every row on that rank only.
template <class Stack>
void poison_token(Stack& s, std::int32_t id) {
  for (std::size_t u = 0; u < s.units().size(); ++u)
    for (const auto& p : s.units()[u].params)
      if (p.name == "word_embeddings.weight" && id >= p.row0 && id < p.row0 + p.local_rows)
        s.params(u)[p.offset + (id - p.row0) * p.local_cols] =
            std::numeric_limits<float>::quiet_NaN();
}
}  // namespace

TEST_CASE("kv_gather copies the filled positions of the chosen rows, and only those") {
  using O = Ops<Cpu>;
  constexpr std::int64_t B = 3, nh = 2, cap = 6, hd = 4, len = 4, n = B * nh * cap * hd;
  std::vector<float> src(n), dst(n, -7.0f);
  for (std::int64_t i = 0; i < n; ++i) src[static_cast<std::size_t>(i)] = static_cast<float>(i);
  const std::vector<std::int32_t> index{2, 0, 2};
  O::kv_gather(dst.data(), src.data(), index.data(), B, nh, cap, hd, len);
  for (std::int64_t r = 0; r < B; ++r)
    for (std::int64_t h = 0; h < nh; ++h)
      for (std::int64_t t = 0; t < cap; ++t)
        for (std::int64_t d = 0; d < hd; ++d) {
          const auto at = static_cast<std::size_t>(((r * nh + h) * cap + t) * hd + d);
          const auto want = static_cast<std::size_t>(
              ((index[static_cast<std::size_t>(r)] * nh + h) * cap + t) * hd + d);
          CHECK(dst[at] == (t < len ? src[want] : -7.0f));
        }
}

TEST_CASE("select_cache_rows repeats and reorders a cache's rows; decoding goes on from them") {
  Trainer<Tiny, Replicated<1>> t(random_model());
  auto& m = t.model();
  const Batch p = left_padded(kPrompts);
  Decoder dec(m);
  auto base = dec.kv_cache(3, p.seq + 4);
  dec.prefill(p.view(), base);
  // Rows 2, 0, 0, 1 of the prompts: then, in place, the reverse order.
  auto big = dec.kv_cache(4, p.seq + 4);
  const std::vector<std::int32_t> pick{2, 0, 0, 1}, reverse{3, 2, 1, 0};
  dec.select_cache_rows(big, base, pick);
  dec.select_cache_rows(big, big, reverse);
  CHECK(big.length == p.seq);
  CHECK(big.next_pos == std::vector<std::int64_t>{3, 7, 7, 5});
  // Two decoding steps from the gathered cache equal those from a prefill of the same rows.
  const Batch q = left_padded({kPrompts[1], kPrompts[0], kPrompts[0], kPrompts[2]});
  auto want = dec.kv_cache(4, p.seq + 4);
  dec.prefill(q.view(), want);
  const std::int64_t cols = m.vocab_shard().rows;
  std::vector<float> a(static_cast<std::size_t>(4 * cols)), b(a.size());
  for (int step = 0; step < 2; ++step) {
    const std::vector<std::int32_t> ids{5, 9, 9 + step, 40};
    dec.decode(ids, big);
    dec.decode(ids, want);
    m.logits(big.hidden.data(), 4, a.data());
    m.logits(want.hidden.data(), 4, b.data());
    for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(a[i] == doctest::Approx(b[i]).epsilon(1e-5));
  }
  CHECK_THROWS_WITH_AS(dec.select_cache_rows(big, base, std::vector<std::int32_t>{0, 1, 3, 0}),
                       doctest::Contains("index[2] = 3 is not a row"), Error);
  CHECK_THROWS_WITH_AS(dec.select_cache_rows(big, base, std::vector<std::int32_t>{0, 1}),
                       doctest::Contains("2 rows chosen into a cache of 4 rows"), Error);
}

TEST_CASE("beam search's best hypotheses score what full re-forwards of their tokens give") {
  Trainer<Tiny, Replicated<1>> t(random_model());
  const Batch p = left_padded(kPrompts);
  for (const double penalty : {1.0, 2.0}) {
    CAPTURE(penalty);
    GenerateOptions o;
    o.max_new_tokens = 9;
    o.num_beams = 4;
    o.repetition_penalty = penalty;
    // As eos, the third token of prompt 0's best hypothesis without one: some hypotheses
    // end early (whether one of them is the best is the scores' business; the golden file
    // has prompts whose best hypothesis ends at eos).
    o.eos_id = -1;
    o.eos_id = generate(t.model(), p.view(), o).tokens[0][2];
    const Generated g = generate(t.model(), p.view(), o);
    REQUIRE(g.scores.size() == 3);
    for (std::size_t r = 0; r < 3; ++r) {
      CAPTURE(r);
      CHECK((g.finished[r] || g.tokens[r].size() == 9));
      const double want =
          reforward_score(t, kPrompts[r], g.tokens[r], g.finished[r], o.eos_id, penalty);
      CHECK(g.scores[r] == doctest::Approx(want).epsilon(1e-5));
    }
    // Without the penalty (greedy's and beam search's objectives then agree), some prompt's
    // best hypothesis differs from greedy's sequence and scores better.
    if (penalty != 1.0) continue;
    GenerateOptions go = o;
    go.num_beams = 1;
    const Generated greedy = generate(t.model(), p.view(), go);
    bool better = false;
    for (std::size_t r = 0; r < 3; ++r) {
      const double s =
          reforward_score(t, kPrompts[r], greedy.tokens[r], greedy.finished[r], o.eos_id, penalty);
      better = better || (g.tokens[r] != greedy.tokens[r] && g.scores[r] > s + 1e-4);
    }
    CHECK(better);
  }
}

TEST_CASE("one beam is greedy: generate with num_beams 1 gives greedy_generate's tokens") {
  Trainer<Tiny, Replicated<1>> t(random_model());
  const Batch p = left_padded(kPrompts);
  GenerateOptions o;
  o.max_new_tokens = 10;
  o.eos_id = -1;
  const Generated g = greedy_generate(t.model(), p.view(), o);
  const Generated h = generate(t.model(), p.view(), o);
  CHECK(h.tokens == g.tokens);
  CHECK(h.scores.empty());
}

TEST_CASE("a prompt's beam search does not depend on the other prompts or on its padding") {
  Trainer<Tiny, Replicated<1>> t(random_model());
  GenerateOptions o;
  o.max_new_tokens = 7;
  o.num_beams = 3;
  o.repetition_penalty = 2.0;
  o.eos_id = 60;
  const Generated batched = generate(t.model(), left_padded(kPrompts).view(), o);
  for (std::size_t r = 0; r < kPrompts.size(); ++r) {
    CAPTURE(r);
    // Alone without padding, and alone behind 3 padding positions.
    for (const std::size_t extra : {std::size_t{0}, std::size_t{3}}) {
      const auto& toks = kPrompts[r];
      Batch one(1, static_cast<std::int64_t>(toks.size() + extra));
      for (std::size_t k = 0; k < toks.size() + extra; ++k) {
        one.attention_mask[k] = k >= extra;
        one.input_ids[k] = k >= extra ? toks[k - extra] : pad;
      }
      const Generated alone = generate(t.model(), one.view(), o);
      CHECK(alone.tokens[0] == batched.tokens[r]);
      CHECK(alone.finished[0] == batched.finished[r]);
      CHECK(alone.scores[0] == doctest::Approx(batched.scores[r]).epsilon(1e-5));
    }
  }
}

TEST_CASE("beam search under TensorSplit<2> equals the single-rank one") {
  const Batch p = left_padded(kPrompts);
  GenerateOptions o;
  o.max_new_tokens = 8;
  o.num_beams = 4;
  o.repetition_penalty = 2.0;
  o.eos_id = 60;
  Trainer<Tiny, Replicated<1>> one(random_model());
  const Generated want = generate(one.model(), p.view(), o);
  std::vector<Generated> got(2);
  run_ranks(2, [&](ThreadComm& comm) {
    Trainer<Tiny, TP2> t(comm, random_model());
    got[static_cast<std::size_t>(comm.rank())] = generate(t.model(), p.view(), o);
  });
  for (std::size_t r = 0; r < 2; ++r) {
    CAPTURE(r);
    CHECK(got[r].tokens == want.tokens);
    CHECK(got[r].finished == want.finished);
    CHECK(got[r].steps == want.steps);
    for (std::size_t i = 0; i < want.scores.size(); ++i)
      CHECK(got[r].scores[i] == doctest::Approx(want.scores[i]).epsilon(1e-5));
  }
}

TEST_CASE("greedy's repetition penalty divides positive and multiplies negative seen logits") {
  Trainer<Tiny, Replicated<1>> t(random_model());
  const Batch p = left_padded(kPrompts);
  GenerateOptions o;
  o.max_new_tokens = 8;
  o.eos_id = -1;
  o.repetition_penalty = 3.0;
  std::vector<std::vector<float>> logits;
  o.on_step = [&](std::int64_t, std::span<const float> l, std::span<const std::uint8_t>) {
    logits.emplace_back(l.begin(), l.end());
  };
  const Generated g = greedy_generate(t.model(), p.view(), o);
  REQUIRE(logits.size() == 8);
  bool changed = false;
  for (std::size_t r = 0; r < 3; ++r) {
    std::vector<std::int32_t> seen = kPrompts[r];
    for (std::size_t s = 0; s < 8; ++s) {
      std::vector<float> l(
          logits[s].begin() + static_cast<std::ptrdiff_t>(r * Tiny::vocab_size),
          logits[s].begin() + static_cast<std::ptrdiff_t>((r + 1) * Tiny::vocab_size));
      const auto raw_best = std::max_element(l.begin(), l.end()) - l.begin();
      for (std::size_t v = 0; v < l.size(); ++v)
        if (std::find(seen.begin(), seen.end(), static_cast<std::int32_t>(v)) != seen.end())
          l[v] = l[v] < 0 ? l[v] * 3.0f : l[v] / 3.0f;
      const auto best = std::max_element(l.begin(), l.end()) - l.begin();
      CHECK(g.tokens[r][s] == best);
      changed = changed || best != raw_best;
      seen.push_back(g.tokens[r][s]);
    }
  }
  CHECK(changed);  // the penalty changed some choice
}

TEST_CASE("decoding refuses options it cannot honour, naming them") {
  Trainer<Tiny, Replicated<1>> t(random_model());
  const Batch p = left_padded(kPrompts);
  GenerateOptions o;
  o.num_beams = 0;
  CHECK_THROWS_WITH_AS(beam_search(t.model(), p.view(), o), doctest::Contains("num_beams 0"),
                       Error);
  o.num_beams = 2;
  o.repetition_penalty = 0.0;
  CHECK_THROWS_WITH_AS(generate(t.model(), p.view(), o),
                       doctest::Contains("repetition_penalty 0; expected a positive number"),
                       Error);
  o.repetition_penalty = 1.0;
  Batch right(1, 3);
  right.input_ids = {5, 6, pad};
  right.attention_mask = {1, 1, 0};
  CHECK_THROWS_WITH_AS(generate(t.model(), right.view(), o),
                       doctest::Contains("beam_search: row 0"), Error);
  o.max_new_tokens = 0;
  const Generated none = generate(t.model(), p.view(), o);
  CHECK(none.steps == 0);
  CHECK(none.tokens[0].empty());
}

TEST_CASE("decoding refuses NaN logits on every rank instead of choosing from them") {
  const Batch p = left_padded(kPrompts);  // token 3 is in no prompt: only its logit is NaN
  for (const std::int64_t beams : {1, 4}) {
    CAPTURE(beams);
    GenerateOptions o;
    o.max_new_tokens = 4;
    o.num_beams = beams;
    Trainer<Tiny, Replicated<1>> t(random_model());
    poison_token(t.model(), 3);
    CHECK_THROWS_WITH_AS(
        generate(t.model(), p.view(), o),
        doctest::Contains("decoding: the next-token scores of row 0 are not finite"), Error);
    // Under TensorSplit<2> only rank 0 holds token 3 (rank 1 holds no real column): both ranks
    // refuse, neither waits for the other.
    std::vector<std::string> what(2);
    run_ranks(2, [&](ThreadComm& comm) {
      Trainer<Tiny, TP2> tp(comm, random_model());
      poison_token(tp.model(), 3);
      try {
        generate(tp.model(), p.view(), o);
      } catch (const Error& e) {
        what[static_cast<std::size_t>(comm.rank())] = e.what();
      }
    });
    for (const auto& w : what) CHECK(w.find("are not finite") != std::string::npos);
  }
}

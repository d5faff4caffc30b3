#pragma once
// What greedy decoding and beam search share: their options and result, the tokens each row
// has seen, and NextTokens, each step's scores and best candidates on the stack's device.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "seqpar/backend/device.hpp"
#include "seqpar/backend/kernels.hpp"
#include "seqpar/core/batch.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/nn/decoder.hpp"
#include "seqpar/nn/model.hpp"

namespace seqpar::inline v0 {

/// What decoding is asked to do (greedy_generate, beam_search, or generate, which picks).
struct GenerateOptions {
  std::int64_t max_new_tokens = 64;
  std::int32_t eos_id = 2;  // a row (a hypothesis) stops when it produces this token
  /// 1: greedy, the best token of each step; more: beam search with this many beams a prompt.
  std::int64_t num_beams = 1;
  /// transformers' RepetitionPenaltyLogitsProcessor: the score of a token already in the
  /// sequence (its prompt's tokens, padding excluded, and those generated) is divided by
  /// this when positive and multiplied by it otherwise. Greedy applies it to the logits,
  /// beam search to the log-probabilities, as transformers' generate does. 1: none.
  double repetition_penalty = 1.0;
  /// Beam search: a finished hypothesis scores (sum of its log-probabilities) / (its
  /// generated length, eos included) ^ length_penalty.
  double length_penalty = 1.0;
  /// Called before each token is chosen, with the next-token logits [rows, vocab] (before
  /// the penalty) and which rows are still generating (for tests and scoring; may be
  /// empty). Beam search has prompts x num_beams rows (beam j of prompt p at p * num_beams +
  /// j); a row is active while its prompt may still improve. Under a tensor split the
  /// logits are gathered from every rank (then set it on every rank or none).
  std::function<void(std::int64_t step, std::span<const float> logits,
                     std::span<const std::uint8_t> active)>
      on_step;
};

/// Tokens chosen for each prompt, without the eos.
struct Generated {
  std::vector<std::vector<std::int32_t>> tokens;
  std::vector<std::uint8_t> finished;  // the row produced eos (else it hit max_new_tokens)
  std::int64_t steps = 0;              // decoding steps taken
  /// Beam search: each prompt's best hypothesis' score (see length_penalty); greedy: empty.
  std::vector<float> scores;
};

namespace detail {

/// The tokens each row has seen, for transformers' repetition penalty: a sorted set a row.
struct SeenTokens {
  std::vector<std::vector<std::int32_t>> rows;

  /// The real (non-padding) tokens of each prompt row.
  explicit SeenTokens(const BatchView& p) : rows(static_cast<std::size_t>(p.rows)) {
    for (std::int64_t r = 0; r < p.rows; ++r)
      for (std::int64_t t = 0; t < p.seq; ++t)
        if (p.attention_mask[static_cast<std::size_t>(r * p.seq + t)] != 0)
          add(r, p.input_ids[static_cast<std::size_t>(r * p.seq + t)]);
  }
  void add(std::int64_t r, std::int32_t id) {
    auto& s = rows[static_cast<std::size_t>(r)];
    const auto at = std::lower_bound(s.begin(), s.end(), id);
    if (at == s.end() || *at != id) s.insert(at, id);
  }
  /// The rows' tokens one after another (ids) and where each row's begin (start, rows + 1).
  void flatten(std::vector<std::int32_t>& ids, std::vector<std::int64_t>& start) const {
    ids.clear();
    start.assign(1, 0);
    for (const auto& r : rows) {
      ids.insert(ids.end(), r.begin(), r.end());
      start.push_back(static_cast<std::int64_t>(ids.size()));
    }
  }
};

/// Each decoding step's choice on the stack's device: the logits of the cache's new hidden
/// states, their scores (the logits, or log-probabilities over the whole vocabulary, the
/// tensor axis combining the ranks' maxima and sums of exps), the repetition penalty on each
/// row's seen tokens, and each row's k best candidates; only those (and a few values a row)
/// cross to the host. The full logits come to the host only for GenerateOptions::on_step.
template <ModelStack Stack>
struct NextTokens {
  using T = typename Stack::Scalar;
  using Arena = typename Stack::Arena;
  using O = Ops<typename Stack::Dev>;
  std::int64_t rows, vocab, cols, real, row0, k;
  Buffer<T, Arena> logits;                // [rows, cols] this rank's vocab rows (padding included)
  Buffer<float, Arena> own_scores;        // [rows, cols] unless T is float (then logits)
  Buffer<float, Arena> dev_max, dev_lse;  // [rows]
  Buffer<double, Arena> dev_sum;          // [rows]
  Buffer<float, Arena> dev_base;          // [rows] each row's running score (beam search)
  Buffer<std::int32_t, Arena> dev_seen;   // the rows' seen tokens, one after another
  Buffer<std::int64_t, Arena> dev_seen_start;  // [rows + 1] where each row's begin
  Buffer<float, Arena> dev_score;              // [rows, k]
  Buffer<std::int64_t, Arena> dev_token;       // [rows, k]
  std::vector<float> score;                    // [rows, k] on the host: each row's best first
  std::vector<std::int64_t> token;             // [rows, k] their tokens (-1: none)
  std::vector<float> full;                     // [rows, vocab] all ranks' real logits (on_step)
  std::vector<std::int32_t> seen_ids;          // the host's side of dev_seen
  std::vector<std::int64_t> seen_start;        // and of dev_seen_start

  /// Room for `seen_tokens` seen tokens in all and k candidates a row.
  NextTokens(Stack& s, std::int64_t r, std::int64_t v, std::int64_t seen_tokens,
             std::int64_t candidates)
      : rows(r),
        vocab(v),
        cols(s.vocab_shard().rows),
        real(s.vocab_shard().real),
        row0(s.vocab_shard().row0),
        k(candidates),
        logits(s.arena(), static_cast<std::size_t>(r * cols), Memory::buffers),
        dev_max(s.arena(), static_cast<std::size_t>(r), Memory::buffers),
        dev_lse(s.arena(), static_cast<std::size_t>(r), Memory::buffers),
        dev_sum(s.arena(), static_cast<std::size_t>(r), Memory::buffers),
        dev_base(s.arena(), static_cast<std::size_t>(r), Memory::buffers),
        dev_seen(s.arena(), static_cast<std::size_t>(seen_tokens), Memory::buffers),
        dev_seen_start(s.arena(), static_cast<std::size_t>(r + 1), Memory::buffers),
        dev_score(s.arena(), static_cast<std::size_t>(r * candidates), Memory::buffers),
        dev_token(s.arena(), static_cast<std::size_t>(r * candidates), Memory::buffers),
        score(static_cast<std::size_t>(r * candidates)),
        token(static_cast<std::size_t>(r * candidates)) {
    if constexpr (!std::is_same_v<T, float>)
      own_scores =
          Buffer<float, Arena>(s.arena(), static_cast<std::size_t>(r * cols), Memory::buffers);
  }

  float* scores() {
    if constexpr (std::is_same_v<T, float>) {
      return logits.data();
    } else {
      return own_scores.data();
    }
  }

  /// logits = those of c.hidden.
  template <class Cache>
  void load(Stack& s, const Cache& c) {
    s.logits(c.hidden.data(), rows, logits.data());
  }

  /// full = the whole vocabulary's logits on the host: each rank writes its real columns
  /// into zeros, and the sum over the ranks is every column.
  void gather(Stack& s) {
    std::vector<T> local(static_cast<std::size_t>(rows * cols));
    O::download(local.data(), logits.data(), rows * cols);
    full.assign(static_cast<std::size_t>(rows * vocab), 0.0f);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < real; ++c)
        full[static_cast<std::size_t>(r * vocab + row0 + c)] =
            static_cast<float>(local[static_cast<std::size_t>(r * cols + c)]);
    s.axis().sum(full.data(), rows * vocab);
  }

  /// The scores: the logits, or (log_probs) their log_softmax over the whole vocabulary in
  /// float as transformers' beam search computes it; then the penalty p on `seen` (null:
  /// none). The logits are used up when T is float.
  void score_rows(Stack& s, bool log_probs, const SeenTokens* seen, float p) {
    const float* mx = nullptr;
    const float* lse = nullptr;
    if (log_probs) {
      std::vector<float> m(static_cast<std::size_t>(rows)), l(m.size());
      std::vector<double> sum(m.size());
      O::next_token_max(dev_max.data(), logits.data(), rows, cols, real);
      O::download(m.data(), dev_max.data(), rows);
      s.axis().max(m.data(), rows);
      O::upload(dev_max.data(), m.data(), rows);
      O::next_token_sum_exp(dev_sum.data(), logits.data(), dev_max.data(), rows, cols, real);
      O::download(sum.data(), dev_sum.data(), rows);
      s.axis().sum(sum.data(), rows);
      for (std::size_t r = 0; r < sum.size(); ++r) l[r] = static_cast<float>(std::log(sum[r]));
      O::upload(dev_lse.data(), l.data(), rows);
      mx = dev_max.data();
      lse = dev_lse.data();
    }
    if (seen != nullptr) {
      seen->flatten(seen_ids, seen_start);
      SEQPAR_CHECK(seen_ids.size() <= dev_seen.size(), "decoding: ", seen_ids.size(),
                   " seen tokens, room for ", dev_seen.size());
      O::upload(dev_seen.data(), seen_ids.data(), static_cast<std::int64_t>(seen_ids.size()));
      O::upload(dev_seen_start.data(), seen_start.data(), rows + 1);
    }
    O::next_token_scores(
        scores(), logits.data(), mx, lse, seen != nullptr ? dev_seen.data() : nullptr,
        seen != nullptr ? dev_seen_start.data() : nullptr, p, rows, cols, row0, real);
  }

  /// score, token = each row's k best scores on this rank, plus base[r] (the host's; null:
  /// none). A row whose scores hold a NaN or +inf (a NaN ranks first) is refused on every
  /// rank of the tensor axis: nothing is generated from weights or activations that are
  /// not finite.
  void top(Stack& s, const float* base) {
    if (base != nullptr) O::upload(dev_base.data(), base, rows);
    O::next_token_top_k(dev_score.data(), dev_token.data(), scores(),
                        base != nullptr ? dev_base.data() : nullptr, rows, cols, row0, real, k);
    O::download(score.data(), dev_score.data(), rows * k);
    O::download(token.data(), dev_token.data(), rows * k);
    std::int64_t bad = -1;  // the first such row
    for (std::int64_t r = rows - 1; r >= 0; --r) {
      const float best = score[static_cast<std::size_t>(r * k)];
      if (std::isnan(best) || best == std::numeric_limits<float>::infinity()) bad = r;
    }
    bad = bad < 0 ? std::numeric_limits<std::int64_t>::min() : -bad;  // lowest row: max of -r
    s.axis().max(&bad, 1);
    SEQPAR_CHECK(bad == std::numeric_limits<std::int64_t>::min(), "decoding: the next-token ",
                 "scores of row ", -bad, " are not finite (NaN or +inf logits: the model's ",
                 "weights or activations are not finite); nothing is generated from them");
  }

  /// Each row's best token over every rank of the tensor axis, from top() with k = 1: the
  /// largest score, and of the ranks holding it the lowest token id (the maximum of -id), as
  /// an argmax over the whole vocabulary picks the first of equal scores.
  std::vector<std::int64_t> argmax(Stack& s) {
    constexpr std::int64_t none = std::numeric_limits<std::int64_t>::max();
    std::vector<float> top = score;
    s.axis().max(top.data(), rows);
    std::vector<std::int64_t> id(static_cast<std::size_t>(rows));
    for (std::size_t r = 0; r < id.size(); ++r)
      id[r] = token[r] >= 0 && score[r] == top[r] ? -token[r] : -none;
    s.axis().max(id.data(), rows);
    for (auto& i : id) i = -i;
    return id;
  }
};

/// Checks what every decoding entry point needs: the whole model, left-padded prompts of
/// vocabulary ids, sane options. `who` names the caller in the message.
template <ModelStack Stack>
void check_generation(const Stack& model, std::int64_t V, std::int64_t layers,
                      const BatchView& prompts, const GenerateOptions& o, const char* who) {
  SEQPAR_CHECK(model.whole(), who, ": the model holds layers [", model.stage().first, ", ",
               model.stage().last, ") of ", layers,
               "; generation needs the whole model on one rank");
  const std::int64_t B = prompts.rows, P = prompts.seq;
  SEQPAR_CHECK(B > 0 && P > 0 && o.max_new_tokens >= 0, who, ": ", B, " rows of ", P,
               " tokens and max_new_tokens ", o.max_new_tokens, "; expected positive sizes");
  SEQPAR_CHECK(o.num_beams >= 1 && 2 * o.num_beams <= o.num_beams * V, who, ": num_beams ",
               o.num_beams, "; expected at least 1 (and 2 x num_beams candidates among ",
               o.num_beams, " x ", V, ")");
  SEQPAR_CHECK(o.repetition_penalty > 0 && std::isfinite(o.repetition_penalty), who,
               ": repetition_penalty ", o.repetition_penalty,
               "; expected a positive number (1: no penalty)");
  SEQPAR_CHECK(std::isfinite(o.length_penalty), who, ": length_penalty ", o.length_penalty,
               " is not a finite number");
  SEQPAR_CHECK(prompts.input_ids.size() == static_cast<std::size_t>(B * P) &&
                   prompts.attention_mask.size() == static_cast<std::size_t>(B * P),
               who, ": input_ids and attention_mask must hold rows*seq = ", B * P, " values");
  for (std::int64_t b = 0; b < B; ++b) {
    bool seen = false;
    for (std::int64_t t = 0; t < P; ++t) {
      const auto i = static_cast<std::size_t>(b * P + t);
      const bool m = prompts.attention_mask[i] != 0;
      SEQPAR_CHECK(!seen || m, who, ": row ", b, " has padding at position ", t,
                   " after its tokens; prompts must be left-padded");
      seen = seen || m;
      SEQPAR_CHECK(prompts.input_ids[i] >= 0 && prompts.input_ids[i] < V, who, ": input_ids[", b,
                   "][", t, "] = ", prompts.input_ids[i], " is outside the vocabulary [0, ", V,
                   ")");
    }
    SEQPAR_CHECK(seen, who, ": row ", b, " has no tokens (its attention mask is all 0)");
  }
}

/// The prompts (without labels) through the stack once, into a cache of `capacity` positions.
template <ModelStack Stack>
auto prefilled_cache(Stack& model, const BatchView& prompts, std::int64_t capacity) {
  Decoder<Stack> decoder(model);
  auto cache = decoder.kv_cache(prompts.rows, capacity);
  Batch pb(prompts.rows, prompts.seq);
  std::copy(prompts.input_ids.begin(), prompts.input_ids.end(), pb.input_ids.begin());
  std::copy(prompts.attention_mask.begin(), prompts.attention_mask.end(),
            pb.attention_mask.begin());
  decoder.prefill(pb.view(), cache);
  return cache;
}

}  // namespace detail

}  // namespace seqpar::inline v0

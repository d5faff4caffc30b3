#pragma once
// Batched decoding with a KV cache, for a whole BloomStack on any device and under a tensor
// split: greedy, or beam search with transformers' semantics, both with its repetition
// penalty. The left-padded prompts go through the stack once (prefill: the block's forward,
// which also fills each block's cache); every new token then runs through the blocks'
// decoding step, attending to its row's cached keys (nn/block.hpp). ALiBi positions
// continue from each row's own length (the count of its non-padding tokens), so a row's
// result does not depend on its padding. Beam search repeats each prompt's prefilled rows
// for its beams and gathers the cache's rows by the chosen beams after each step
// (BloomStack::select_cache_rows). Each step's scores (the logits, or log-probabilities for
// beam search), the penalty and each row's best candidates are the device's ops
// (Ops<D>::next_token_*); only a row's candidates and a few values a row cross to the host,
// which chooses among them. Under a tensor split each rank decodes with its heads and
// vocabulary rows and the ranks agree on every token: the argmax, the log-softmax and the
// top candidates over the vocabulary combine the ranks' parts through the tensor axis.

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
  auto cache = model.kv_cache(prompts.rows, capacity);
  Batch pb(prompts.rows, prompts.seq);
  std::copy(prompts.input_ids.begin(), prompts.input_ids.end(), pb.input_ids.begin());
  std::copy(prompts.attention_mask.begin(), prompts.attention_mask.end(),
            pb.attention_mask.begin());
  model.prefill(pb.view(), cache);
  return cache;
}

}  // namespace detail

/// Greedy decoding of `prompts` (left-padded: each row's tokens end in the last column;
/// labels are ignored) with `model`, which must hold every layer (no pipeline stage; a
/// tensor split is fine: every rank of the group calls it with the same prompts and
/// options). Stops when every row has produced eos or after max_new_tokens. num_beams is
/// not read (generate() picks beam search for more than one); the repetition penalty
/// applies to the logits, as in transformers' greedy search.
template <BloomModel M, Device D, class T, TensorAxis Axis>
Generated greedy_generate(BloomStack<M, D, T, Axis>& model, const BatchView& prompts,
                          const GenerateOptions& o = {}) {
  constexpr std::int64_t V = M::vocab_size;
  detail::check_generation(model, V, M::layers, prompts, o, "greedy_generate");
  const std::int64_t B = prompts.rows, P = prompts.seq;
  Generated g;
  g.tokens.resize(static_cast<std::size_t>(B));
  g.finished.assign(static_cast<std::size_t>(B), 0);
  if (o.max_new_tokens == 0) return g;

  // The cache has room for every token but the last chosen one, which is never fed back.
  auto cache = detail::prefilled_cache(model, prompts, P + o.max_new_tokens - 1);
  const bool penalise = o.repetition_penalty != 1.0;
  detail::SeenTokens seen(prompts);
  const auto penalty = static_cast<float>(o.repetition_penalty);
  detail::NextTokens<BloomStack<M, D, T, Axis>> next_tokens(model, B, V, B * (P + o.max_new_tokens),
                                                            1);

  std::vector<std::int32_t> next(static_cast<std::size_t>(B), o.eos_id);
  std::vector<std::uint8_t> active(static_cast<std::size_t>(B));
  for (std::int64_t step = 0; step < o.max_new_tokens; ++step) {
    next_tokens.load(model, cache);
    for (std::int64_t b = 0; b < B; ++b)
      active[static_cast<std::size_t>(b)] = !g.finished[static_cast<std::size_t>(b)];
    if (o.on_step) {
      next_tokens.gather(model);
      o.on_step(step, next_tokens.full, active);
    }
    next_tokens.score_rows(model, false, penalise ? &seen : nullptr, penalty);
    next_tokens.top(model, nullptr);
    const std::vector<std::int64_t> chosen = next_tokens.argmax(model);
    bool any = false;
    for (std::int64_t b = 0; b < B; ++b) {
      const auto r = static_cast<std::size_t>(b);
      if (!active[r]) continue;  // a finished row is fed its eos again; its output is unused
      const auto best = static_cast<std::int32_t>(chosen[r]);
      next[r] = best;
      if (best == o.eos_id) {
        g.finished[r] = 1;
      } else {
        g.tokens[r].push_back(best);
        seen.add(b, best);
        any = true;
      }
    }
    g.steps = step + 1;
    if (!any || step + 1 == o.max_new_tokens) break;
    model.decode(next, cache);
  }
  return g;
}

namespace detail {

/// A beam-search candidate: its score and its index beam * vocab + token in the prompt's
/// [beams, vocab] scores. The better of two has the larger score, then the smaller index
/// (ties go to the first, as a sort would have them).
struct Candidate {
  float score;
  std::int64_t index;
  friend bool operator<(const Candidate& a, const Candidate& b) {  // a ranks before b
    return kernels::ranks_before(a.score, a.index, b.score, b.index);
  }
};

/// Keeps the best k of the candidates offered, in order.
struct TopK {
  std::size_t k;
  std::vector<Candidate> best;
  void offer(Candidate c) {
    if (best.size() == k && !(c < best.back())) return;
    best.insert(std::upper_bound(best.begin(), best.end(), c), c);
    if (best.size() > k) best.pop_back();
  }
};

/// One hypothesis of a prompt: its generated tokens and the tokens it has seen.
struct Hypothesis {
  float score = 0;
  std::vector<std::int32_t> tokens;
  bool finished = false;  // ended (eos or length) and counted among the best
};

/// beam_search's state between steps and its parts of a step: N prompts of K beams, beam j
/// of prompt p in cache row p * K + j; each step keeps 2K candidates a prompt.
template <ModelStack Stack>
class BeamSearch {
 public:
  static constexpr float dropped = -1.0e9f;  // transformers' score of a ruled-out candidate

  BeamSearch(Stack& model, const BatchView& prompts, const GenerateOptions& o, std::int64_t vocab)
      : model_(&model),
        o_(o),
        V(vocab),
        N(prompts.rows),
        K(o.num_beams),
        rows_(N * K),
        cands_(static_cast<std::size_t>(2 * K)),
        cache_(model.kv_cache(rows_, prompts.seq + o.max_new_tokens - 1)),
        index_(static_cast<std::size_t>(rows_)),
        next_(static_cast<std::size_t>(rows_)),
        running_(static_cast<std::size_t>(rows_)),
        done_(running_.size()),
        seen_(prompts),
        improvable_(static_cast<std::size_t>(N), 1),
        active_(running_.size()),
        base_(running_.size()),
        gathered_score_(static_cast<std::size_t>(model.axis().size()) * N * cands_),
        gathered_index_(gathered_score_.size()) {
    // Every beam starts as its prompt's prefilled row; only the first of a prompt runs at
    // the start (the others would repeat it); no hypothesis is finished yet.
    {
      auto once = prefilled_cache(model, prompts, prompts.seq + o.max_new_tokens - 1);
      for (std::int64_t r = 0; r < rows_; ++r)
        index_[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(r / K);
      model.select_cache_rows(cache_, once, index_);
    }
    for (std::int64_t r = 0; r < rows_; ++r) {
      running_[static_cast<std::size_t>(r)].score = r % K == 0 ? 0.0f : dropped;
      done_[static_cast<std::size_t>(r)].score = dropped;
    }
    std::vector<std::vector<std::int32_t>> beams(static_cast<std::size_t>(rows_));
    for (std::int64_t r = 0; r < rows_; ++r)
      beams[static_cast<std::size_t>(r)] = seen_.rows[static_cast<std::size_t>(r / K)];
    seen_.rows = std::move(beams);
    next_tokens_.emplace(model, rows_, vocab, rows_ * (prompts.seq + o.max_new_tokens),
                         static_cast<std::int64_t>(cands_));
  }

  /// Each beam's 2K best continuations on this rank: log_softmax over the vocabulary, the
  /// penalty, plus the beam's running score (on the device).
  void score(std::int64_t step) {
    next_tokens_->load(*model_, cache_);
    for (std::int64_t r = 0; r < rows_; ++r)
      active_[static_cast<std::size_t>(r)] = improvable_[static_cast<std::size_t>(r / K)];
    if (o_.on_step) {
      next_tokens_->gather(*model_);
      o_.on_step(step, next_tokens_->full, active_);
    }
    const bool penalise = o_.repetition_penalty != 1.0;
    next_tokens_->score_rows(*model_, true, penalise ? &seen_ : nullptr,
                             static_cast<float>(o_.repetition_penalty));
    for (std::int64_t r = 0; r < rows_; ++r)
      base_[static_cast<std::size_t>(r)] = running_[static_cast<std::size_t>(r)].score;
    next_tokens_->top(*model_, base_.data());
  }

  /// The 2K best of each prompt on this rank (among its beams' 2K best, which hold them),
  /// then over the ranks: each rank's in its slot of zeros, summed (exactly: every other
  /// rank adds 0). A rank with fewer real columns than candidates fills its list with
  /// (-inf, K * V).
  void gather_candidates() {
    const int ranks = model_->axis().size(), rank = model_->axis().rank();
    std::fill(gathered_score_.begin(), gathered_score_.end(), 0.0f);
    std::fill(gathered_index_.begin(), gathered_index_.end(), 0);
    for (std::int64_t p = 0; p < N; ++p) {
      TopK top{cands_, {}};
      for (std::int64_t j = 0; j < K; ++j)
        for (std::size_t i = 0; i < cands_; ++i) {
          const std::size_t at = static_cast<std::size_t>(p * K + j) * cands_ + i;
          const std::int64_t token = next_tokens_->token[at];
          top.offer({next_tokens_->score[at], token >= 0 ? j * V + token : K * V});
        }
      const std::size_t slot = (static_cast<std::size_t>(rank) * N + p) * cands_;
      for (std::size_t i = 0; i < cands_; ++i) {
        gathered_score_[slot + i] = top.best[i].score;
        gathered_index_[slot + i] = top.best[i].index;
      }
    }
    if (ranks > 1) {
      model_->axis().sum(gathered_score_.data(), static_cast<std::int64_t>(gathered_score_.size()));
      model_->axis().sum(gathered_index_.data(), static_cast<std::int64_t>(gathered_index_.size()));
    }
  }

  /// Every prompt's beams and finished hypotheses after a step that generated token
  /// `length` (`last`: every candidate reaches the length).
  void advance(std::int64_t length, bool last) {
    std::vector<Hypothesis> next_running(running_.size());
    for (std::int64_t p = 0; p < N; ++p) advance_prompt(p, length, last, next_running);
    running_ = std::move(next_running);
  }

  /// Whether some prompt may still improve: its best running beam, scored at the current
  /// length, beats the worst finished score (or some slot holds no finished hypothesis yet).
  bool improvable(std::int64_t length) {
    bool any = false;
    for (std::int64_t p = 0; p < N; ++p) {
      auto& ok = improvable_[static_cast<std::size_t>(p)];
      const float best_running =
          length_score(running_[static_cast<std::size_t>(p * K)].score, length);
      float worst = done_[static_cast<std::size_t>(p * K)].score;
      for (std::int64_t j = 1; j < K; ++j)
        worst = std::min(worst, done_[static_cast<std::size_t>(p * K + j)].score);
      bool beats = false;
      for (std::int64_t j = 0; j < K; ++j)
        beats =
            beats ||
            best_running > (done_[static_cast<std::size_t>(p * K + j)].finished ? worst : dropped);
      ok = ok && beats;
      any = any || ok;
    }
    return any;
  }

  /// The cache's rows follow the chosen beams, and their new tokens go through the stack.
  void decode() {
    model_->select_cache_rows(cache_, cache_, index_);
    model_->decode(next_, cache_);
  }

  /// Each prompt's best finished hypothesis, without its eos.
  void result(Generated& g) {
    for (std::int64_t p = 0; p < N; ++p) {
      Hypothesis& best = done_[static_cast<std::size_t>(p * K)];
      auto& out = g.tokens[static_cast<std::size_t>(p)];
      out = std::move(best.tokens);
      g.scores[static_cast<std::size_t>(p)] = best.score;
      if (!out.empty() && out.back() == o_.eos_id) {
        out.pop_back();
        g.finished[static_cast<std::size_t>(p)] = 1;
      }
    }
  }

 private:
  float length_score(float sum, std::int64_t length) const {
    return sum / static_cast<float>(std::pow(static_cast<double>(length), o_.length_penalty));
  }

  // Prompt p's 2K candidates over the ranks as hypotheses: the K best that run on become
  // its beams (with their rows' sources and seen tokens); the finished list keeps the best
  // K of the old K and the candidates, of which only those among the first K that end
  // count (the others are `dropped`, as is every one once the prompt cannot improve), ties
  // to the older.
  void advance_prompt(std::int64_t p, std::int64_t length, bool last,
                      std::vector<Hypothesis>& next_running) {
    const int ranks = model_->axis().size();
    TopK top{cands_, {}};
    for (int k = 0; k < ranks; ++k)
      for (std::size_t i = 0; i < cands_; ++i) {
        const std::size_t at = (static_cast<std::size_t>(k) * N + p) * cands_ + i;
        top.offer({gathered_score_[at], gathered_index_[at]});
      }
    // The candidates as hypotheses; those that end get `dropped` added for running on.
    std::vector<Hypothesis> cand(cands_);
    std::vector<std::int64_t> from(cands_);
    std::vector<Candidate> run_on(cands_);
    std::vector<std::uint8_t> ends(cands_);
    for (std::size_t i = 0; i < cands_; ++i) {
      const Candidate c = top.best[i];
      const std::int64_t beam = c.index / V;
      const auto token = static_cast<std::int32_t>(c.index % V);
      from[i] = p * K + beam;
      cand[i].tokens = running_[static_cast<std::size_t>(from[i])].tokens;
      cand[i].tokens.push_back(token);
      cand[i].score = c.score;
      ends[i] = token == o_.eos_id || last;
      run_on[i] = {c.score + (ends[i] ? dropped : 0.0f), static_cast<std::int64_t>(i)};
    }
    std::stable_sort(run_on.begin(), run_on.end(),
                     [](const Candidate& a, const Candidate& b) { return a.score > b.score; });
    std::vector<std::vector<std::int32_t>> seen_next(static_cast<std::size_t>(K));
    for (std::int64_t j = 0; j < K; ++j) {
      const auto i = static_cast<std::size_t>(run_on[static_cast<std::size_t>(j)].index);
      const auto r = static_cast<std::size_t>(p * K + j);
      next_running[r] = cand[i];
      next_running[r].score = run_on[static_cast<std::size_t>(j)].score;
      index_[r] = static_cast<std::int32_t>(from[i]);
      next_[r] = cand[i].tokens.back();
      seen_next[static_cast<std::size_t>(j)] = seen_.rows[static_cast<std::size_t>(from[i])];
    }
    for (std::int64_t j = 0; j < K; ++j) {
      seen_.rows[static_cast<std::size_t>(p * K + j)] =
          std::move(seen_next[static_cast<std::size_t>(j)]);
      seen_.add(p * K + j, next_[static_cast<std::size_t>(p * K + j)]);
    }
    std::vector<Hypothesis> merged(done_.begin() + p * K, done_.begin() + (p + 1) * K);
    for (std::size_t i = 0; i < cands_; ++i) {
      Hypothesis h = std::move(cand[i]);
      h.finished = ends[i] && i < static_cast<std::size_t>(K);
      h.score = length_score(h.score, length);
      if (!improvable_[static_cast<std::size_t>(p)]) h.score += dropped;
      if (!h.finished) h.score += dropped;
      merged.push_back(std::move(h));
    }
    std::stable_sort(merged.begin(), merged.end(),
                     [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
    std::move(merged.begin(), merged.begin() + K, done_.begin() + p * K);
  }

  Stack* model_;
  const GenerateOptions& o_;
  const std::int64_t V, N, K, rows_;
  const std::size_t cands_;
  KvCache<typename Stack::Scalar, typename Stack::Arena> cache_;
  std::vector<std::int32_t> index_;  // [rows] the row each beam continues
  std::vector<std::int32_t> next_;   // [rows] each beam's new token
  std::vector<Hypothesis> running_, done_;
  SeenTokens seen_;
  std::vector<std::uint8_t> improvable_;          // [N] the prompt may still improve
  std::vector<std::uint8_t> active_;              // [rows] on_step's
  std::vector<float> base_;                       // [rows] the beams' running scores
  std::optional<NextTokens<Stack>> next_tokens_;  // made after the prefill
  std::vector<float> gathered_score_;             // [ranks, N, 2K] each rank's candidates, then all
  std::vector<std::int64_t> gathered_index_;
};

}  // namespace detail

/// Beam search over `prompts` (left-padded, as greedy_generate) with o.num_beams beams a
/// prompt, following transformers' generate(num_beams = k, do_sample = False,
/// early_stopping = False): scores are cumulative log-probabilities (the repetition penalty
/// applied to them); each step keeps the 2k best (beam, token) continuations of a prompt; of
/// those, the ones among the first k that end (eos, or max_new_tokens reached) join the
/// prompt's k best finished hypotheses scored sum / length ^ length_penalty, and the best k
/// that do not end run on. A prompt is done when its best running beam, scored at its
/// current length, cannot beat its worst finished hypothesis; decoding stops when every
/// prompt is done or after max_new_tokens. Each prompt's best finished hypothesis is the
/// result. The prompts are prefilled once; their cache rows are repeated for the beams.
template <BloomModel M, Device D, class T, TensorAxis Axis>
Generated beam_search(BloomStack<M, D, T, Axis>& model, const BatchView& prompts,
                      const GenerateOptions& o) {
  constexpr std::int64_t V = M::vocab_size;
  detail::check_generation(model, V, M::layers, prompts, o, "beam_search");
  Generated g;
  g.tokens.resize(static_cast<std::size_t>(prompts.rows));
  g.finished.assign(static_cast<std::size_t>(prompts.rows), 0);
  g.scores.assign(static_cast<std::size_t>(prompts.rows), 0.0f);
  if (o.max_new_tokens == 0) return g;
  detail::BeamSearch<BloomStack<M, D, T, Axis>> beams(model, prompts, o, V);
  for (std::int64_t step = 0; step < o.max_new_tokens; ++step) {
    beams.score(step);
    beams.gather_candidates();
    const bool last = step + 1 == o.max_new_tokens;  // every candidate reaches the length
    beams.advance(step + 1, last);                   // step + 1 tokens generated
    g.steps = step + 1;
    if (!beams.improvable(step + 1) || last) break;
    beams.decode();
  }
  beams.result(g);
  return g;
}

/// Decoding as o asks: greedy_generate for one beam, beam_search for more.
template <BloomModel M, Device D, class T, TensorAxis Axis>
Generated generate(BloomStack<M, D, T, Axis>& model, const BatchView& prompts,
                   const GenerateOptions& o = {}) {
  return o.num_beams > 1 ? beam_search(model, prompts, o) : greedy_generate(model, prompts, o);
}

}  // namespace seqpar::inline v0

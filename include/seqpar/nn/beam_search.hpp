#pragma once
// Beam search with transformers' semantics over a BloomStack and its KV cache, whose rows
// follow the chosen beams (BloomStack::select_cache_rows).

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
#include "seqpar/nn/next_tokens.hpp"

namespace seqpar::inline v0 {

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
        decoder_(model),
        o_(o),
        V(vocab),
        N(prompts.rows),
        K(o.num_beams),
        rows_(N * K),
        cands_(static_cast<std::size_t>(2 * K)),
        cache_(decoder_.kv_cache(rows_, prompts.seq + o.max_new_tokens - 1)),
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
      decoder_.select_cache_rows(cache_, once, index_);
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
    decoder_.select_cache_rows(cache_, cache_, index_);
    decoder_.decode(next_, cache_);
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
  Decoder<Stack> decoder_;
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

/// Beam search with o.num_beams beams a prompt, matching transformers' generate(num_beams = k,
/// do_sample = False, early_stopping = False); the prompts are prefilled once and their cache
/// rows repeated for the beams.
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

}  // namespace seqpar::inline v0

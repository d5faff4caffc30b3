#pragma once
// Batched greedy decoding with a KV cache, for a whole BloomStack on any device and under
// a tensor split. The left-padded prompts go through the stack once (prefill: the block's
// forward, which also fills each block's cache); every new token then runs through the
// blocks' decoding step, attending to its row's cached keys (nn/block.hpp). ALiBi
// positions continue from each row's own length (the count of its non-padding tokens), so
// a row's result does not depend on its padding. Under a tensor split each rank decodes
// with its heads and vocabulary rows and the ranks agree on every token: the argmax over
// the vocabulary combines the ranks' best logits through the tensor axis.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "seqpar/backend/device.hpp"
#include "seqpar/core/batch.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/nn/model.hpp"

namespace seqpar::inline v0 {

/// What greedy decoding is asked to do.
struct GenerateOptions {
  std::int64_t max_new_tokens = 64;
  std::int32_t eos_id = 2;  // a row stops when it produces this token
  /// Called before each token is chosen, with the next-token logits [rows, vocab] and
  /// which rows are still generating (for tests and scoring; may be empty). Under a tensor
  /// split the logits are gathered from every rank (then set it on every rank or none).
  std::function<void(std::int64_t step, std::span<const float> logits,
                     std::span<const std::uint8_t> active)>
      on_step;
};

/// Tokens chosen for each row, without the eos.
struct Generated {
  std::vector<std::vector<std::int32_t>> tokens;
  std::vector<std::uint8_t> finished;  // the row produced eos (else it hit max_new_tokens)
  std::int64_t steps = 0;              // decoding steps taken
};

namespace detail {

/// The next-token logits of a stack's cache, on the host as float: this rank's real
/// vocabulary columns, each row's best of them, and (when asked) every rank's columns.
template <class Stack>
struct NextTokenLogits {
  using T = typename Stack::Scalar;
  using Arena = typename Stack::Arena;
  std::int64_t rows, vocab, cols, real, row0;
  Buffer<T, Arena> device;       // [rows, cols] this rank's vocab rows (padding included)
  std::vector<T> raw;            // its host copy, for storage types other than float
  std::vector<float> local;      // [rows, cols]
  std::vector<float> full;       // [rows, vocab] all ranks' real columns
  std::vector<float> best;       // [rows] the best logit over the whole vocabulary
  std::vector<std::int64_t> id;  // [rows] its token (the first of equal ones)

  NextTokenLogits(Stack& s, std::int64_t r, std::int64_t v)
      : rows(r),
        vocab(v),
        cols(s.vocab_shard().rows),
        real(s.vocab_shard().real),
        row0(s.vocab_shard().row0),
        device(s.arena(), static_cast<std::size_t>(r * cols), Memory::buffers),
        local(static_cast<std::size_t>(r * cols)),
        best(static_cast<std::size_t>(r)),
        id(static_cast<std::size_t>(r)) {}

  /// Logits of c.hidden; best and id over every rank of the tensor axis; with `gather`,
  /// full holds the whole vocabulary's logits too.
  template <class Cache>
  void compute(Stack& s, const Cache& c, bool gather) {
    using O = Ops<typename Stack::Dev>;
    s.logits(c.hidden.data(), rows, device.data());  // [rows, cols]
    if constexpr (std::is_same_v<T, float>) {
      O::download(local.data(), device.data(), rows * cols);
    } else {
      raw.resize(local.size());
      O::download(raw.data(), device.data(), rows * cols);
      for (std::size_t i = 0; i < raw.size(); ++i) local[i] = static_cast<float>(raw[i]);
    }
    // This rank's best real column, then the best over the ranks: the largest logit, and of
    // the ranks holding it the lowest token id (the maximum of -id), as an argmax over the
    // whole vocabulary picks the first of equal logits.
    constexpr std::int64_t none = std::numeric_limits<std::int64_t>::max();
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* l = local.data() + r * cols;
      const auto k = static_cast<std::int64_t>(std::max_element(l, l + real) - l);
      best[static_cast<std::size_t>(r)] = real > 0 ? l[k] : -std::numeric_limits<float>::infinity();
      id[static_cast<std::size_t>(r)] = real > 0 ? row0 + k : none;
    }
    std::vector<float> top = best;
    s.axis().max(top.data(), rows);
    for (std::int64_t r = 0; r < rows; ++r) {
      const auto i = static_cast<std::size_t>(r);
      id[i] = best[i] == top[i] ? -id[i] : -none;
    }
    s.axis().max(id.data(), rows);
    for (std::int64_t r = 0; r < rows; ++r)
      id[static_cast<std::size_t>(r)] = -id[static_cast<std::size_t>(r)];
    best = top;
    if (!gather) return;
    // Each rank writes its real columns into zeros; the sum over the ranks is every column.
    full.assign(static_cast<std::size_t>(rows * vocab), 0.0f);
    for (std::int64_t r = 0; r < rows; ++r)
      std::copy_n(local.data() + r * cols, real, full.data() + r * vocab + row0);
    s.axis().sum(full.data(), rows * vocab);
  }
};

}  // namespace detail

/// Greedy decoding of `prompts` (left-padded: each row's tokens end in the last column;
/// labels are ignored) with `model`, which must hold every layer (no pipeline stage; a
/// tensor split is fine: every rank of the group calls it with the same prompts and
/// options). Stops when every row has produced eos or after max_new_tokens.
template <BloomModel M, Device D, class T, class Axis>
Generated greedy_generate(BloomStack<M, D, T, Axis>& model, const BatchView& prompts,
                          const GenerateOptions& o = {}) {
  constexpr std::int64_t V = M::vocab_size, L = M::layers;
  SEQPAR_CHECK(model.whole(), "greedy_generate: the model holds layers [", model.stage().first,
               ", ", model.stage().last, ") of ", L,
               "; generation needs the whole model on one rank");
  const std::int64_t B = prompts.rows, P = prompts.seq;
  SEQPAR_CHECK(B > 0 && P > 0 && o.max_new_tokens >= 0, "greedy_generate: ", B, " rows of ", P,
               " tokens and max_new_tokens ", o.max_new_tokens, "; expected positive sizes");
  SEQPAR_CHECK(prompts.input_ids.size() == static_cast<std::size_t>(B * P) &&
                   prompts.attention_mask.size() == static_cast<std::size_t>(B * P),
               "greedy_generate: input_ids and attention_mask must hold rows*seq = ", B * P,
               " values");
  for (std::int64_t b = 0; b < B; ++b) {
    bool seen = false;
    for (std::int64_t t = 0; t < P; ++t) {
      const auto i = static_cast<std::size_t>(b * P + t);
      const bool m = prompts.attention_mask[i] != 0;
      SEQPAR_CHECK(!seen || m, "greedy_generate: row ", b, " has padding at position ", t,
                   " after its tokens; prompts must be left-padded");
      seen = seen || m;
      SEQPAR_CHECK(prompts.input_ids[i] >= 0 && prompts.input_ids[i] < V,
                   "greedy_generate: input_ids[", b, "][", t, "] = ", prompts.input_ids[i],
                   " is outside the vocabulary [0, ", V, ")");
    }
    SEQPAR_CHECK(seen, "greedy_generate: row ", b, " has no tokens (its attention mask is all 0)");
  }

  Generated g;
  g.tokens.resize(static_cast<std::size_t>(B));
  g.finished.assign(static_cast<std::size_t>(B), 0);
  if (o.max_new_tokens == 0) return g;

  // Prefill: the prompts (without labels) through the stack once; the cache has room for
  // every token but the last chosen one, which is never fed back.
  auto cache = model.kv_cache(B, P + o.max_new_tokens - 1);
  {
    Batch pb(B, P);
    std::copy(prompts.input_ids.begin(), prompts.input_ids.end(), pb.input_ids.begin());
    std::copy(prompts.attention_mask.begin(), prompts.attention_mask.end(),
              pb.attention_mask.begin());
    model.prefill(pb.view(), cache);
  }
  detail::NextTokenLogits<BloomStack<M, D, T, Axis>> next_logits(model, B, V);

  std::vector<std::int32_t> next(static_cast<std::size_t>(B), o.eos_id);
  std::vector<std::uint8_t> active(static_cast<std::size_t>(B));
  for (std::int64_t step = 0; step < o.max_new_tokens; ++step) {
    next_logits.compute(model, cache, static_cast<bool>(o.on_step));
    for (std::int64_t b = 0; b < B; ++b)
      active[static_cast<std::size_t>(b)] = !g.finished[static_cast<std::size_t>(b)];
    if (o.on_step) o.on_step(step, next_logits.full, active);
    bool any = false;
    for (std::int64_t b = 0; b < B; ++b) {
      const auto r = static_cast<std::size_t>(b);
      if (!active[r]) continue;  // a finished row is fed its eos again; its output is unused
      const auto best = static_cast<std::int32_t>(next_logits.id[r]);
      next[r] = best;
      if (best == o.eos_id) {
        g.finished[r] = 1;
      } else {
        g.tokens[r].push_back(best);
        any = true;
      }
    }
    g.steps = step + 1;
    if (!any || step + 1 == o.max_new_tokens) break;
    model.decode(next, cache);
  }
  return g;
}

}  // namespace seqpar::inline v0

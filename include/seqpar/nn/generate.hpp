#pragma once
// Batched decoding with a KV cache for a whole BloomStack, on any device and under a tensor
// split: greedy_generate here, beam_search (nn/beam_search.hpp), and generate, which picks.

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
#include "seqpar/nn/beam_search.hpp"
#include "seqpar/nn/decoder.hpp"
#include "seqpar/nn/model.hpp"
#include "seqpar/nn/next_tokens.hpp"

namespace seqpar::inline v0 {

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
    Decoder(model).decode(next, cache);
  }
  return g;
}

/// Decoding as o asks: greedy_generate for one beam, beam_search for more.
template <BloomModel M, Device D, class T, TensorAxis Axis>
Generated generate(BloomStack<M, D, T, Axis>& model, const BatchView& prompts,
                   const GenerateOptions& o = {}) {
  return o.num_beams > 1 ? beam_search(model, prompts, o) : greedy_generate(model, prompts, o);
}

}  // namespace seqpar::inline v0

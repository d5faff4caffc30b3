#pragma once
// The library's SeqGPT tasks, each an NluTask (data/task.hpp; docs/tasks.md), and
// batched_answers, which makes a task's AnswerFn from a tokenizer and a decoder.

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "seqpar/core/batch.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/data/batching.hpp"
#include "seqpar/data/classification_task.hpp"
#include "seqpar/data/examples.hpp"
#include "seqpar/data/ner_task.hpp"
#include "seqpar/data/relation_task.hpp"
#include "seqpar/data/task.hpp"

namespace seqpar::inline v0 {

/// Turns UTF-8 text into tokens and back (seqpar::Tokenizer is one).
template <class T>
concept TextCodec = TextEncoder<T> && requires(const T& t, std::span<const std::int32_t> ids) {
  { t.decode(ids, true) } -> std::convertible_to<std::string>;
};

/// An AnswerFn over a model: each prompt encoded with `tok` and cut to its last
/// `max_prompt_tokens` tokens (SeqGPT's inference truncates on the left; 0: no limit), the
/// prompts batched `rows` at a time, longest first, left-padded with tok's pad id, and each
/// row's new tokens (as `generate` returns them for a batch, without the eos) decoded without
/// special tokens. `tok` must outlive the function.
template <TextCodec Codec, class Generate>
requires std::invocable<Generate&, const Batch&> AnswerFn batched_answers(
    const Codec& tok, Generate generate, std::int64_t rows, std::int64_t max_prompt_tokens) {
  SEQPAR_CHECK(rows > 0, "batched_answers: rows must be positive (got ", rows, ")");
  return [&tok, generate = std::move(generate), rows,
          max_prompt_tokens](std::span<const std::string> prompts) mutable {
    std::vector<std::vector<std::int32_t>> ids(prompts.size());
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      ids[i] = tok.encode(prompts[i]);
      if (max_prompt_tokens > 0 && static_cast<std::int64_t>(ids[i].size()) > max_prompt_tokens)
        ids[i].erase(ids[i].begin(), ids[i].end() - max_prompt_tokens);
    }
    std::vector<std::size_t> order(prompts.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return ids[a].size() > ids[b].size(); });
    std::vector<std::string> out(prompts.size());
    for (std::size_t b = 0; b < order.size(); b += static_cast<std::size_t>(rows)) {
      const std::size_t n = std::min(order.size() - b, static_cast<std::size_t>(rows));
      std::vector<std::vector<std::int32_t>> batch;
      for (std::size_t k = 0; k < n; ++k) batch.push_back(std::move(ids[order[b + k]]));
      const std::vector<std::vector<std::int32_t>> tokens = generate(left_pad(batch, tok.pad_id()));
      SEQPAR_CHECK(tokens.size() == n, "batched_answers: the decoder gave ", tokens.size(),
                   " rows for a batch of ", n);
      for (std::size_t k = 0; k < n; ++k) out[order[b + k]] = tok.decode(tokens[k], true);
    }
    return out;
  };
}

}  // namespace seqpar::inline v0

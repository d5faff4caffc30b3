#pragma once
// How a model decodes unless told otherwise: for SeqGPT-560M, the settings its authors
// publish with it (their inference script: beam search of 4, transformers' repetition
// penalty 2.0, at most 256 new tokens, prompts of at most 1,024 tokens truncated on the left);
// for any other model, greedy without a penalty within the same lengths. These numbers live
// here alone: a program copies num_beams, repetition_penalty and max_new_tokens into
// nn/generate.hpp's GenerateOptions and cuts its prompts to max_prompt_tokens
// (batched_answers, prompt_tail). check_decoding refuses settings that cannot decode, so a
// program can refuse them before any work.

#include <cmath>
#include <cstdint>
#include <string_view>

#include "seqpar/config/bloom.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::inline v0 {

/// Decoding settings: what generation and the prompts' truncation take by default.
struct DecodingDefaults {
  std::int64_t num_beams = 1;             // 1: greedy
  double repetition_penalty = 1.0;        // transformers' penalty of seen tokens; 1: none
  std::int64_t max_new_tokens = 256;      // tokens an answer may have
  std::int64_t max_prompt_tokens = 1024;  // a longer prompt loses its first tokens
  bool operator==(const DecodingDefaults&) const = default;
};

/// SeqGPT's published inference settings (num_beams=4, do_sample=False, max_new_tokens=256,
/// repetition_penalty=2.0; tokenizer truncation on the left at max_length=1024).
inline constexpr DecodingDefaults seqgpt_decoding{4, 2.0, 256, 1024};

/// The default decoding of model M: SeqGPT's for SeqGPT560M (SeqGPT-560M's shape, which
/// BLOOMZ-560M shares), greedy without a penalty for every other model.
template <BloomModel M>
inline constexpr DecodingDefaults decoding_defaults = DecodingDefaults{};

template <>
inline constexpr DecodingDefaults decoding_defaults<SeqGPT560M> = seqgpt_decoding;

/// The most tokens an answer may have: generation allocates each row's key/value cache for
/// all of them before the first step.
inline constexpr std::int64_t max_answer_tokens = std::int64_t{1} << 16;

/// Throws seqpar::Error naming the setting when `d` cannot decode: fewer than one beam, a
/// repetition penalty that is not a positive finite number, no new token (or more than
/// max_answer_tokens) or no prompt token allowed. `who` says where the settings came from
/// ("predict's options").
inline void check_decoding(const DecodingDefaults& d, std::string_view who = "decoding") {
  SEQPAR_CHECK(d.num_beams >= 1, who, ": num_beams is ", d.num_beams,
               "; expected at least 1 (1: greedy, more: beam search)");
  SEQPAR_CHECK(d.repetition_penalty > 0 && std::isfinite(d.repetition_penalty), who,
               ": repetition_penalty is ", d.repetition_penalty,
               "; expected a positive finite number (1: no penalty)");
  SEQPAR_CHECK(d.max_new_tokens >= 1 && d.max_new_tokens <= max_answer_tokens, who,
               ": max_new_tokens is ", d.max_new_tokens, "; expected 1 to ", max_answer_tokens,
               " (an answer of no token scores nothing; each row's key/value cache holds every "
               "token it may generate)");
  SEQPAR_CHECK(d.max_prompt_tokens >= 1, who, ": max_prompt_tokens is ", d.max_prompt_tokens,
               "; expected at least 1 (a prompt cut to no token leaves nothing to answer)");
}

}  // namespace seqpar::inline v0

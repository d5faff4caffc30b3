// The default decoding of a model: SeqGPT's published settings for SeqGPT-560M, greedy
// without a penalty for any other model.
#include <doctest/doctest.h>

#include "seqpar/data/decoding.hpp"

using namespace seqpar;

TEST_CASE("SeqGPT-560M decodes as its authors' inference does; other models greedily") {
  // inference.py: num_beams=4, do_sample=False, max_new_tokens=256, repetition_penalty=2.0,
  // the tokenizer truncating on the left at max_length=1024.
  static_assert(seqgpt_decoding == DecodingDefaults{4, 2.0, 256, 1024});
  static_assert(decoding_defaults<SeqGPT560M> == seqgpt_decoding);
  using Small = Bloom<BloomConfig{.vocab_size = 512, .hidden = 64, .layers = 2, .heads = 4}>;
  constexpr DecodingDefaults small = decoding_defaults<Small>;
  CHECK(small.num_beams == 1);
  CHECK(small.repetition_penalty == 1.0);
  CHECK(small.max_new_tokens == seqgpt_decoding.max_new_tokens);
  CHECK(small.max_prompt_tokens == seqgpt_decoding.max_prompt_tokens);
}

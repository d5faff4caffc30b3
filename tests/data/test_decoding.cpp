// The default decoding of a model: SeqGPT's published settings for SeqGPT-560M, greedy
// without a penalty for any other model.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>

#include "seqpar/core/error.hpp"
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

TEST_CASE("check_decoding refuses settings that cannot decode, naming the setting") {
  CHECK_NOTHROW(check_decoding(seqgpt_decoding));
  CHECK_NOTHROW(check_decoding(DecodingDefaults{}));
  CHECK_NOTHROW(check_decoding(DecodingDefaults{1, 0.5, 1, 1}));
  const auto refused = [](DecodingDefaults d, const std::string& what) {
    CAPTURE(what);
    try {
      check_decoding(d, "predict's options");
      FAIL("accepted");
    } catch (const Error& e) {
      const std::string m = e.what();
      CHECK(m.find("predict's options: ") == 0);
      CHECK(m.find(what) != std::string::npos);
    }
  };
  DecodingDefaults d = seqgpt_decoding;
  d.num_beams = 0;
  refused(d, "num_beams is 0; expected at least 1");
  d.num_beams = -3;
  refused(d, "num_beams is -3");
  d = seqgpt_decoding;
  for (const double p : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    d.repetition_penalty = p;
    refused(d, "repetition_penalty is ");
  }
  d = seqgpt_decoding;
  d.max_new_tokens = 0;
  refused(d, "max_new_tokens is 0");
  // More than any key/value cache can hold is refused before generation allocates it.
  d.max_new_tokens = 65537;
  refused(d, "max_new_tokens is 65537; expected 1 to 65536");
  d.max_new_tokens = 65536;
  CHECK_NOTHROW(check_decoding(d));
  d = seqgpt_decoding;
  d.max_prompt_tokens = 0;
  refused(d, "max_prompt_tokens is 0");
}

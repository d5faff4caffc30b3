// The model of the decoding tests (greedy, beams, the generate loop) and how it is made.
#pragma once

#include <cstdint>

#include "seqpar/config/bloom.hpp"
#include "seqpar/train/trainer.hpp"

namespace seqpar::test {

using DecodeModel = Bloom<BloomConfig{.vocab_size = 97, .hidden = 48, .layers = 3, .heads = 12}>;

/// The padding token of the prompts.
inline constexpr std::int32_t pad = 3;

/// Random weights whose logits are spread out: no near-ties between the best candidates.
inline TrainOptions random_model() {
  TrainOptions o;
  o.seed = 17;
  o.init_std = 0.4;
  return o;
}

}  // namespace seqpar::test

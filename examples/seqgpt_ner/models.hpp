// The model types seqgpt_ner is built for; each has its own translation unit.
#pragma once

#include "options.hpp"
#include "seqpar/config/bloom.hpp"

namespace ner {

/// The default: a tiny BLOOM trained from scratch (vocabulary for a character-level tokenizer).
using TinyNer =
    seqpar::Bloom<seqpar::BloomConfig{.vocab_size = 4608, .hidden = 128, .layers = 2, .heads = 4}>;

int run_tiny(const Options& o);        // tiny.cpp
int run_seqgpt560m(const Options& o);  // seqgpt560m.cpp

}  // namespace ner

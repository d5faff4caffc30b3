// The model types seqgpt_ner is built for. Each has translation units of its own for its
// services and its trainers under each family of plans (CMakeLists.txt, model_unit.cpp.in).
#pragma once

#include <string_view>

#include "launch.hpp"
#include "options.hpp"
#include "seqpar/config/bloom.hpp"

namespace ner {

/// The default: a tiny BLOOM trained from scratch (vocabulary for a character-level tokenizer).
using TinyNer =
    seqpar::Bloom<seqpar::BloomConfig{.vocab_size = 4608, .hidden = 128, .layers = 2, .heads = 4}>;

/// Runs the command of `o` (its model resolved) on the CPU (commands.cpp).
int run_cpu(const Options& o, const Launch& launch);

}  // namespace ner

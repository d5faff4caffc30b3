// The model types seqgpt_ner is built for. Each has its own translation unit for evaluation
// and prediction (tiny.cpp, seqgpt560m.cpp) and one per plan family for training
// (train_plans.cpp, compiled once per model and family).
#pragma once

#include <string_view>

#include "launch.hpp"
#include "options.hpp"
#include "seqpar/config/bloom.hpp"

namespace ner {

/// The default: a tiny BLOOM trained from scratch (vocabulary for a character-level tokenizer).
using TinyNer =
    seqpar::Bloom<seqpar::BloomConfig{.vocab_size = 4608, .hidden = 128, .layers = 2, .heads = 4}>;

int run_tiny(const Options& o, const Launch& launch);        // tiny.cpp
int run_seqgpt560m(const Options& o, const Launch& launch);  // seqgpt560m.cpp

/// Training model M under the plans of Family. Only declared here: train_plans.cpp defines
/// train() and instantiates it explicitly for one (M, Family) pair per object file, so
/// that no other translation unit compiles a Trainer.
template <class M, class Family>
struct TrainFamily {
  /// Trains under the plan called `plan` (one of Family's); returns the exit code.
  static int train(std::string_view plan, const Options& o, const Launch& launch);
};

}  // namespace ner

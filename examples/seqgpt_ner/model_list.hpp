// The models seqgpt_ner knows, by the names --model and SEQPAR_NER_MODELS take: the tiny
// model and every published BLOOM shape. Which of them a build compiles is CMakeLists.txt's
// SEQPAR_NER_MODELS (compiled.hpp); this list is what the command line and config.json are
// matched against.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "seqpar/config/bloom.hpp"

namespace ner {

/// The default: a tiny BLOOM trained from scratch (vocabulary for a character-level tokenizer).
using TinyNer =
    seqpar::Bloom<seqpar::BloomConfig{.vocab_size = 4608, .hidden = 128, .layers = 2, .heads = 4}>;

/// A model this program knows: the name --model takes and its shape.
struct ModelInfo {
  std::string_view name;
  seqpar::BloomConfig config;
  std::int64_t parameter_count = 0;
  bool seqgpt = false;  // SeqGPT-560M: its authors' decoding is the default
};

/// Every model of the program, in the order --model lists them.
inline constexpr ModelInfo models[] = {
    {"tiny", TinyNer::config, TinyNer::parameter_count, false},
    {"seqgpt560m", seqpar::SeqGPT560M::config, seqpar::SeqGPT560M::parameter_count, true},
    {"bloom1b1", seqpar::Bloom1B1::config, seqpar::Bloom1B1::parameter_count, false},
    {"bloom1b7", seqpar::Bloom1B7::config, seqpar::Bloom1B7::parameter_count, false},
    {"bloom3b", seqpar::Bloom3B::config, seqpar::Bloom3B::parameter_count, false},
    {"bloom7b1", seqpar::Bloom7B1::config, seqpar::Bloom7B1::parameter_count, false}};

/// The names of `models`, "tiny, seqgpt560m, ..." (for messages).
inline std::string model_names() {
  std::string s;
  for (const ModelInfo& m : models) s += (s.empty() ? "" : ", ") + std::string(m.name);
  return s;
}

/// The ModelInfo called `name`, or nullptr.
constexpr const ModelInfo* find_model(std::string_view name) {
  for (const ModelInfo& m : models)
    if (m.name == name) return &m;
  return nullptr;
}

}  // namespace ner

#pragma once
// A whole model on one rank for decoding, whatever plan and precision trained it: what a
// program needs to evaluate or predict in-process from the weights a run wrote.

#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "seqpar/backend/device.hpp"
#include "seqpar/config/bloom.hpp"
#include "seqpar/core/batch.hpp"
#include "seqpar/io/bloom_weights.hpp"
#include "seqpar/nn/generate.hpp"
#include "seqpar/nn/model.hpp"

namespace seqpar::inline v0 {

/// Decodes a batch of prompts with a whole model (greedy or beam search, GenerateOptions).
using GenerateFn = std::function<Generated(const BatchView&, const GenerateOptions&)>;

/// Model M whole on device Dev in fp32 (checkpoints hold fp32 weights, whatever precision
/// trained them): its own arena and stack, weights loaded from a file.
template <BloomModel M, Device Dev>
struct GenerationModel {
  DeviceArena<Dev> arena;
  BloomStack<M, Dev, float> stack{arena};

  /// Loads weights by Hugging Face names (a model, checkpoint or pytorch_model.bin), a unit
  /// at a time through the host (the parameters live on Dev).
  void load(const std::filesystem::path& path) {
    const BloomWeightsFile<M> f(path);
    std::vector<float> unit;
    for (std::size_t u = 0; u < stack.units().size(); ++u) {
      unit.assign(static_cast<std::size_t>(stack.padded_numel(u)), 0.0f);
      for (const auto& p : stack.units()[u].params) f.read(p, unit.data() + p.offset);
      Ops<Dev>::upload(stack.params(u), unit.data(), stack.padded_numel(u));
    }
  }
};

/// A GenerateFn over model M on Dev with the weights of `path`; it owns the model.
template <BloomModel M, Device Dev>
GenerateFn load_generation_model(const std::filesystem::path& path) {
  auto g = std::make_shared<GenerationModel<M, Dev>>();
  g->load(path);
  return [g](const BatchView& b, const GenerateOptions& o) { return generate(g->stack, b, o); };
}

}  // namespace seqpar::inline v0

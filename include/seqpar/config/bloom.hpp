#pragma once
// BloomConfig and Bloom<Config>: a BLOOM-shaped model as a type, every size constexpr; the
// published BLOOM shapes, as types and as a list to look a config.json up in.

#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>

namespace seqpar::inline v0 {

/// The numbers that define a BLOOM model (Hugging Face BloomConfig field names in comments).
struct BloomConfig {
  std::int64_t vocab_size = 250880;  // vocab_size
  std::int64_t hidden = 1024;        // hidden_size
  std::int64_t layers = 24;          // n_layer
  std::int64_t heads = 16;           // n_head
  double layer_norm_eps = 1e-5;      // layer_norm_epsilon

  friend constexpr bool operator==(const BloomConfig&, const BloomConfig&) = default;
};

/// A BLOOM model type. Sizes are compile-time constants so that plans can be checked
/// against them (heads divisible by the tensor degree, layers by the stages, ...).
template <BloomConfig C>
struct Bloom {
  static_assert(C.vocab_size > 0 && C.hidden > 0 && C.layers > 0 && C.heads > 0,
                "BloomConfig: vocab_size, hidden, layers and heads must all be positive.");
  static_assert(C.hidden % C.heads == 0, "BloomConfig: hidden must be divisible by heads.");

  static constexpr BloomConfig config = C;
  static constexpr std::int64_t vocab_size = C.vocab_size;
  static constexpr std::int64_t hidden = C.hidden;
  static constexpr std::int64_t layers = C.layers;
  static constexpr std::int64_t heads = C.heads;
  static constexpr std::int64_t head_dim = C.hidden / C.heads;
  static constexpr std::int64_t ffn_hidden = 4 * C.hidden;
  static constexpr double layer_norm_eps = C.layer_norm_eps;

  // Two layernorms, fused QKV, attention output, MLP up and down, all with biases.
  static constexpr std::int64_t params_per_layer =
      4 * hidden + (3 * hidden * hidden + 3 * hidden) + (hidden * hidden + hidden) +
      (ffn_hidden * hidden + ffn_hidden) + (hidden * ffn_hidden + hidden);
  static constexpr std::int64_t embedding_params = vocab_size * hidden;
  /// Every parameter once: the LM head is tied to the embedding and not counted again.
  static constexpr std::int64_t parameter_count =
      embedding_params + 2 * hidden + layers * params_per_layer + 2 * hidden;
};

/// Satisfied by Bloom<...> types.
template <class M>
concept BloomModel = requires {
  { M::config } -> std::convertible_to<BloomConfig>;
  requires std::same_as<M, Bloom<M::config>>;
};

/// SeqGPT-560M: BLOOMZ-560M's shape.
using SeqGPT560M = Bloom<BloomConfig{
    .vocab_size = 250880, .hidden = 1024, .layers = 24, .heads = 16, .layer_norm_eps = 1e-5}>;

static_assert(SeqGPT560M::parameter_count == 559'214'592);
static_assert(SeqGPT560M::params_per_layer == 12'596'224);

/// The published BLOOM shapes (bigscience/bloom-<size>; bloomz-<size> and SeqGPT fine-tunes
/// of it share its config.json): vocab_size 250880, layer_norm_epsilon 1e-5.
using Bloom560M = SeqGPT560M;
using Bloom1B1 = Bloom<BloomConfig{.hidden = 1536, .layers = 24, .heads = 16}>;
using Bloom1B7 = Bloom<BloomConfig{.hidden = 2048, .layers = 24, .heads = 16}>;  // SeqGPT-1B7's
using Bloom3B = Bloom<BloomConfig{.hidden = 2560, .layers = 30, .heads = 32}>;
using Bloom7B1 = Bloom<BloomConfig{.hidden = 4096, .layers = 30, .heads = 32}>;  // SeqGPT-7B1's

// The parameter counts their model cards publish.
static_assert(Bloom1B1::parameter_count == 1'065'314'304);
static_assert(Bloom1B7::parameter_count == 1'722'408'960);
static_assert(Bloom3B::parameter_count == 3'002'557'440);
static_assert(Bloom7B1::parameter_count == 7'069'016'064);

/// A published BLOOM shape by its Hugging Face name.
struct PublishedBloom {
  std::string_view name;  // "bloom-1b7"
  BloomConfig config;
  std::int64_t parameter_count = 0;
};

/// Every published BLOOM shape, smallest first.
inline constexpr PublishedBloom published_blooms[] = {
    {"bloom-560m", Bloom560M::config, Bloom560M::parameter_count},
    {"bloom-1b1", Bloom1B1::config, Bloom1B1::parameter_count},
    {"bloom-1b7", Bloom1B7::config, Bloom1B7::parameter_count},
    {"bloom-3b", Bloom3B::config, Bloom3B::parameter_count},
    {"bloom-7b1", Bloom7B1::config, Bloom7B1::parameter_count}};

/// The published shape `c` is, or nullptr when it is none.
constexpr const PublishedBloom* find_published_bloom(const BloomConfig& c) {
  for (const PublishedBloom& b : published_blooms)
    if (b.config == c) return &b;
  return nullptr;
}

/// A shape in words: "hidden 2048, 24 layers, 16 heads".
inline std::string shape_words(const BloomConfig& c) {
  return "hidden " + std::to_string(c.hidden) + ", " + std::to_string(c.layers) + " layers, " +
         std::to_string(c.heads) + " heads";
}

}  // namespace seqpar::inline v0

#pragma once
// BloomConfig and Bloom<Config>: a BLOOM-shaped model as a type, every size constexpr.

#include <concepts>
#include <cstdint>

namespace seqpar::inline v0 {

/// The numbers that define a BLOOM model (Hugging Face BloomConfig field names in comments).
struct BloomConfig {
  std::int64_t vocab_size = 250880;  // vocab_size
  std::int64_t hidden = 1024;        // hidden_size
  std::int64_t layers = 24;          // n_layer
  std::int64_t heads = 16;           // n_head
  double layer_norm_eps = 1e-5;      // layer_norm_epsilon
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

}  // namespace seqpar::inline v0

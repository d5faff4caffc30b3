#pragma once
// read_bloom_config: a Hugging Face BLOOM config.json as a BloomConfig (the numbers; a
// model type needs them at compile time, the planner at run time). Definitions:
// io/impl/hf_config.hpp (core/separate_compilation.hpp).

#include <filesystem>

#include "seqpar/config/bloom.hpp"
#include "seqpar/core/separate_compilation.hpp"

namespace seqpar::inline v0 {

/// Reads vocab_size, hidden_size (or n_embed), n_layer (or num_hidden_layers), n_head (or
/// num_attention_heads) and layer_norm_epsilon (default 1e-5) from a BloomConfig file.
/// Throws seqpar::Error naming the file and the field that is missing or wrong.
SEQPAR_DECL BloomConfig read_bloom_config(const std::filesystem::path& path);

}  // namespace seqpar::inline v0

#if !defined(SEQPAR_SEPARATE_COMPILATION)
#include "seqpar/io/impl/hf_config.hpp"
#endif

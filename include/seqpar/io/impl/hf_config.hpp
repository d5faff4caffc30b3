#pragma once
// The definitions of io/hf_config.hpp: in its headers' units, or compiled once
// (core/separate_compilation.hpp).

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

#include "seqpar/core/error.hpp"
#include "seqpar/io/hf_config.hpp"

namespace seqpar::inline v0 {

SEQPAR_DECL BloomConfig read_bloom_config(const std::filesystem::path& path) {
  const std::string file = path.string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) detail::fail_missing(file, ": no such model config");
  std::ifstream in(path);
  SEQPAR_CHECK(in.good(), file, ": cannot open the model config");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    detail::fail(file, ": not JSON (", e.what(), ")");
  }
  SEQPAR_CHECK(j.is_object(), file, ": a model config is a JSON object");
  const auto count = [&](std::initializer_list<const char*> names) -> std::int64_t {
    for (const char* n : names) {
      const auto it = j.find(n);
      if (it == j.end()) continue;
      SEQPAR_CHECK(it->is_number_integer() && it->get<std::int64_t>() > 0, file, ": field '", n,
                   "' is ", it->dump(), "; expected a positive integer");
      return it->get<std::int64_t>();
    }
    detail::fail(file, ": no field '", *names.begin(), "'", names.size() > 1 ? " (or '" : "",
                 names.size() > 1 ? *(names.begin() + 1) : "", names.size() > 1 ? "')" : "",
                 "; a BLOOM config.json has it");
  };
  BloomConfig c;
  c.vocab_size = count({"vocab_size"});
  c.hidden = count({"hidden_size", "n_embed"});
  c.layers = count({"n_layer", "num_hidden_layers"});
  c.heads = count({"n_head", "num_attention_heads"});
  if (const auto it = j.find("layer_norm_epsilon"); it != j.end() && it->is_number())
    c.layer_norm_eps = it->get<double>();
  SEQPAR_CHECK(c.hidden % c.heads == 0, file, ": hidden_size ", c.hidden,
               " is not divisible by n_head ", c.heads);
  return c;
}

}  // namespace seqpar::inline v0

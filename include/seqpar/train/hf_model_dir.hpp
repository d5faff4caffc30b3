#pragma once
// A Hugging Face model directory, both ways: written from any weights file a run leaves so that
// transformers' AutoModelForCausalLM and AutoTokenizer open it (fp32, the tied lm_head not
// repeated), and read with its config.json checked against the compiled model type.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "seqpar/config/bloom.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/io/atomic_file.hpp"
#include "seqpar/io/bloom_weights.hpp"
#include "seqpar/io/hf_config.hpp"
#include "seqpar/io/safetensors.hpp"
#include "seqpar/io/tensor_file.hpp"
#include "seqpar/nn/generate.hpp"

namespace seqpar::inline v0 {

/// A tokenizer's special tokens (id -1: the tokenizer has none), for the files that name
/// them. (The tokenizer itself is the program's: seqpar::Tokenizer needs Oniguruma.)
struct HfSpecialTokens {
  struct Token {
    std::string text;
    std::int64_t id = -1;
  };
  Token bos, eos, pad, unk;
};

/// config.json of model `m` with the tokenizer's special ids.
inline nlohmann::ordered_json hf_config_json(const BloomConfig& m, const HfSpecialTokens& special) {
  nlohmann::ordered_json j;
  j["architectures"] = {"BloomForCausalLM"};
  j["model_type"] = "bloom";
  // The embedding's rows as the file holds them (seqpar's padding of the vocabulary to a
  // multiple of 128 and of the tensor split is never written).
  j["vocab_size"] = m.vocab_size;
  j["hidden_size"] = m.hidden;
  j["n_layer"] = m.layers;
  j["n_head"] = m.heads;
  j["layer_norm_epsilon"] = m.layer_norm_eps;
  j["initializer_range"] = 0.02;
  j["apply_residual_connection_post_layernorm"] = false;
  j["hidden_dropout"] = 0.0;
  j["attention_dropout"] = 0.0;
  j["pretraining_tp"] = 1;
  j["slow_but_exact"] = false;
  j["use_cache"] = true;
  j["tie_word_embeddings"] = true;
  for (const auto& [key, t] :
       {std::pair{"bos_token_id", special.bos}, std::pair{"eos_token_id", special.eos},
        std::pair{"pad_token_id", special.pad}, std::pair{"unk_token_id", special.unk}})
    if (t.id >= 0) j[key] = t.id;
  j["torch_dtype"] = "float32";
  return j;
}

/// config.json of model type M.
template <BloomModel M>
nlohmann::ordered_json hf_config_json(const HfSpecialTokens& special) {
  return hf_config_json(M::config, special);
}

/// generation_config.json: deterministic decoding as `g` decodes (beam search as
/// transformers' with early_stopping false, the library's only mode).
inline nlohmann::ordered_json hf_generation_json(const HfSpecialTokens& special,
                                                 const GenerateOptions& g) {
  nlohmann::ordered_json j;
  for (const auto& [key, t] :
       {std::pair{"bos_token_id", special.bos}, std::pair{"eos_token_id", special.eos},
        std::pair{"pad_token_id", special.pad}})
    if (t.id >= 0) j[key] = t.id;
  j["do_sample"] = false;
  j["num_beams"] = g.num_beams;
  j["repetition_penalty"] = g.repetition_penalty;
  if (g.num_beams > 1) {
    j["length_penalty"] = g.length_penalty;
    j["early_stopping"] = false;
  }
  j["max_new_tokens"] = g.max_new_tokens;
  return j;
}

/// special_tokens_map.json: the special tokens by their roles.
inline nlohmann::ordered_json hf_special_tokens_json(const HfSpecialTokens& special) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [role, t] :
       {std::pair{"bos_token", special.bos}, std::pair{"eos_token", special.eos},
        std::pair{"unk_token", special.unk}, std::pair{"pad_token", special.pad}})
    if (t.id >= 0) j[role] = t.text;
  return j;
}

/// tokenizer_config.json: the generic fast tokenizer over tokenizer.json, padding and
/// truncating on the left (as SeqGPT's inference does), `max_length` tokens.
inline nlohmann::ordered_json hf_tokenizer_config_json(const HfSpecialTokens& special,
                                                       std::int64_t max_length) {
  nlohmann::ordered_json j;
  j["tokenizer_class"] = "PreTrainedTokenizerFast";
  const nlohmann::ordered_json roles = hf_special_tokens_json(special);  // alive through the loop
  for (const auto& [role, text] : roles.items()) j[role] = text;
  j["padding_side"] = "left";
  j["truncation_side"] = "left";
  j["model_max_length"] = max_length;
  j["clean_up_tokenization_spaces"] = false;
  j["add_bos_token"] = false;
  j["add_eos_token"] = false;
  return j;
}

/// What a Hugging Face model directory holds besides the weights: where it goes, the
/// tokenizer file the run used and its special tokens, how the run decodes and its example
/// length limit.
struct HfExport {
  std::filesystem::path dir, tokenizer_file;
  HfSpecialTokens special;
  GenerateOptions decoding;
  std::int64_t max_length = 0;
  /// Files the program adds to the directory: (name, content), e.g. what its prediction needs.
  std::vector<std::pair<std::string, std::string>> extra_files{};
};

/// Writes the model directory e.dir for model `config` from `weights` (a file of that
/// model's weights by Hugging Face names, as Trainer::save_weights writes it, or a training
/// checkpoint, whose AdamW moments are left out) and the tokenizer file the run used.
/// A checkpoint's tensors are copied one by one (they were finite when saved: no save
/// writes a non-finite value).
inline void write_hf_model_dir(const BloomConfig& config, const std::filesystem::path& weights,
                               const HfExport& e) {
  namespace fs = std::filesystem;
  fs::create_directories(e.dir);
  {
    const TensorFile f(weights);
    std::vector<std::string> model;
    for (const auto& n : f.names())
      if (!n.starts_with("optimizer.")) model.push_back(n);
    if (model.size() != f.names().size()) {
      const SafetensorsFile s(weights);
      std::vector<TensorToWrite> tensors;
      for (const auto& n : model) {
        const TensorEntry* t = s.find(n);
        SEQPAR_CHECK(t != nullptr, weights.string(), ": tensor '", n, "' cannot be read");
        tensors.push_back(
            {n, t->dtype, t->shape,
             t->bytes.first(static_cast<std::size_t>(t->numel() * dtype_size(t->dtype)))});
      }
      write_safetensors(e.dir / "model.safetensors", tensors, {{"format", "pt"}});
    } else {
      detail::copy_file_atomic(weights, e.dir / "model.safetensors");
    }
  }
  detail::copy_file_atomic(e.tokenizer_file, e.dir / "tokenizer.json");
  const auto put = [&e](const char* name, const nlohmann::ordered_json& j) {
    detail::write_file_atomic(e.dir / name, j.dump(2) + "\n");
  };
  put("config.json", hf_config_json(config, e.special));
  put("generation_config.json", hf_generation_json(e.special, e.decoding));
  put("tokenizer_config.json", hf_tokenizer_config_json(e.special, e.max_length));
  for (const auto& [name, content] : e.extra_files)
    detail::write_file_atomic(e.dir / name, content);
  put("special_tokens_map.json", hf_special_tokens_json(e.special));
}

/// write_hf_model_dir for model type M, the weights checked against M from their header
/// first (any file a user names: a model or a checkpoint of another run).
template <BloomModel M>
void write_hf_model_dir(const std::filesystem::path& dir, const std::filesystem::path& weights,
                        const std::filesystem::path& tokenizer_file, const HfSpecialTokens& special,
                        const GenerateOptions& decoding, std::int64_t max_length) {
  {
    const TensorFile f(weights);
    check_bloom_weights<M>(
        f.names(), [&f](std::string_view n) { return f.find(n); }, weights.string());
  }
  write_hf_model_dir(M::config, weights, {dir, tokenizer_file, special, decoding, max_length});
}

/// A Hugging Face model directory as a program reads it: its config.json (read), its
/// weights file, and its tokenizer.json when it has one.
struct HfModelDir {
  std::filesystem::path dir, config_file, weights, tokenizer;  // tokenizer: empty when absent
  BloomConfig config;

  /// Finds the files of `dir` and reads config.json; refuses a folder without config.json
  /// or weights, and sharded weights (an index of several files), naming the folder.
  static HfModelDir open(const std::filesystem::path& dir) {
    namespace fs = std::filesystem;
    HfModelDir d;
    d.dir = dir;
    d.config_file = dir / "config.json";
    if (!fs::exists(dir))
      detail::fail_missing(
          dir.string(),
          ": no such folder; expected a Hugging Face model directory (config.json, "
          "the weights and tokenizer.json)");
    SEQPAR_CHECK(fs::is_directory(dir), dir.string(),
                 ": not a folder (a Hugging Face model directory holds config.json, the weights "
                 "and tokenizer.json)");
    if (!fs::exists(d.config_file))
      detail::fail_missing(dir.string(),
                           ": no config.json; expected a Hugging Face model directory");
    d.config = read_bloom_config(d.config_file);
    for (const char* name : {"model.safetensors", "pytorch_model.bin"})
      if (fs::exists(dir / name)) {
        d.weights = dir / name;
        break;
      }
    if (d.weights.empty()) {
      for (const char* index : {"model.safetensors.index.json", "pytorch_model.bin.index.json"})
        SEQPAR_CHECK(!fs::exists(dir / index), dir.string(), ": the weights are sharded (", index,
                     "); seqpar reads one file: save the model with one shard "
                     "(save_pretrained(..., max_shard_size=\"20GB\"))");
      detail::fail(dir.string(), ": no model.safetensors or pytorch_model.bin");
    }
    if (fs::exists(dir / "tokenizer.json")) d.tokenizer = dir / "tokenizer.json";
    return d;
  }

  /// What differs between config.json and model `m`, one "field: file X, model Y" each.
  std::vector<std::string> differences(const BloomConfig& m) const {
    std::vector<std::string> out;
    const auto field = [&](const char* name, std::int64_t file, std::int64_t model) {
      if (file != model)
        out.push_back(std::string(name) + " " + std::to_string(file) + " (the model's " +
                      std::to_string(model) + ")");
    };
    field("vocab_size", config.vocab_size, m.vocab_size);
    field("hidden_size", config.hidden, m.hidden);
    field("n_layer", config.layers, m.layers);
    field("n_head", config.heads, m.heads);
    if (config.layer_norm_eps != m.layer_norm_eps)
      out.push_back("layer_norm_epsilon " + std::to_string(config.layer_norm_eps) +
                    " (the model's " + std::to_string(m.layer_norm_eps) + ")");
    return out;
  }

  /// Throws, naming config.json and every field that differs, when the directory is not of
  /// model `m` (called `name` in the message).
  void check(const BloomConfig& m, std::string_view name) const {
    const auto diff = differences(m);
    if (diff.empty()) return;
    std::string list;
    for (const auto& d : diff) list += (list.empty() ? "" : ", ") + d;
    detail::fail(config_file.string(), ": not the model ", name, ": ", list);
  }
};

}  // namespace seqpar::inline v0

// The model directory a training run leaves for Hugging Face transformers:
//   config.json              BloomConfig of the model type (BloomForCausalLM, tied LM head)
//   generation_config.json   how the run decodes (--num-beams, --repetition-penalty, or the
//                            model's defaults: run.hpp's decoding), so that generate() with
//                            no arguments decodes as seqgpt_ner eval and predict do
//   model.safetensors        the trained weights by their HF names, fp32, the vocabulary's
//                            real rows, the tied lm_head not repeated (Trainer::save_weights)
//   tokenizer.json           the run's tokenizer (BLOOM's byte-level BPE or the example's
//                            character-level one, itself a BPE tokenizer.json)
//   tokenizer_config.json, special_tokens_map.json
// so that AutoModelForCausalLM.from_pretrained(dir) and AutoTokenizer.from_pretrained(dir)
// open it. tools/check_hf_dir.py checks one against seqgpt_ner's own generation.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>

#include "seqpar/config/bloom.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/data/ner_record.hpp"  // detail::write_file_atomic
#include "seqpar/io/bloom_weights.hpp"
#include "seqpar/io/tensor_file.hpp"
#include "seqpar/io/tokenizer.hpp"
#include "seqpar/nn/generate.hpp"

namespace ner {

/// config.json of model type M with the tokenizer's special ids.
template <seqpar::BloomModel M>
nlohmann::ordered_json hf_config_json(const seqpar::Tokenizer& tok) {
  nlohmann::ordered_json j;
  j["architectures"] = {"BloomForCausalLM"};
  j["model_type"] = "bloom";
  // The embedding's rows as the file holds them (the vocabulary M is built for; seqpar's
  // padding of it to a multiple of 128 and of the tensor split is never written).
  j["vocab_size"] = M::vocab_size;
  j["hidden_size"] = M::hidden;
  j["n_layer"] = M::layers;
  j["n_head"] = M::heads;
  j["layer_norm_epsilon"] = M::layer_norm_eps;
  j["initializer_range"] = 0.02;
  j["apply_residual_connection_post_layernorm"] = false;
  j["hidden_dropout"] = 0.0;
  j["attention_dropout"] = 0.0;
  j["pretraining_tp"] = 1;
  j["slow_but_exact"] = false;
  j["use_cache"] = true;
  j["tie_word_embeddings"] = true;
  for (const auto& [key, id] :
       {std::pair{"bos_token_id", tok.bos_id()}, std::pair{"eos_token_id", tok.eos_id()},
        std::pair{"pad_token_id", tok.pad_id()}, std::pair{"unk_token_id", tok.unk_id()}})
    if (id >= 0) j[key] = id;
  j["torch_dtype"] = "float32";
  return j;
}

/// generation_config.json: deterministic decoding with the options `g` the run used (beam
/// search as transformers' with early_stopping false, the library's only mode).
inline nlohmann::ordered_json hf_generation_json(const seqpar::Tokenizer& tok,
                                                 const seqpar::GenerateOptions& g) {
  nlohmann::ordered_json j;
  for (const auto& [key, id] :
       {std::pair{"bos_token_id", tok.bos_id()}, std::pair{"eos_token_id", tok.eos_id()},
        std::pair{"pad_token_id", tok.pad_id()}})
    if (id >= 0) j[key] = id;
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

/// The special tokens by their roles (special_tokens_map.json; tokenizer_config.json too).
inline nlohmann::ordered_json hf_special_tokens(const seqpar::Tokenizer& tok) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [role, id] :
       {std::pair{"bos_token", tok.bos_id()}, std::pair{"eos_token", tok.eos_id()},
        std::pair{"unk_token", tok.unk_id()}, std::pair{"pad_token", tok.pad_id()}})
    if (id >= 0) j[role] = std::string(tok.id_to_token(id));
  return j;
}

/// tokenizer_config.json: the generic fast tokenizer over tokenizer.json, padding and
/// truncating on the left as SeqGPT's inference does.
inline nlohmann::ordered_json hf_tokenizer_config_json(const seqpar::Tokenizer& tok,
                                                       std::int64_t max_length) {
  nlohmann::ordered_json j;
  j["tokenizer_class"] = "PreTrainedTokenizerFast";
  const nlohmann::ordered_json special = hf_special_tokens(tok);  // alive through the loop
  for (const auto& [role, text] : special.items()) j[role] = text;
  j["padding_side"] = "left";
  j["truncation_side"] = "left";
  j["model_max_length"] = max_length;
  j["clean_up_tokenization_spaces"] = false;
  j["add_bos_token"] = false;
  j["add_eos_token"] = false;
  return j;
}

/// Places `from` at `to` (replacing it) without a second copy where the file system
/// allows: a hard link, else a copy; through a temporary, so `to` is whole or absent.
inline void place_file(const std::filesystem::path& from, const std::filesystem::path& to) {
  namespace fs = std::filesystem;
  const fs::path tmp = to.string() + ".tmp";
  std::error_code ec;
  fs::remove(tmp, ec);
  fs::create_hard_link(from, tmp, ec);
  if (ec) fs::copy_file(from, tmp, fs::copy_options::overwrite_existing);
  fs::rename(tmp, to);
}

/// Writes the model directory `dir` for model type M from the weights file `weights`
/// (written by Trainer::save_weights: finite, HF names) and the tokenizer file the run used.
/// `decoding` is how the run decodes; `max_length` is its example length limit.
template <seqpar::BloomModel M>
void write_hf_dir(const std::filesystem::path& dir, const std::filesystem::path& weights,
                  const std::filesystem::path& tokenizer_file,
                  const seqpar::GenerateOptions& decoding, std::int64_t max_length) {
  namespace fs = std::filesystem;
  {
    // The weights are M's and nothing else (the header says so; no tensor is read).
    const seqpar::BloomWeightsFile<M> f(weights);
  }
  const seqpar::Tokenizer tok = seqpar::Tokenizer::from_file(tokenizer_file);
  SEQPAR_CHECK(static_cast<std::int64_t>(tok.vocab_size()) <= M::vocab_size,
               tokenizer_file.string(), " has ", tok.vocab_size(),
               " ids; the model's vocabulary holds ", M::vocab_size);
  fs::create_directories(dir);
  const auto put = [&dir](const char* name, const nlohmann::ordered_json& j) {
    seqpar::detail::write_file_atomic(dir / name, j.dump(2) + "\n");
  };
  place_file(weights, dir / "model.safetensors");
  place_file(tokenizer_file, dir / "tokenizer.json");
  put("config.json", hf_config_json<M>(tok));
  put("generation_config.json", hf_generation_json(tok, decoding));
  put("tokenizer_config.json", hf_tokenizer_config_json(tok, max_length));
  put("special_tokens_map.json", hf_special_tokens(tok));
}

}  // namespace ner

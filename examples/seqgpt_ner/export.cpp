// seqgpt_ner export --checkpoint FILE --to DIR: the transformers model directory of any
// checkpoint (or weights file) a run wrote, also of a run that stopped or crashed. The
// model is the one the file's metadata names (or --model); the tokenizer and decoding are
// the run's (run.json beside the file), or --tokenizer and the decoding flags.
#include <cstdio>
#include <map>
#include <string>

#include "ner_data.hpp"
#include "ner_eval.hpp"
#include "seqpar/io/safetensors.hpp"
#include "train.hpp"

namespace ner {

namespace {

// The compiled model whose shape the file's seqpar metadata records; --model otherwise.
const ModelInfo& checkpoint_model(const Options& o) {
  if (!o.model.empty()) return model_info(o.model);
  const auto ext = o.checkpoint.extension();
  SEQPAR_CHECK(ext == ".safetensors", o.checkpoint.string(),
               ": not a safetensors file seqgpt_ner wrote; pass --model for another weights file");
  const seqpar::SafetensorsFile f(o.checkpoint);
  const auto& meta = f.metadata();
  const auto number = [&](const char* key) -> std::int64_t {
    const auto it = meta.find(key);
    SEQPAR_CHECK(it != meta.end(), o.checkpoint.string(), ": metadata '", key,
                 "' is missing (not a file of a seqgpt_ner run); pass --model");
    return seqpar::detail::parse_field<std::int64_t>(it->second, o.checkpoint.string(), key);
  };
  const seqpar::BloomConfig c{number("seqpar.vocab_size"), number("seqpar.hidden"),
                              number("seqpar.layers"), number("seqpar.heads")};
  return model_of_shape(c, o.checkpoint.string() + "'s metadata");
}

}  // namespace

int export_command(const Options& o) {
  const ModelInfo& model = checkpoint_model(o);
  const auto info = RunInfo::read(o.checkpoint.parent_path());
  const fs::path tokenizer = !o.tokenizer.empty() ? o.tokenizer
                             : info               ? info->tokenizer
                                                  : o.checkpoint.parent_path() / "tokenizer.json";
  SEQPAR_CHECK(fs::exists(tokenizer), tokenizer.string(),
               ": no tokenizer for the model directory; pass --tokenizer");
  const seqpar::Tokenizer tok = load_tokenizer(tokenizer, model.config.vocab_size);
  const std::int64_t max_new = o.max_new_tokens > 0               ? o.max_new_tokens
                               : info && info->max_new_tokens > 0 ? info->max_new_tokens
                                                                  : 128;
  model_services(model.name, "cpu")
      ->write_hf_dir(o.export_to, o.checkpoint, tokenizer, special_tokens(tok),
                     decoding(o, tok, max_new, model.seqgpt), o.max_length);
  std::printf(
      "model directory %s from %s (%s; transformers: "
      "AutoModelForCausalLM.from_pretrained)\n",
      o.export_to.string().c_str(), o.checkpoint.string().c_str(), std::string(model.name).c_str());
  return 0;
}

}  // namespace ner

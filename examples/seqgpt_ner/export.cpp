// seqgpt_ner export --checkpoint FILE --to DIR: the transformers model directory of any
// checkpoint (or weights file) a run wrote, also of a run that stopped or crashed. The
// model is the one the file's metadata names (or --model); the tokenizer and decoding are
// the run's (run.json beside the file), or --tokenizer and the decoding flags.
#include <algorithm>
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

// Refuses a --to inside the checkpoint's run folder (its final weights and files would be
// replaced), and a non-empty one unless --overwrite_output_dir.
void check_export_target(const Options& o) {
  const fs::path to = fs::weakly_canonical(fs::absolute(o.export_to));
  const fs::path run = fs::weakly_canonical(fs::absolute(o.checkpoint).parent_path());
  const auto [r, t] = std::mismatch(run.begin(), run.end(), to.begin(), to.end());
  SEQPAR_CHECK(r != run.end(), "--to ", o.export_to.string(), " is inside the run folder ",
               run.string(), " of ", o.checkpoint.string(),
               ", whose files it would replace; export to a folder outside it");
  std::error_code ec;
  SEQPAR_CHECK(
      o.overwrite_output_dir || !fs::is_directory(o.export_to, ec) || fs::is_empty(o.export_to, ec),
      "--to ", o.export_to.string(),
      " is not empty; its files (config.json, model.safetensors, tokenizer.json ...) "
      "would be replaced: pass --overwrite_output_dir to replace them, or export to a "
      "new folder");
}

}  // namespace

int export_command(const Options& o) {
  check_export_target(o);
  const ModelInfo& model = checkpoint_model(o);
  const auto info = RunInfo::read(o.checkpoint.parent_path());
  const fs::path tokenizer = !o.tokenizer.empty() ? o.tokenizer
                             : info               ? info->tokenizer
                                                  : o.checkpoint.parent_path() / "tokenizer.json";
  SEQPAR_CHECK(fs::exists(tokenizer), tokenizer.string(),
               ": no tokenizer for the model directory; pass --tokenizer");
  check_checkpoint_tokenizer(o.checkpoint, tokenizer);
  const seqpar::Tokenizer tok = load_tokenizer(tokenizer, model.config.vocab_size);
  const std::int64_t max_new = o.max_new_tokens > 0               ? o.max_new_tokens
                               : info && info->max_new_tokens > 0 ? info->max_new_tokens
                                                                  : 128;
  seqpar::HfExport e{o.export_to, tokenizer, special_tokens(tok),
                     decoding(o, tok, max_new, model.seqgpt), o.max_length};
  // What prediction from the directory alone needs: the run's task, labels and decoding.
  if (info) {
    RunInfo kept = *info;
    kept.tokenizer = o.export_to / "tokenizer.json";
    kept.data_dir.clear();
    kept.best = nullptr;
    e.extra_files.emplace_back(model_task_file, kept.text(o.export_to));
  }
  model_services(model.name, "cpu")->write_hf_dir(e, o.checkpoint);
  std::printf(
      "model directory %s from %s (%s; transformers: "
      "AutoModelForCausalLM.from_pretrained)\n",
      o.export_to.string().c_str(), o.checkpoint.string().c_str(), std::string(model.name).c_str());
  return 0;
}

}  // namespace ner

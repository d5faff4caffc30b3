// Command line of seqgpt_ner: the subcommand and its options.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/core/parse.hpp"

#ifndef SEQPAR_NER_DATA_DIR
#define SEQPAR_NER_DATA_DIR "examples/data"
#endif

namespace ner {

/// Everything the program can be told.
struct Options {
  std::string command = "train";  // train | eval | predict
  std::string plan = "dp2";       // see plan_names()
  std::string model;              // tiny | seqgpt560m; empty: resolve_model() decides
  std::filesystem::path data_dir = SEQPAR_NER_DATA_DIR;
  std::filesystem::path out_dir = "seqgpt_ner_out";
  std::filesystem::path weights, tokenizer, input;
  std::vector<std::string> labels, texts;
  std::int64_t epochs = 15;
  std::int64_t max_steps = 0;             // 0: epochs x batches per epoch
  std::int64_t stop_after = 0;            // >0: save a checkpoint and stop after this many steps
  std::int64_t save_every = 0;            // steps between checkpoints; 0: at each epoch's end
  std::int64_t save_total_limit = 2;      // checkpoints OUT/step-N.safetensors kept
  std::int64_t max_nonfinite_steps = 10;  // non-finite steps in a row that stop the run
  std::int64_t batch = 16;                // rows of a global batch
  std::int64_t micro_batch =
      0;  // rows per micro-batch; 0: the whole local batch (pipelines: a quarter)
  double lr = 5e-3;
  double weight_decay = 0.01;
  double warmup_ratio = 0.03;
  double max_grad_norm = 1.0;
  std::uint64_t seed = 42;
  std::int64_t eval_every = 0;  // steps; 0: at the end of each epoch
  std::int64_t eval_limit =
      -1;  // dev records per evaluation, 0: all; -1: 100 while training, all in eval
  std::int64_t eval_rows = 32;      // prompts per generation batch
  std::int64_t max_new_tokens = 0;  // 0: the longest training answer + 16
  std::int64_t num_beams = 0;       // 0: the model's default (docs/ner.md)
  double repetition_penalty = 0;    // 0: the model's default (docs/ner.md)
  std::int64_t max_chars = 512;     // longer texts are skipped when reading
  std::int64_t max_tokens = 512;    // longer examples are skipped
  std::int64_t log_every = 10;
  std::int64_t threads = 0;  // OpenMP threads per rank; 0: cores / ranks (1 for eval, predict)
  bool resume = false;
  bool allow_changed_options = false;  // resume although data or run options differ
  bool overwrite_output_dir = false;   // a fresh run may delete an earlier run's checkpoints
  bool no_eval = false;                // train without evaluating
  bool quiet = false;
};

inline const char* usage() {
  return R"(seqgpt_ner: SeqGPT-style Chinese NER with seqpar (train, evaluate, predict).

  seqgpt_ner [train] [options]     train (default), evaluating on the dev split as it goes
  seqgpt_ner eval [options]        F1 of saved weights on the dev split
  seqgpt_ner predict [options]     answers for --text / --input sentences

Data and model
  --data-dir DIR       train.jsonl|train.json|train.bio and dev.* (default: the bundled corpus)
  --out DIR            outputs: tokenizer.json, step-N.safetensors (checkpoints),
                       model.safetensors, metrics.jsonl, run.json, cache/ (default:
                       seqgpt_ner_out); one training run at a time (a lock file holds its pid)
  --model NAME         tiny | seqgpt560m (default: the trained run's for eval and predict,
                       else seqgpt560m when --weights is given, else tiny)
  --weights FILE       start from these weights (safetensors or pytorch_model.bin, HF names)
  --tokenizer FILE     tokenizer.json (default: a character-level one built from the training text)
  --labels a,b,c       label set in prompt order (default: the training data's labels, sorted)
Parallel plan
  --plan NAME          single dp2 dp4 zero1x2 zero2x2 zero3x2 tp2 pp2 tp2dp2 (default dp2);
                       multi-rank plans run their ranks as threads of this process
  --threads N          OpenMP threads per rank (default: cores / ranks; 1 for eval and predict)
Training
  --epochs N (15)  --max-steps N  --batch ROWS (16)  --micro-batch ROWS  --lr X (5e-3)
  --weight-decay X (0.01)  --warmup-ratio X (0.03)  --max-grad-norm X (1)  --seed N (42)
  --resume             continue from the newest checkpoint OUT/step-N.safetensors
  --allow-changed-options  resume although the data, tokenizer, labels or run options
                       (batch, lr schedule, seed, ...) differ from the checkpoint's
  --overwrite-output-dir  a fresh run in a folder holding an earlier run's checkpoints
                       deletes them (without it the run refuses to start)
  --save-every N       steps between checkpoints (default: each epoch's end)
  --save-total-limit N (2)  checkpoints kept; older ones are removed
  --stop-after N       save a checkpoint and stop after N steps (to try --resume)
  --max-nonfinite-steps N (10)  a step with a non-finite loss or gradient norm makes no
                       update; this many in a row stop the run with an error
  --log-every N (10)   --quiet
Evaluation and generation
  --eval-every N       steps between evaluations (default: each epoch's end)
  --eval-limit N       dev records per evaluation, 0: all (default: 100 for the evaluations
                       during training, all for the last one and for eval)
  --eval-rows N (32)   --max-new-tokens N  --max-chars N (512)  --max-tokens N (512)
  --num-beams N        beam search with N beams, 1: greedy (default: 4 for seqgpt560m,
                       as SeqGPT's authors decode; 1 for tiny)
  --repetition-penalty X  transformers' penalty of tokens already in the sequence, 1: none
                       (default: 2.0 for seqgpt560m, as SeqGPT's authors; 1.0 for tiny)
  --no-eval            train without evaluating
Prediction
  --text "..."         a sentence (repeatable)
  --input FILE         sentences: CLUENER JSON, or plain text one per line
)";
}

/// Parses argv; throws std::invalid_argument naming the bad option.
inline Options parse_options(int argc, char** argv) {
  Options o;
  int i = 1;
  if (i < argc && std::string_view(argv[i]).substr(0, 2) != "--") o.command = argv[i++];
  if (o.command != "train" && o.command != "eval" && o.command != "predict")
    throw std::invalid_argument("unknown command '" + o.command +
                                "'; expected train, eval or predict");
  const auto split = [](const std::string& s) {
    std::vector<std::string> out;
    std::size_t b = 0;
    while (b <= s.size()) {
      const std::size_t e = std::min(s.find(',', b), s.size());
      if (e > b) out.push_back(s.substr(b, e - b));
      b = e + 1;
    }
    return out;
  };
  for (; i < argc; ++i) {
    const std::string name = argv[i];
    if (name == "--help" || name == "-h") throw std::invalid_argument("");
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(name + " needs a value");
      return argv[++i];
    };
    // Plain decimal only: no hexadecimal, inf or nan, nothing out of range (an integer
    // that overflows is an error, not a clamp).
    const auto integer = [&]() -> std::int64_t {
      const std::string v = value();
      const auto n = seqpar::detail::parse_number<std::int64_t>(v);
      if (!n || *n < 0)
        throw std::invalid_argument(name + " expects a non-negative decimal integer (at most " +
                                    std::to_string(INT64_MAX) + "), got '" + v + "'");
      return *n;
    };
    const auto unsigned_integer = [&]() -> std::uint64_t {
      const std::string v = value();
      const auto n = seqpar::detail::parse_number<std::uint64_t>(v);
      if (!n)
        throw std::invalid_argument(name + " expects a non-negative decimal integer (at most " +
                                    std::to_string(UINT64_MAX) + "), got '" + v + "'");
      return *n;
    };
    const auto real = [&]() -> double {
      const std::string v = value();
      const auto x = seqpar::detail::parse_number<double>(v);
      if (!x || *x < 0)
        throw std::invalid_argument(name + " expects a finite non-negative decimal number, got '" +
                                    v + "'");
      return *x;
    };
    if (name == "--plan")
      o.plan = value();
    else if (name == "--model")
      o.model = value();
    else if (name == "--data-dir")
      o.data_dir = value();
    else if (name == "--out")
      o.out_dir = value();
    else if (name == "--weights")
      o.weights = value();
    else if (name == "--tokenizer")
      o.tokenizer = value();
    else if (name == "--input")
      o.input = value();
    else if (name == "--labels")
      o.labels = split(value());
    else if (name == "--text")
      o.texts.push_back(value());
    else if (name == "--epochs")
      o.epochs = integer();
    else if (name == "--max-steps")
      o.max_steps = integer();
    else if (name == "--stop-after")
      o.stop_after = integer();
    else if (name == "--batch")
      o.batch = integer();
    else if (name == "--micro-batch")
      o.micro_batch = integer();
    else if (name == "--lr")
      o.lr = real();
    else if (name == "--weight-decay")
      o.weight_decay = real();
    else if (name == "--warmup-ratio")
      o.warmup_ratio = real();
    else if (name == "--max-grad-norm")
      o.max_grad_norm = real();
    else if (name == "--seed")
      o.seed = unsigned_integer();
    else if (name == "--eval-every")
      o.eval_every = integer();
    else if (name == "--eval-limit")
      o.eval_limit = integer();
    else if (name == "--eval-rows")
      o.eval_rows = integer();
    else if (name == "--max-new-tokens")
      o.max_new_tokens = integer();
    else if (name == "--num-beams")
      o.num_beams = integer();
    else if (name == "--repetition-penalty")
      o.repetition_penalty = real();
    else if (name == "--max-chars")
      o.max_chars = integer();
    else if (name == "--max-tokens")
      o.max_tokens = integer();
    else if (name == "--log-every")
      o.log_every = integer();
    else if (name == "--threads")
      o.threads = integer();
    else if (name == "--save-every")
      o.save_every = integer();
    else if (name == "--save-total-limit")
      o.save_total_limit = integer();
    else if (name == "--max-nonfinite-steps")
      o.max_nonfinite_steps = integer();
    else if (name == "--resume")
      o.resume = true;
    else if (name == "--allow-changed-options")
      o.allow_changed_options = true;
    else if (name == "--overwrite-output-dir")
      o.overwrite_output_dir = true;
    else if (name == "--no-eval")
      o.no_eval = true;
    else if (name == "--quiet")
      o.quiet = true;
    else
      throw std::invalid_argument("unknown option '" + name + "'");
  }
  if (o.batch == 0) throw std::invalid_argument("--batch must be positive");
  if (o.eval_rows == 0) throw std::invalid_argument("--eval-rows must be positive");
  if (o.num_beams > 64) throw std::invalid_argument("--num-beams is at most 64");
  if (o.save_total_limit == 0)
    throw std::invalid_argument("--save-total-limit must be positive (the checkpoints kept)");
  if (o.threads > 4096)  // an int downstream: refused rather than wrapped
    throw std::invalid_argument("--threads is " + std::to_string(o.threads) +
                                "; expected at most 4096");
  if (o.max_nonfinite_steps == 0)
    throw std::invalid_argument("--max-nonfinite-steps must be positive");
  if (o.log_every == 0) o.log_every = 1;
  if (!o.model.empty() && o.model != "tiny" && o.model != "seqgpt560m")
    throw std::invalid_argument("--model is '" + o.model + "'; expected tiny or seqgpt560m");
  return o;
}

}  // namespace ner

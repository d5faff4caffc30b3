// Command line of seqgpt_ner: the subcommand and its options.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/config/memory_modes.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/train/precision.hpp"

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
  std::int64_t save_every = 0;            // --save-steps: between checkpoints; 0: each epoch's end
  std::int64_t save_total_limit = 2;      // checkpoints OUT/step-N.safetensors kept
  std::int64_t max_nonfinite_steps = 10;  // non-finite steps in a row that stop the run
  std::string offload = "none";           // none | optimizer | optimizer+params (ZeRO-3)
  std::int64_t batch = 16;                // rows of a global batch
  std::int64_t micro_batch =
      0;  // rows per micro-batch; 0: the whole local batch (pipelines: a quarter)
  double lr = 5e-3;
  double weight_decay = 0.01;
  double warmup_ratio = 0.03;
  double max_grad_norm = 1.0;
  seqpar::Recompute recompute = seqpar::Recompute::none;  // what blocks keep for the backward
  std::int64_t recompute_every = 1;                       // under full: every K-th block
  std::uint64_t seed = 42;
  std::int64_t eval_every = 0;  // --eval-steps; 0: at the end of each epoch
  std::int64_t eval_limit =
      -1;  // dev records per evaluation, 0: all; -1: 100 while training, all in eval
  std::int64_t eval_rows = 32;      // prompts per generation batch
  std::int64_t max_new_tokens = 0;  // 0: the longest training answer + 16
  std::int64_t num_beams = 0;       // 0: the model's default (docs/ner.md)
  double repetition_penalty = 0;    // 0: the model's default (docs/ner.md)
  std::int64_t max_chars = 512;     // longer texts are skipped when reading
  std::int64_t max_tokens = 512;    // --max-length: longer examples are cut (or skipped)
  std::int64_t log_every = 10;
  std::int64_t threads = 0;  // OpenMP threads per rank; 0: cores / ranks (1 for eval, predict)
  bool resume = false;
  bool allow_changed_options = false;  // resume although data or run options differ
  bool overwrite_output_dir = false;   // a fresh run may delete an earlier run's checkpoints
  bool no_eval = false;                // train without evaluating
  bool quiet = false;
  // Everyday training controls under Hugging Face's names (train_controls.hpp) and what
  // --deepspeed ds_config.json sets (deepspeed_config.hpp, docs/deepspeed.md).
  std::int64_t gradient_accumulation_steps = 0;  // micro-batches per step; 0: from --micro-batch
  std::string truncation = "left";  // an example over --max-length: left (cut the prompt) | skip
  std::filesystem::path export_hf;  // the model directory written at the end; empty: OUT/hf
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_epsilon = 1e-8;
  std::string lr_scheduler_type = "linear";  // linear | cosine | constant_with_warmup
  std::string warmup_type = "linear";        // linear | log (DeepSpeed WarmupLR's default)
  double warmup_min_lr = 0;                  // where warmup starts and decay ends
  std::int64_t warmup_steps = -1;            // -1: --warmup-ratio x the run's steps
  std::int64_t lr_decay_steps = 0;           // the step the decay ends at; 0: the run's last
  std::filesystem::path deepspeed;           // a DeepSpeed configuration to apply
  std::string precision = "fp32";            // fp32 | bf16 | fp16
  std::string device = "cpu";                // cpu | cuda (device.hpp: what a build can run)
  seqpar::LossScaleOptions loss_scale;       // fp16's (DeepSpeed's fp16 block; its defaults)
  std::set<std::string> given;               // the options given on the command line, by flag
};

inline const char* usage() {
  return R"(seqgpt_ner: SeqGPT-style Chinese NER with seqpar (train, evaluate, predict).

  seqgpt_ner [train] [options]     train (default), evaluating on the dev split as it goes
  seqgpt_ner eval [options]        F1 of saved weights on the dev split
  seqgpt_ner predict [options]     answers for --text / --input sentences

Data and model
  --data-dir DIR       train.jsonl|train.json|train.bio and dev.* (default: the bundled corpus)
  --out DIR            outputs: tokenizer.json, step-N.safetensors (checkpoints),
                       model.safetensors, hf/ (a model directory transformers opens),
                       metrics.jsonl, run.json, cache/ (default: seqgpt_ner_out); one
                       training run at a time (a lock file holds its pid)
  --export-hf DIR      write the trained model directory there instead of OUT/hf
  --model NAME         tiny | seqgpt560m (default: the trained run's for eval and predict,
                       else seqgpt560m when --weights is given, else tiny)
  --weights FILE       start from these weights (safetensors or pytorch_model.bin, HF names)
  --tokenizer FILE     tokenizer.json (default: a character-level one built from the training text)
  --labels a,b,c       label set in prompt order (default: the training data's labels, sorted)
Parallel plan
  --plan NAME          single dp2 dp4 zero1x2 zero2x2 zero3x2 zero3x4 tp2 tp2dp2 tp2zero3x2
                       pp2 pp2dp2 (default dp2); the ranks run as threads of this process,
                       or one per process under mpirun -np N or srun -n N (N: the plan's)
  --threads N          OpenMP threads per rank (default: cores / ranks; 1 for eval and predict)
  --offload WHAT       none | optimizer | optimizer+params (zero3x2): state kept in host memory
Device and precision
  --device cpu|cuda    where the ranks train (default cpu); cuda needs a build with CUDA and
                       offers single dp2 dp4 zero3x2 zero3x4 tp2: under mpirun one process per
                       GPU (NCCL), without it the plan's ranks as threads sharing one GPU
  --precision fp32|bf16|fp16  (default fp32; bf16 and fp16 need --device cuda) weights,
                       activations and gradients in 16 bits with fp32 master weights; fp16
                       scales the loss dynamically (DeepSpeed's fp16 block sets the scaler)
  --loss-scale X (0)   fp16's scaler, as DeepSpeed's fp16 block: 0 dynamic, else a static scale
  --initial-scale-power N (16)  the dynamic scale starts at 2^N
  --loss-scale-window N (1000)  clean steps before the scale doubles
  --hysteresis N (2)   overflows before the scale halves  --consecutive-hysteresis  refill it
                       on every clean step  --min-loss-scale X (1)  the floor
Training
  --epochs N (15)  --max-steps N  --batch ROWS (16)  --micro-batch ROWS  --lr X (5e-3)
  --weight-decay X (0.01)  --warmup-ratio X (0.03)  --max-grad-norm X (1)  --seed N (42)
  --recompute none|selective|full (none)  what a block keeps for its backward: all,
                       all but the attention probabilities, or only its input (its forward
                       runs again in the backward); the same results in less memory
  --recompute-every K (1)  with full: only every K-th block is recomputed
  --gradient-accumulation-steps N  micro-batches per optimizer step: the global batch
                       --batch = micro-batch rows x N x data-parallel ranks (as Hugging Face)
  --warmup-steps N     (default: --warmup-ratio of the steps)  --lr-scheduler-type linear |
                       cosine | constant_with_warmup (linear)
  --adam-beta1 X (0.9)  --adam-beta2 X (0.999)  --adam-epsilon X (1e-8)
  --deepspeed FILE     a DeepSpeed configuration (ds_config.json): ZeRO stage and offload
                       (the plan), precision, loss scaling, clipping, AdamW, WarmupLR /
                       WarmupDecayLR, batch sizes; "auto" takes these options' values; every
                       key not honoured is named (docs/deepspeed.md)
  --resume             continue from the newest checkpoint OUT/step-N.safetensors
  --allow-changed-options  resume although the data, tokenizer, labels or run options
                       (batch, lr schedule, seed, ...) differ from the checkpoint's
  --overwrite-output-dir  a fresh run in a folder holding an earlier run's checkpoints
                       deletes them (without it the run refuses to start)
  --save-steps N       steps between checkpoints (default: each epoch's end; alias
                       --save-every)
  --save-total-limit N (2)  checkpoints kept; older ones are removed
  --stop-after N       save a checkpoint and stop after N steps (to try --resume)
  --max-nonfinite-steps N (10)  a step with a non-finite loss or gradient norm makes no
                       update; this many in a row stop the run with an error
  --log-every N (10)   --quiet
Evaluation and generation
  --eval-steps N       steps between evaluations (default: each epoch's end; alias
                       --eval-every)
  --eval-limit N       dev records per evaluation, 0: all (default: 100 for the evaluations
                       during training, all for the last one and for eval)
  --eval-rows N (32)   --max-new-tokens N  --max-chars N (512)
  --max-length N (512) tokens of an example (prompt, answer, eos); a longer one has its
                       prompt cut on the left, as SeqGPT's inference truncates (alias
                       --max-tokens); one whose answer alone does not fit is skipped
  --truncation left|skip (left)  skip: examples over --max-length are skipped instead
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

/// The one name of a flag that has an alias (--save-every is --save-steps), so that
/// Options::given names each option once.
inline std::string canonical_flag(const std::string& name) {
  if (name == "--save-every") return "--save-steps";
  if (name == "--eval-every") return "--eval-steps";
  if (name == "--max-tokens") return "--max-length";
  return name;
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
    o.given.insert(canonical_flag(name));
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
    else if (name == "--recompute")
      o.recompute = seqpar::parse_recompute(value(), "--recompute");
    else if (name == "--recompute-every")
      o.recompute_every = integer();
    else if (name == "--eval-steps" || name == "--eval-every")
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
    else if (name == "--max-length" || name == "--max-tokens")
      o.max_tokens = integer();
    else if (name == "--log-every")
      o.log_every = integer();
    else if (name == "--threads")
      o.threads = integer();
    else if (name == "--save-steps" || name == "--save-every")
      o.save_every = integer();
    else if (name == "--save-total-limit")
      o.save_total_limit = integer();
    else if (name == "--max-nonfinite-steps")
      o.max_nonfinite_steps = integer();
    else if (name == "--offload")
      o.offload = value();
    else if (name == "--gradient-accumulation-steps")
      o.gradient_accumulation_steps = integer();
    else if (name == "--truncation")
      o.truncation = value();
    else if (name == "--export-hf")
      o.export_hf = value();
    else if (name == "--adam-beta1")
      o.adam_beta1 = real();
    else if (name == "--adam-beta2")
      o.adam_beta2 = real();
    else if (name == "--adam-epsilon")
      o.adam_epsilon = real();
    else if (name == "--lr-scheduler-type")
      o.lr_scheduler_type = value();
    else if (name == "--warmup-steps")
      o.warmup_steps = integer();
    else if (name == "--deepspeed")
      o.deepspeed = value();
    else if (name == "--device")
      o.device = value();
    else if (name == "--precision")
      o.precision = value();
    else if (name == "--loss-scale")
      o.loss_scale.loss_scale = real();
    else if (name == "--initial-scale-power")
      o.loss_scale.initial_scale_power = integer();
    else if (name == "--loss-scale-window")
      o.loss_scale.loss_scale_window = integer();
    else if (name == "--hysteresis")
      o.loss_scale.hysteresis = integer();
    else if (name == "--consecutive-hysteresis")
      o.loss_scale.consecutive_hysteresis = true;
    else if (name == "--min-loss-scale")
      o.loss_scale.min_loss_scale = real();
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
  if (o.recompute_every == 0)
    throw std::invalid_argument("--recompute-every must be positive (every K-th block)");
  if (o.log_every == 0) o.log_every = 1;
  if (o.loss_scale.initial_scale_power > 1000)
    throw std::invalid_argument("--initial-scale-power is at most 1000 (a double's exponent)");
  if (o.loss_scale.loss_scale_window == 0)
    throw std::invalid_argument("--loss-scale-window must be positive (clean steps)");
  if (o.loss_scale.hysteresis == 0)
    throw std::invalid_argument("--hysteresis must be positive (1: the first overflow halves)");
  if (o.loss_scale.min_loss_scale == 0)
    throw std::invalid_argument("--min-loss-scale must be above 0");
  if (o.truncation != "left" && o.truncation != "skip")
    throw std::invalid_argument("--truncation is '" + o.truncation + "'; expected left or skip");
  if (o.lr_scheduler_type != "linear" && o.lr_scheduler_type != "cosine" &&
      o.lr_scheduler_type != "constant_with_warmup")
    throw std::invalid_argument("--lr-scheduler-type is '" + o.lr_scheduler_type +
                                "'; expected linear, cosine or constant_with_warmup");
  if (o.adam_beta1 >= 1 || o.adam_beta2 >= 1)
    throw std::invalid_argument("--adam-beta1 and --adam-beta2 must be below 1");
  if (o.device != "cpu" && o.device != "cuda")
    throw std::invalid_argument("--device is '" + o.device + "'; expected cpu or cuda");
  if (o.precision != "fp32" && o.precision != "bf16" && o.precision != "fp16")
    throw std::invalid_argument("--precision is '" + o.precision +
                                "'; expected fp32, bf16 or fp16");
  if (!o.model.empty() && o.model != "tiny" && o.model != "seqgpt560m")
    throw std::invalid_argument("--model is '" + o.model + "'; expected tiny or seqgpt560m");
  return o;
}

}  // namespace ner

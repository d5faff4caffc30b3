// What every evaluation reports (the task's score as its task words it), printed and logged;
// the decoding eval and predict use. `eval` and `predict` of every task are task_eval.cpp's.
// Both run on one rank, from weights loaded into a whole model (ModelServices::load).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "models.hpp"
#include "ner_data.hpp"
#include "options.hpp"
#include "seqpar/data/any_task.hpp"
#include "seqpar/nn/generate.hpp"

namespace ner {

/// What an evaluation found.
struct EvalResult {
  std::int64_t records = 0, prompts = 0, bad_lines = 0;
  double seconds = 0;
  std::vector<std::string> samples;  // "text -> answer" of the first records
  seqpar::AnyEvaluation task;        // the predictions (what eval writes) and the score
};

/// How eval, predict and the evaluations during training decode: --num_beams and
/// --repetition_penalty, else SeqGPT's own decoding (4 beams, penalty 2.0) for SeqGPT-560M
/// and greedy without a penalty for the tiny model (docs/ner.md has the figures behind it).
seqpar::GenerateOptions decoding(const Options& o, const seqpar::Tokenizer& tok,
                                 std::int64_t max_new, bool seqgpt);

/// The "eval" event of metrics.jsonl.
nlohmann::json eval_json(const EvalResult& r, std::int64_t step, const std::string& split);

/// The metrics an evaluation gives by name (the score's numbers: "f1", "accuracy", ...; and
/// "loss" where finite): what --metric_for_best_model names.
std::map<std::string, double> eval_metrics(const seqpar::AnyEvaluation& e, double loss);

/// The score's line; with `details`, per label and a few samples.
void print_eval(const EvalResult& r, const std::string& what, bool details);

}  // namespace ner

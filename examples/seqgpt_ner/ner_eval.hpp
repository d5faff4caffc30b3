// The NER side of evaluation and prediction: SeqGPT's answers generated for the dev prompts,
// read back and scored as entity F1 (during training and by `eval`), and `predict`'s answers
// and entities as JSON lines. Both run on one rank, from weights loaded into a whole model
// (ModelServices::load).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "models.hpp"
#include "ner_data.hpp"
#include "options.hpp"
#include "seqpar/data/metrics.hpp"
#include "seqpar/nn/generate.hpp"

namespace ner {

/// What an evaluation found.
struct EvalResult {
  seqpar::NerScore score;
  std::int64_t records = 0, prompts = 0, generated_tokens = 0, bad_lines = 0;
  double seconds = 0;
  std::vector<std::string> samples;  // "text -> answer" of the first records
};

/// How eval, predict and the evaluations during training decode: --num_beams and
/// --repetition_penalty, else SeqGPT's own decoding (4 beams, penalty 2.0) for SeqGPT-560M
/// and greedy without a penalty for the tiny model (docs/ner.md has the figures behind it).
seqpar::GenerateOptions decoding(const Options& o, const seqpar::Tokenizer& tok,
                                 std::int64_t max_new, bool seqgpt);

/// Generates the answer of every prompt of `ex` (of its first `limit` records; 0: all), reads
/// it back and scores it against the records' mentions.
EvalResult evaluate_ner(const GenerateFn& generate, const seqpar::Tokenizer& tok,
                        const seqpar::NerDataset& dev, const seqpar::ExampleSet& ex,
                        const std::vector<std::string>& labels, std::int64_t limit,
                        std::int64_t rows, const seqpar::GenerateOptions& go);

/// The "eval" event of metrics.jsonl.
nlohmann::json eval_json(const EvalResult& r, std::int64_t step, const std::string& split);

/// One line of F1, precision and recall; with `details`, per label and a few samples.
void print_eval(const EvalResult& r, const std::string& what, bool details);

/// `seqgpt_ner eval`: dev F1 of the run's weights on the data it was trained on.
int eval_command(const Options& o);

/// `seqgpt_ner predict`: answers and entities of --text / --input, a JSON line each.
int predict_command(const Options& o);

}  // namespace ner

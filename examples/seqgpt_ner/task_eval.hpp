// Evaluation and prediction of the run's task (docs/tasks.md), through seqpar::AnyTask: its
// predict asks the model every prompt of a record and reads the answers back with character
// offsets; its score counts garbled answers. Evaluation during training, eval and predict.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "models.hpp"
#include "ner_eval.hpp"
#include "options.hpp"
#include "seqpar/data/any_task.hpp"
#include "seqpar/io/tokenizer.hpp"

namespace ner {

/// The model as a task's AnswerFn: prompts encoded with `tok`, cut on the left to
/// --max_length (--truncation left), generated --eval_rows at a time.
seqpar::AnswerFn answers(const GenerateFn& generate, const seqpar::Tokenizer& tok, const Options& o,
                         const seqpar::GenerateOptions& go);

/// The first `limit` records of `dev` (0: all; annotated, the task's) predicted and scored,
/// with a few samples and the seconds taken.
EvalResult evaluate_dev(const GenerateFn& generate, const seqpar::Tokenizer& tok,
                        const seqpar::AnyTask& task, const seqpar::AnyRecords& dev,
                        std::int64_t limit, const Options& o, const seqpar::GenerateOptions& go);

/// `seqgpt_ner eval`: the scores of the run's weights on the dev split of the data it was
/// trained on, in its task; the predictions in OUT/dev.predictions.jsonl, the scores in
/// OUT/dev.scores.json. Returns {"metrics": eval_metrics' numbers, "scores": the scores}.
nlohmann::json eval_command(const Options& o);

/// `seqgpt_ner predict`: the run's task on --text / --input, a prediction (JSON line) each,
/// returned and, with `print`, printed; --submission: CLUENER's submission file of them (NER).
std::vector<std::string> predict_command(const Options& o, bool print = true);

}  // namespace ner

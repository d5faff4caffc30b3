// Evaluation and prediction of any of the three tasks (docs/tasks.md): the library's predict
// asks the model every prompt of a record (NER's label chunks; classification's 分类 prompt;
// the relations' two steps) and reads the answers back with character offsets;
// score_predictions scores them, garbled answers counted. NER's evaluation during training
// stays ner_eval.cpp's (its examples cached); eval and predict of every task come here.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "models.hpp"
#include "ner_eval.hpp"
#include "options.hpp"
#include "seqpar/data/tasks.hpp"
#include "seqpar/io/tokenizer.hpp"

namespace ner {

/// The predictions of `records` for `spec`'s task: their prompts encoded with `tok`, cut on
/// the left to --max_length (--truncation left), generated --eval_rows at a time.
std::vector<seqpar::Prediction> predict_records(const GenerateFn& generate,
                                                const seqpar::Tokenizer& tok,
                                                const seqpar::TaskSpec& spec,
                                                std::span<const seqpar::TextRecord> records,
                                                const Options& o,
                                                const seqpar::GenerateOptions& go);

/// `records` (annotated) predicted and scored: the result's `task` (the scores) and
/// `predictions` set, with its counts, a few samples and the seconds taken.
EvalResult evaluate_records(const GenerateFn& generate, const seqpar::Tokenizer& tok,
                            const seqpar::TaskSpec& spec,
                            std::span<const seqpar::TextRecord> records, const Options& o,
                            const seqpar::GenerateOptions& go);

/// The first `limit` dev records (0: all) predicted and scored: NER's through its cached
/// examples (evaluate_ner), the other tasks' through evaluate_records.
EvalResult evaluate_dev(const GenerateFn& generate, const seqpar::Tokenizer& tok,
                        const seqpar::TaskSpec& spec, const seqpar::NerDataset& dev,
                        const seqpar::ExampleSet& ex, std::int64_t limit, const Options& o,
                        const seqpar::GenerateOptions& go);

/// `seqgpt_ner eval`: the scores of the run's weights on the dev split of the data it was
/// trained on, in its task; the predictions in OUT/dev.predictions.jsonl, the scores in
/// OUT/dev.scores.json.
int eval_command(const Options& o);

/// `seqgpt_ner predict`: the run's task on --text / --input, a prediction (JSON line) each;
/// --submission: CLUENER's submission file of them (NER).
int predict_command(const Options& o);

}  // namespace ner

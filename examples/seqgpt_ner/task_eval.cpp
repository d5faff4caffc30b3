// Evaluation and prediction of any of the three tasks (task_eval.hpp).
#include "task_eval.hpp"

#include <algorithm>
#include <chrono>

namespace ner {

std::vector<seqpar::Prediction> predict_records(const GenerateFn& generate,
                                                const seqpar::Tokenizer& tok,
                                                const seqpar::TaskSpec& spec,
                                                std::span<const seqpar::TextRecord> records,
                                                const Options& o,
                                                const seqpar::GenerateOptions& go) {
  const std::int64_t cut = o.truncation == "left" ? o.max_length : 0;
  const seqpar::AnswerFn answer = seqpar::batched_answers(
      tok, [&](const seqpar::Batch& b) { return generate(b.view(), go).tokens; }, o.eval_rows, cut);
  return seqpar::predict(spec, records, answer);
}

EvalResult evaluate_dev(const GenerateFn& generate, const seqpar::Tokenizer& tok,
                        const seqpar::TaskSpec& spec, const seqpar::NerDataset& dev,
                        const seqpar::ExampleSet& ex, std::int64_t limit, const Options& o,
                        const seqpar::GenerateOptions& go) {
  if (spec.task == seqpar::NluTask::ner)
    return evaluate_ner(generate, tok, dev, ex, spec.labels, limit, o.eval_rows, go);
  const auto t0 = std::chrono::steady_clock::now();
  const std::size_t n = limit > 0 ? std::min(dev.records.size(), static_cast<std::size_t>(limit))
                                  : dev.records.size();
  const std::span<const seqpar::TextRecord> records(dev.records.data(), n);
  EvalResult r;
  r.predictions = predict_records(generate, tok, spec, records, o, go);
  r.task = seqpar::score_predictions(spec, records, r.predictions);
  r.records = r.task->records;
  r.prompts = r.task->prompts;
  r.bad_lines = r.task->errors.total();
  for (std::size_t i = 0; i < std::min<std::size_t>(3, n); ++i) {
    std::string a;
    for (const auto& s : r.predictions[i].answers) a += (a.empty() ? "" : " | ") + s;
    std::replace(a.begin(), a.end(), '\n', ';');
    r.samples.push_back(records[i].text + "  ->  " + a);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace ner

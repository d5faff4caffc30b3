// Evaluation and prediction of any of the three tasks (task_eval.hpp).
#include "task_eval.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "devices.hpp"
#include "seqpar/data/json_records.hpp"
#include "seqpar/data/predictions.hpp"
#include "seqpar/train/metrics_log.hpp"
#include "seqpar/train/run_folder.hpp"

namespace ner {

using Clock = std::chrono::steady_clock;

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

EvalResult evaluate_records(const GenerateFn& generate, const seqpar::Tokenizer& tok,
                            const seqpar::TaskSpec& spec,
                            std::span<const seqpar::TextRecord> records, const Options& o,
                            const seqpar::GenerateOptions& go) {
  const auto t0 = std::chrono::steady_clock::now();
  EvalResult r;
  r.predictions = predict_records(generate, tok, spec, records, o, go);
  r.task = seqpar::score_predictions(spec, records, r.predictions);
  r.records = r.task->records;
  r.prompts = r.task->prompts;
  r.bad_lines = r.task->errors.total();
  for (std::size_t i = 0; i < std::min<std::size_t>(3, records.size()); ++i) {
    std::string a;
    for (const auto& s : r.predictions[i].answers) a += (a.empty() ? "" : " | ") + s;
    std::replace(a.begin(), a.end(), '\n', ';');
    r.samples.push_back(records[i].text + "  ->  " + a);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

EvalResult evaluate_dev(const GenerateFn& generate, const seqpar::Tokenizer& tok,
                        const seqpar::TaskSpec& spec, const seqpar::NerDataset& dev,
                        const seqpar::ExampleSet& ex, std::int64_t limit, const Options& o,
                        const seqpar::GenerateOptions& go) {
  if (spec.task == seqpar::NluTask::ner)
    return evaluate_ner(generate, tok, dev, ex, spec.labels, limit, o.eval_rows, go);
  const std::size_t n = limit > 0 ? std::min(dev.records.size(), static_cast<std::size_t>(limit))
                                  : dev.records.size();
  return evaluate_records(generate, tok, spec, std::span(dev.records.data(), n), o, go);
}

namespace {

/// The weights, tokenizer, labels and data eval and predict use: the options', else the
/// run's (OUT/run.json).
struct Trained {
  fs::path weights, tokenizer, data_dir;
  std::vector<std::string> labels;
  std::int64_t max_new_tokens = 0;
  std::string model;
  std::string task = "ner";  // the run's (run.json), else --task
};

Trained trained(const Options& o) {
  const auto info = RunInfo::read(o.out_dir);
  Trained t;
  t.model = !o.model.empty() ? o.model : info && !info->model.empty() ? info->model : "tiny";
  t.weights = !o.weights.empty() ? o.weights : o.out_dir / "model.safetensors";
  if (!o.weights.empty() && fs::is_directory(o.weights))
    t.weights = seqpar::HfModelDir::open(o.weights).weights;
  if (o.weights.empty() && !fs::exists(t.weights))
    if (const auto newest = seqpar::CheckpointDir{o.out_dir}.newest_complete()) t.weights = *newest;
  SEQPAR_CHECK(fs::exists(t.weights), t.weights.string(),
               ": no weights; train into --output_dir first, or pass --weights");
  t.tokenizer = !o.tokenizer.empty() ? o.tokenizer
                : info               ? info->tokenizer
                                     : o.out_dir / "tokenizer.json";
  t.labels = !o.labels.empty() ? o.labels : info ? info->labels : std::vector<std::string>{};
  SEQPAR_CHECK(!t.labels.empty(),
               "no label set: pass --labels a,b,c (or train into --output_dir first)");
  t.max_new_tokens = o.max_new_tokens > 0               ? o.max_new_tokens
                     : info && info->max_new_tokens > 0 ? info->max_new_tokens
                                                        : 128;
  t.data_dir = !o.data_dir.empty() ? o.data_dir : info ? info->data_dir : fs::path();
  t.task = info ? info->task : !o.task.empty() ? o.task : "ner";
  SEQPAR_CHECK(o.task.empty() || o.task == t.task, "--task ", o.task, ": ", o.out_dir.string(),
               "/run.json says the run was trained for ", t.task);
  return t;
}

}  // namespace

int eval_command(const Options& o) {
  const Trained tr = trained(o);
  // Never the bundled corpus silently: the data named, or the data the run was trained on.
  SEQPAR_CHECK(!tr.data_dir.empty(), o.out_dir.string(),
               ": no run.json names the data this run was trained on; pass --data_dir");
  const ModelInfo& info = model_info(tr.model);
  auto services = model_services(tr.model, o.device);
  const seqpar::Tokenizer tok = load_tokenizer(tr.tokenizer, info.config.vocab_size);
  const fs::path dev_file = find_split(tr.data_dir, "dev");
  const seqpar::TaskSpec spec = run_spec(tr.task, tr.labels, tr.data_dir, o.max_chars);
  seqpar::ReadOptions ro;
  ro.labels = tr.labels;
  ro.max_chars = o.max_chars;
  std::printf("data %s (%s)\n", tr.data_dir.string().c_str(), tr.task.c_str());
  const seqpar::NerDataset dev = spec.task == seqpar::NluTask::ner
                                     ? read_split(dev_file, ro)
                                     : seqpar::read_records(dev_file, spec.task, ro);
  std::printf("  %s\n", dev.report.summary().c_str());
  fs::create_directories(o.out_dir);
  set_threads(o.threads > 0 ? static_cast<int>(o.threads) : 1);
  const GenerateFn generate = services->load(tr.weights);
  std::printf("weights %s\n", tr.weights.string().c_str());
  const std::int64_t limit = std::max<std::int64_t>(o.eval_limit, 0);
  const std::size_t n = limit > 0 ? std::min(dev.records.size(), static_cast<std::size_t>(limit))
                                  : dev.records.size();
  const std::span<const seqpar::TextRecord> records(dev.records.data(), n);
  EvalResult r = evaluate_records(generate, tok, spec, records, o,
                                  decoding(o, tok, tr.max_new_tokens, info.seqgpt));
  const seqpar::TaskScore score = *r.task;
  if (spec.task == seqpar::NluTask::ner) {  // printed and logged as before
    r.score = score.ner;
    r.task.reset();
  }
  print_eval(r, "dev", true);
  if (spec.task == seqpar::NluTask::ner)
    std::printf("garbled answers %s\n", score.errors.summary().c_str());
  seqpar::MetricsLog(o.out_dir / "metrics.jsonl").append(eval_json(r, 0, "dev"));
  seqpar::write_predictions(o.out_dir / "dev.predictions.jsonl", spec, r.predictions);
  seqpar::detail::write_file_atomic(o.out_dir / "dev.scores.json",
                                    seqpar::score_json(score) + "\n");
  std::printf("predictions %s, scores %s\n", (o.out_dir / "dev.predictions.jsonl").string().c_str(),
              (o.out_dir / "dev.scores.json").string().c_str());
  return 0;
}

int predict_command(const Options& o) {
  const Trained tr = trained(o);
  const ModelInfo& info = model_info(tr.model);
  auto services = model_services(tr.model, o.device);
  const seqpar::Tokenizer tok = load_tokenizer(tr.tokenizer, info.config.vocab_size);
  const seqpar::TaskSpec spec = run_spec(tr.task, tr.labels, tr.data_dir, o.max_chars);
  SEQPAR_CHECK(o.submission.empty() || spec.task == seqpar::NluTask::ner,
               "--submission writes CLUENER's NER submission; this run was trained for ", tr.task);
  // The records: a JSON --input's (their ids kept: CLUENER's test.json has them), else the
  // sentences of --text and the lines of --input, numbered from 1.
  std::vector<seqpar::TextRecord> records;
  const auto ext = o.input.extension();
  if (!o.input.empty() && (ext == ".json" || ext == ".jsonl")) {
    records = read_predict_input(o).records;
    Options texts_only = o;
    texts_only.input.clear();
    if (!o.texts.empty())
      for (auto& t : predict_texts(texts_only)) {
        seqpar::TextRecord r;
        r.text = std::move(t);
        r.labelled = false;
        records.push_back(std::move(r));
      }
  } else {
    for (auto& t : predict_texts(o)) {
      seqpar::TextRecord r;
      r.text = std::move(t);
      r.labelled = false;
      records.push_back(std::move(r));
    }
  }
  SEQPAR_CHECK(!records.empty(), "predict: no sentences; give --text \"...\" or --input FILE");
  for (std::size_t i = 0; i < records.size(); ++i)
    if (records[i].line == 0 && !records[i].id.from_file)
      records[i].id.number = static_cast<std::int64_t>(i) + 1;
  set_threads(o.threads > 0 ? static_cast<int>(o.threads) : 1);
  const GenerateFn generate = services->load(tr.weights);
  const std::vector<seqpar::Prediction> p = predict_records(
      generate, tok, spec, records, o, decoding(o, tok, tr.max_new_tokens, info.seqgpt));
  for (const auto& one : p) std::printf("%s\n", seqpar::prediction_json(spec, one).c_str());
  if (!o.submission.empty()) {
    seqpar::write_cluener_submission(o.submission, p);
    std::fprintf(stderr, "seqgpt_ner: CLUENER submission %s (%zu records)\n",
                 o.submission.string().c_str(), p.size());
  }
  return 0;
}

}  // namespace ner

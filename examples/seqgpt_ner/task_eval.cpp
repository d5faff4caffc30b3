// Evaluation and prediction of any of the three tasks (task_eval.hpp).
#include "task_eval.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>

#include "devices.hpp"
#include "seqpar/data/json_records.hpp"
#include "seqpar/train/metrics_log.hpp"
#include "seqpar/train/run_folder.hpp"

namespace ner {

using Clock = std::chrono::steady_clock;

seqpar::AnswerFn answers(const GenerateFn& generate, const seqpar::Tokenizer& tok, const Options& o,
                         const seqpar::GenerateOptions& go) {
  const std::int64_t cut = o.truncation == "left" ? o.max_length : 0;
  return seqpar::batched_answers(
      tok, [generate, go](const seqpar::Batch& b) { return generate(b.view(), go).tokens; },
      o.train.per_device_eval_batch_size, cut);
}

EvalResult evaluate_dev(const GenerateFn& generate, const seqpar::Tokenizer& tok,
                        const seqpar::AnyTask& task, const seqpar::AnyRecords& dev,
                        std::int64_t limit, const Options& o, const seqpar::GenerateOptions& go) {
  const auto t0 = Clock::now();
  EvalResult r;
  r.task = task.evaluate(dev, static_cast<std::size_t>(std::max<std::int64_t>(limit, 0)),
                         answers(generate, tok, o, go));
  r.records = r.task.records;
  r.prompts = r.task.prompts;
  r.bad_lines = r.task.garbled;
  for (std::size_t i = 0; i < std::min<std::size_t>(3, r.task.answers.size()); ++i) {
    std::string a;
    for (const auto& s : r.task.answers[i]) a += (a.empty() ? "" : " | ") + s;
    std::replace(a.begin(), a.end(), '\n', ';');
    r.samples.push_back(dev.texts()[i].text + "  ->  " + a);
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

namespace {

/// The weights, tokenizer, labels and data eval and predict use: the options', else the
/// run's (OUT/run.json).
struct Trained {
  fs::path weights, tokenizer, data_dir;
  std::vector<std::string> labels;
  std::int64_t max_new_tokens = 0;
  std::string model;
  std::string task = "ner";   // the run's (run.json), else --task
  nlohmann::json task_state;  // the task without its training data, where recorded
  Options decoding;           // the options with the run's decoding where they give none
};

Trained trained(const Options& o) {
  // A model directory (--weights DIR) says what it was trained for beside its config.json;
  // else the run folder's run.json does.
  const auto info = !o.model_dir.empty() && fs::exists(o.model_dir / model_task_file)
                        ? RunInfo::read(o.model_dir, model_task_file)
                        : RunInfo::read(o.out_dir);
  Trained t;
  t.model = !o.model.empty() ? o.model : info && !info->model.empty() ? info->model : "tiny";
  t.weights = !o.weights.empty() ? o.weights : o.out_dir / "model.safetensors";
  if (!o.weights.empty() && fs::is_directory(o.weights))
    t.weights = seqpar::HfModelDir::open(o.weights).weights;
  if (o.weights.empty() && !fs::exists(t.weights))
    if (const auto newest = seqpar::CheckpointDir{o.out_dir}.newest_complete()) t.weights = *newest;
  if (!fs::exists(t.weights))
    seqpar::detail::fail_missing(t.weights.string(),
                                 ": no weights; train into --output_dir first, or pass --weights");
  t.tokenizer = !o.tokenizer.empty() ? o.tokenizer
                : info               ? info->tokenizer
                                     : o.out_dir / "tokenizer.json";
  t.decoding = o;
  if (info && o.num_beams == 0) t.decoding.num_beams = info->num_beams;
  if (info && o.repetition_penalty == 0) t.decoding.repetition_penalty = info->repetition_penalty;
  if (info) t.task_state = info->task_state;
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
  check_checkpoint_tokenizer(t.weights, t.tokenizer);
  return t;
}

// The run's task: its recorded state where there is one (no training data needed), else
// made again from the training data.
seqpar::AnyTask trained_task(const Trained& tr, const Options& o) {
  return !tr.task_state.is_null()
             ? seqpar::StandardTasks::restore(tr.task_state, "the run's " + tr.task + " task")
             : run_task(tr.task, tr.labels, tr.data_dir, o.max_chars);
}

}  // namespace

nlohmann::json eval_command(const Options& o) {
  const Trained tr = trained(o);
  // Never the bundled corpus silently: the data named, or the data the run was trained on.
  SEQPAR_CHECK(!tr.data_dir.empty(), o.out_dir.string(),
               ": no run.json names the data this run was trained on; pass --data_dir");
  const ModelInfo& info = model_info(tr.model);
  auto services = model_services(tr.model, o.device);
  const seqpar::Tokenizer tok = load_tokenizer(tr.tokenizer, info.config.vocab_size);
  const fs::path dev_file = find_split(tr.data_dir, "dev");
  const seqpar::AnyTask task = trained_task(tr, o);
  std::printf("data %s (%s)\n", tr.data_dir.string().c_str(), tr.task.c_str());
  const seqpar::AnyRecords dev = read_dev(task, dev_file, o.max_chars);
  std::printf("  %s\n", dev.report().summary().c_str());
  fs::create_directories(o.out_dir);
  set_threads(o.threads > 0 ? static_cast<int>(o.threads) : 1);
  const GenerateFn generate = services->load(tr.weights);
  std::printf("weights %s\n", tr.weights.string().c_str());
  const auto [records, sample] =
      dev.sample(static_cast<std::size_t>(std::max<std::int64_t>(o.eval_limit, 0)), o.train.seed);
  if (!sample.whole()) std::printf("  scoring %s\n", sample.describe().c_str());
  const EvalResult r = evaluate_dev(generate, tok, task, records, 0, o,
                                    decoding(tr.decoding, tok, tr.max_new_tokens, info.seqgpt));
  print_eval(r, "dev", true);
  seqpar::MetricsLog(o.out_dir / "metrics.jsonl").append(eval_json(r, 0, "dev"));
  seqpar::write_prediction_lines(o.out_dir / "dev.predictions.jsonl", r.task.predictions.lines);
  seqpar::detail::write_file_atomic(o.out_dir / "dev.scores.json", r.task.json + "\n");
  std::printf("predictions %s, scores %s\n", (o.out_dir / "dev.predictions.jsonl").string().c_str(),
              (o.out_dir / "dev.scores.json").string().c_str());
  return {{"metrics", eval_metrics(r.task, std::numeric_limits<double>::quiet_NaN())},
          {"scores", nlohmann::json::parse(r.task.json)}};
}

std::vector<std::string> predict_command(const Options& o, bool print) {
  const Trained tr = trained(o);
  const ModelInfo& info = model_info(tr.model);
  auto services = model_services(tr.model, o.device);
  const seqpar::Tokenizer tok = load_tokenizer(tr.tokenizer, info.config.vocab_size);
  const seqpar::AnyTask task = trained_task(tr, o);
  SEQPAR_CHECK(o.submission.empty() || task.has_submission(),
               "--submission writes CLUENER's NER submission; this run was trained for ", tr.task);
  // The records: --input's (a JSON record keeps its id, a line's id is its line number),
  // then the sentences of --text, numbered by their place among them.
  std::vector<seqpar::TextRecord> records;
  if (!o.input.empty()) {
    seqpar::TextDataset d = read_predict_input(o);
    // A submission must hold every record of the test file: one skipped is refused, not
    // written short.
    SEQPAR_CHECK(o.submission.empty() || d.report.skipped == 0, "--submission ",
                 o.submission.string(), ": ", d.report.skipped, " record(s) of ", o.input.string(),
                 " were skipped (said above); a submission must answer every record; fix the "
                 "input (nothing was written)");
    records = std::move(d.records);
  }
  for (std::size_t i = 0; i < o.texts.size(); ++i) {
    seqpar::TextRecord r;
    r.text = o.texts[i];
    r.labelled = false;
    r.id.number = static_cast<std::int64_t>(i) + 1;
    records.push_back(std::move(r));
  }
  SEQPAR_CHECK(!records.empty(), "predict: no sentences; give --text \"...\" or --input FILE");
  set_threads(o.threads > 0 ? static_cast<int>(o.threads) : 1);
  const GenerateFn generate = services->load(tr.weights);
  const seqpar::AnyPredictions p = task.predict(
      records,
      answers(generate, tok, o, decoding(tr.decoding, tok, tr.max_new_tokens, info.seqgpt)));
  if (print)
    for (const auto& line : p.lines) std::printf("%s\n", line.c_str());
  if (!o.submission.empty()) {
    task.write_submission(o.submission, p);
    std::fprintf(stderr, "seqgpt_ner: CLUENER submission %s (%zu records)\n",
                 o.submission.string().c_str(), p.lines.size());
  }
  return p.lines;
}

}  // namespace ner

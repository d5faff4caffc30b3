// The NER side of evaluation and prediction (ner_eval.hpp).
#include "ner_eval.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <span>

#include "devices.hpp"
#include "seqpar/data/batching.hpp"
#include "seqpar/data/decoding.hpp"
#include "seqpar/data/json_records.hpp"
#include "seqpar/data/predictions.hpp"
#include "seqpar/data/prompt.hpp"
#include "seqpar/data/token_cache.hpp"
#include "seqpar/train/metrics_log.hpp"
#include "seqpar/train/run_folder.hpp"
#include "task_eval.hpp"

namespace ner {

using Clock = std::chrono::steady_clock;

seqpar::GenerateOptions decoding(const Options& o, const seqpar::Tokenizer& tok,
                                 std::int64_t max_new, bool seqgpt) {
  seqpar::GenerateOptions go;
  go.max_new_tokens = max_new;
  go.eos_id = tok.eos_id();
  const seqpar::DecodingDefaults d = seqgpt ? seqpar::seqgpt_decoding : seqpar::DecodingDefaults{};
  go.num_beams = o.num_beams > 0 ? o.num_beams : d.num_beams;
  go.repetition_penalty = o.repetition_penalty > 0 ? o.repetition_penalty : d.repetition_penalty;
  return go;
}

EvalResult evaluate_ner(const GenerateFn& generate, const seqpar::Tokenizer& tok,
                        const seqpar::NerDataset& dev, const seqpar::ExampleSet& ex,
                        const std::vector<std::string>& labels, std::int64_t limit,
                        std::int64_t rows, const seqpar::GenerateOptions& go) {
  const auto t0 = Clock::now();
  const auto chunks = seqpar::chunk_labels(labels);
  std::vector<std::int32_t> order;
  for (std::size_t i = 0; i < ex.size(); ++i)
    if (limit <= 0 || ex.record(i) < limit) order.push_back(static_cast<std::int32_t>(i));
  // Longest prompts first: batches of similar length pad little.
  std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    return ex.prompt_length(static_cast<std::size_t>(a)) >
           ex.prompt_length(static_cast<std::size_t>(b));
  });
  EvalResult res;
  std::map<std::int32_t, std::string> answers;  // by record, of the first records: the samples
  for (std::size_t b = 0; b < order.size(); b += static_cast<std::size_t>(rows)) {
    const std::span<const std::int32_t> idx(
        order.data() + b, std::min(order.size() - b, static_cast<std::size_t>(rows)));
    const seqpar::Batch prompts = seqpar::collate(ex, idx, tok.pad_id(), true);
    const seqpar::Generated g = generate(prompts.view(), go);
    for (std::size_t r = 0; r < idx.size(); ++r) {
      const auto e = static_cast<std::size_t>(idx[r]);
      const auto& chunk = chunks[static_cast<std::size_t>(ex.chunk(e))];
      const std::string answer = tok.decode(g.tokens[r], true);
      const seqpar::ParsedAnswer p = seqpar::parse_answer(answer, chunk);
      res.score.add(p.mentions, seqpar::gold_mentions(
                                    dev.records[static_cast<std::size_t>(ex.record(e))], chunk));
      res.bad_lines += p.bad_lines + p.unknown_labels;
      res.generated_tokens += static_cast<std::int64_t>(g.tokens[r].size());
      if (ex.record(e) < 3) {
        auto& a = answers[ex.record(e)];
        a += (a.empty() ? "" : " | ") + answer;
      }
    }
    res.prompts += static_cast<std::int64_t>(idx.size());
  }
  std::int32_t last = -1;
  for (auto i : order) last = std::max(last, ex.record(static_cast<std::size_t>(i)));
  res.records = last + 1;
  for (const auto& [rec, a] : answers) {
    std::string one = a;
    std::replace(one.begin(), one.end(), '\n', ';');
    res.samples.push_back(dev.records[static_cast<std::size_t>(rec)].text + "  ->  " + one);
  }
  res.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return res;
}

nlohmann::json eval_json(const EvalResult& r, std::int64_t step, const std::string& split) {
  if (r.task) {  // the task's scores (score_json), as an eval event
    nlohmann::json j = nlohmann::json::parse(seqpar::score_json(*r.task));
    j["event"] = "eval";
    j["split"] = split;
    j["step"] = step;
    j["seconds"] = r.seconds;
    return j;
  }
  const seqpar::PrfCounts& c = r.score.micro();
  nlohmann::json by = nlohmann::json::object();
  for (const auto& [label, l] : r.score.by_label())
    by[label] = {
        {"precision", l.precision()}, {"recall", l.recall()}, {"f1", l.f1()}, {"gold", l.gold}};
  return {{"event", "eval"},
          {"split", split},
          {"step", step},
          {"precision", c.precision()},
          {"recall", c.recall()},
          {"f1", c.f1()},
          {"correct", c.correct},
          {"predicted", c.predicted},
          {"gold", c.gold},
          {"records", r.records},
          {"prompts", r.prompts},
          {"seconds", r.seconds},
          {"unusable_lines", r.bad_lines},
          {"by_label", by}};
}

void print_eval(const EvalResult& r, const std::string& what, bool details) {
  if (r.task) {
    std::printf("%s: %s (%.1f s)\n", what.c_str(), r.task->summary().c_str(), r.seconds);
    if (details && r.task->task == seqpar::NluTask::classification)
      std::printf("%s", r.task->classes.table().c_str());
    if (details && r.task->task == seqpar::NluTask::relation)
      for (const auto& [rel, c] : r.task->relations.by_relation())
        std::printf("  %-14s F1 %.4f  P %.4f  R %.4f  gold %lld\n", rel.c_str(), c.f1(),
                    c.precision(), c.recall(), static_cast<long long>(c.gold));
    if (details)
      for (const auto& s : r.samples) std::printf("  e.g. %s\n", s.c_str());
    std::fflush(stdout);
    return;
  }
  std::printf("%s: F1 %.4f  P %.4f  R %.4f  (%lld records, %lld prompts, %.1f s)\n", what.c_str(),
              r.score.micro().f1(), r.score.micro().precision(), r.score.micro().recall(),
              static_cast<long long>(r.records), static_cast<long long>(r.prompts), r.seconds);
  if (!details) return;
  for (const auto& [label, c] : r.score.by_label())
    std::printf("  %-14s F1 %.4f  P %.4f  R %.4f  gold %lld\n", label.c_str(), c.f1(),
                c.precision(), c.recall(), static_cast<long long>(c.gold));
  for (const auto& s : r.samples) std::printf("  e.g. %s\n", s.c_str());
  std::fflush(stdout);
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
  const auto t0 = Clock::now();
  EvalResult r;
  r.predictions = predict_records(generate, tok, spec, records, o,
                                  decoding(o, tok, tr.max_new_tokens, info.seqgpt));
  const seqpar::TaskScore score = seqpar::score_predictions(spec, records, r.predictions);
  r.records = score.records;
  r.prompts = score.prompts;
  r.bad_lines = score.errors.total();
  if (spec.task == seqpar::NluTask::ner)
    r.score = score.ner;  // printed and logged as before
  else
    r.task = score;
  for (std::size_t i = 0; i < std::min<std::size_t>(3, n); ++i) {
    std::string a;
    for (const auto& s : r.predictions[i].answers) a += (a.empty() ? "" : " | ") + s;
    std::replace(a.begin(), a.end(), '\n', ';');
    r.samples.push_back(records[i].text + "  ->  " + a);
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
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
    seqpar::ReadOptions ro;
    ro.max_chars = o.max_chars;
    records = seqpar::read_texts(o.input, ro).records;
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

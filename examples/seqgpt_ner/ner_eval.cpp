// The NER side of evaluation and prediction (ner_eval.hpp).
#include "ner_eval.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <span>

#include "devices.hpp"
#include "seqpar/data/batching.hpp"
#include "seqpar/data/prompt.hpp"
#include "seqpar/data/token_cache.hpp"
#include "seqpar/train/metrics_log.hpp"
#include "seqpar/train/run_folder.hpp"

namespace ner {

using Clock = std::chrono::steady_clock;

seqpar::GenerateOptions decoding(const Options& o, const seqpar::Tokenizer& tok,
                                 std::int64_t max_new, bool seqgpt) {
  seqpar::GenerateOptions go;
  go.max_new_tokens = max_new;
  go.eos_id = tok.eos_id();
  go.num_beams = o.num_beams > 0 ? o.num_beams : seqgpt ? 4 : 1;
  go.repetition_penalty = o.repetition_penalty > 0 ? o.repetition_penalty : seqgpt ? 2.0 : 1.0;
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
  seqpar::ReadOptions ro;
  ro.labels = tr.labels;
  ro.max_chars = o.max_chars;
  std::printf("data %s\n", tr.data_dir.string().c_str());
  const seqpar::NerDataset dev = read_split(dev_file, ro);
  std::printf("  %s\n", dev.report.summary().c_str());
  seqpar::ExampleReport rep;
  fs::create_directories(o.out_dir);
  const seqpar::ExampleSet ex = cached_examples(o, "dev", dev_file, dev, tr.labels, tok,
                                                seqpar::file_hash(tr.tokenizer), rep);
  set_threads(o.threads > 0 ? static_cast<int>(o.threads) : 1);
  const GenerateFn generate = services->load(tr.weights);
  std::printf("weights %s\n", tr.weights.string().c_str());
  const EvalResult r =
      evaluate_ner(generate, tok, dev, ex, tr.labels, std::max<std::int64_t>(o.eval_limit, 0),
                   o.eval_rows, decoding(o, tok, tr.max_new_tokens, info.seqgpt));
  print_eval(r, "dev", true);
  seqpar::MetricsLog(o.out_dir / "metrics.jsonl").append(eval_json(r, 0, "dev"));
  return 0;
}

int predict_command(const Options& o) {
  const Trained tr = trained(o);
  const ModelInfo& info = model_info(tr.model);
  auto services = model_services(tr.model, o.device);
  const seqpar::Tokenizer tok = load_tokenizer(tr.tokenizer, info.config.vocab_size);
  const auto texts = predict_texts(o);
  const auto chunks = seqpar::chunk_labels(tr.labels);
  set_threads(o.threads > 0 ? static_cast<int>(o.threads) : 1);
  const GenerateFn generate = services->load(tr.weights);
  std::vector<std::vector<std::int32_t>> prompts;
  for (const auto& t : texts)
    for (const auto& c : chunks)
      prompts.push_back(
          cut_prompt(o, tok.encode(seqpar::seqgpt_prompt(t, seqpar::Task::extraction, c))));
  std::vector<std::string> answers(prompts.size());
  const seqpar::GenerateOptions go = decoding(o, tok, tr.max_new_tokens, info.seqgpt);
  for (std::size_t b = 0; b < prompts.size(); b += static_cast<std::size_t>(o.eval_rows)) {
    const std::size_t n = std::min(prompts.size() - b, static_cast<std::size_t>(o.eval_rows));
    const seqpar::Batch batch = seqpar::left_pad(std::span(prompts).subspan(b, n), tok.pad_id());
    const seqpar::Generated g = generate(batch.view(), go);
    for (std::size_t r = 0; r < n; ++r) answers[b + r] = tok.decode(g.tokens[r], true);
  }
  for (std::size_t i = 0; i < texts.size(); ++i) {
    nlohmann::json entities = nlohmann::json::array();
    std::string answer;
    for (std::size_t c = 0; c < chunks.size(); ++c) {
      const std::string& a = answers[i * chunks.size() + c];
      answer += (c ? "\n" : "") + a;
      for (const auto& m : seqpar::parse_answer(a, chunks[c]).mentions)
        entities.push_back({{"label", m.label}, {"text", m.text}});
    }
    std::printf("%s\n",
                nlohmann::json{{"text", texts[i]}, {"entities", entities}, {"answer", answer}}
                    .dump()
                    .c_str());
  }
  return 0;
}

}  // namespace ner

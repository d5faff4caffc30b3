// The NER side of evaluation (ner_eval.hpp).
#include "ner_eval.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <span>

#include "seqpar/data/batching.hpp"
#include "seqpar/data/decoding.hpp"
#include "seqpar/data/predictions.hpp"
#include "seqpar/data/prompt.hpp"

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

}  // namespace ner

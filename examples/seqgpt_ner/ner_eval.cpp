// What every evaluation reports (ner_eval.hpp).
#include "ner_eval.hpp"

#include <cmath>
#include <cstdio>

#include "seqpar/data/decoding.hpp"

namespace ner {

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

nlohmann::json eval_json(const EvalResult& r, std::int64_t step, const std::string& split) {
  nlohmann::json j = nlohmann::json::parse(r.task.json);  // the task's scores, as an eval event
  j["event"] = "eval";
  j["split"] = split;
  j["step"] = step;
  j["seconds"] = r.seconds;
  return j;
}

std::map<std::string, double> eval_metrics(const seqpar::AnyEvaluation& e, double loss) {
  std::map<std::string, double> m;
  if (!e.json.empty()) {
    const nlohmann::json score = nlohmann::json::parse(e.json);
    for (const auto& [k, v] : score.items())
      if (v.is_number()) m[k] = v.get<double>();
  }
  if (std::isfinite(loss)) m["loss"] = loss;
  return m;
}

void print_eval(const EvalResult& r, const std::string& what, bool details) {
  std::printf("%s: %s (%.1f s)\n", what.c_str(), r.task.summary.c_str(), r.seconds);
  if (details) {
    std::printf("%s", r.task.details.c_str());
    for (const auto& s : r.samples) std::printf("  e.g. %s\n", s.c_str());
  }
  std::fflush(stdout);
}

}  // namespace ner

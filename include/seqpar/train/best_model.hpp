#pragma once
// When a run evaluates and saves (Interval), and what its evaluations decide (BestModel):
// the best checkpoint by one metric, and an early stop once the metric stops improving.
// The evaluations are kept in the run folder (evaluations.json), so a resume goes on counting.

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/io/atomic_file.hpp"

namespace seqpar::inline v0 {

/// When a run evaluates or saves: never, every Interval::steps steps, or at each epoch's end.
enum class IntervalStrategy { no, steps, epoch };

inline constexpr std::string_view interval_strategy_names[] = {"no", "steps", "epoch"};

inline std::string_view name_of(IntervalStrategy s) {
  return interval_strategy_names[static_cast<int>(s)];
}

/// The strategy called `text` (no, steps, epoch); `what` names the field in the refusal.
inline IntervalStrategy parse_interval_strategy(std::string_view text, std::string_view what) {
  for (int i = 0; i < 3; ++i)
    if (interval_strategy_names[i] == text) return static_cast<IntervalStrategy>(i);
  detail::fail(what, " is '", text, "'; expected no, steps or epoch");
}

/// A schedule over a run's steps.
struct Interval {
  IntervalStrategy strategy = IntervalStrategy::no;
  std::int64_t steps = 0;  // with IntervalStrategy::steps: every this many steps (> 0)

  /// Whether step `step` (its epoch ended with it: `epoch_end`) is on the schedule.
  bool due(std::int64_t step, bool epoch_end) const {
    switch (strategy) {
      case IntervalStrategy::steps: return steps > 0 && step % steps == 0;
      case IntervalStrategy::epoch: return epoch_end;
      case IntervalStrategy::no: break;
    }
    return false;
  }
  /// "steps (every 20)", "epoch", "no".
  std::string describe() const {
    return strategy == IntervalStrategy::steps ? "steps (every " + std::to_string(steps) + ")"
                                               : std::string(name_of(strategy));
  }
  /// Throws unless a steps schedule has its steps; `what` names the fields.
  void check(std::string_view what) const {
    SEQPAR_CHECK(strategy != IntervalStrategy::steps || steps > 0, what, " is steps with ", steps,
                 " steps; expected a number of steps above 0");
  }
};

/// Which checkpoint is a run's best, and when its evaluations end it.
struct BestModel {
  /// The metric, by the name an evaluation gives it ("accuracy", "f1", "loss"); an "eval_"
  /// prefix is accepted (transformers' names).
  std::string metric = "loss";
  /// Unset: greater is better unless the metric is a loss.
  std::optional<bool> greater_is_better{};
  /// The final weights (and model directory) are the best checkpoint's.
  bool load_at_end = false;
  /// > 0: the run ends after this many evaluations in a row without an improvement.
  std::int64_t patience = 0;
  /// How much the metric must move to count as an improvement.
  double threshold = 0;

  bool greater() const {
    return greater_is_better.value_or(!std::string_view(key()).ends_with("loss"));
  }
  /// The metric's name without the prefix "eval_".
  std::string key() const {
    return std::string_view(metric).starts_with("eval_") ? metric.substr(5) : metric;
  }
};

/// A BestModel in words, for the agreement between ranks (core/fields.hpp).
inline std::string field_text(const BestModel& b) {
  return b.key() + (b.greater() ? " greater" : " smaller") +
         (b.load_at_end ? ", loaded at the end" : "") + ", patience " + std::to_string(b.patience) +
         ", threshold " + std::to_string(b.threshold);
}

/// One evaluation of a run: its step, its metrics and the checkpoint it scored (a name in
/// the run folder).
struct Evaluation {
  std::int64_t step = 0;
  std::map<std::string, double> metrics;
  std::string checkpoint;
};

/// What the evaluations so far decide (every rank alike).
struct EvalDecision {
  bool improved = false;        // this evaluation is the best so far
  bool stop = false;            // the patience ran out: the run ends here
  std::int64_t since_best = 0;  // evaluations since the best
  std::optional<Evaluation> best;
  double best_value = 0;
};

namespace detail {

inline nlohmann::json evaluation_json(const Evaluation& e) {
  return {{"step", e.step}, {"metrics", e.metrics}, {"checkpoint", e.checkpoint}};
}

inline Evaluation evaluation_of(const nlohmann::json& j, const std::string& file) {
  Evaluation e;
  try {
    e.step = j.at("step").get<std::int64_t>();
    e.metrics = j.at("metrics").get<std::map<std::string, double>>();
    e.checkpoint = j.at("checkpoint").get<std::string>();
  } catch (const nlohmann::json::exception&) {
    fail(file, ": an evaluation is ", j.dump(),
         "; expected {\"step\": N, \"metrics\": {name: number}, \"checkpoint\": file}");
  }
  return e;
}

}  // namespace detail

/// A run's evaluations and its best by BestModel, as evaluations.json keeps them.
class Evaluations {
 public:
  explicit Evaluations(std::optional<BestModel> best = std::nullopt) : best_(std::move(best)) {}

  static constexpr const char* file_name = "evaluations.json";

  /// The evaluations of `dir` up to step `upto` (those after it are a future a resume
  /// discards); none when the folder has none.
  void read(const std::filesystem::path& dir, std::int64_t upto) {
    const auto path = dir / file_name;
    if (!std::filesystem::exists(path)) return;
    nlohmann::json j;
    try {
      std::ifstream in(path);
      j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      detail::fail(path.string(), ": not JSON (", e.what(), ")");
    }
    SEQPAR_CHECK(j.is_object() && j.contains("evaluations") && j["evaluations"].is_array(),
                 path.string(), ": expected {\"evaluations\": [...]}");
    for (const auto& e : j["evaluations"]) {
      Evaluation one = detail::evaluation_of(e, path.string());
      if (one.step <= upto) add(std::move(one));
    }
  }

  /// Adds an evaluation; returns what the evaluations now decide. Throws when the best
  /// model's metric is not among its metrics.
  EvalDecision add(Evaluation e) {
    all_.push_back(std::move(e));
    const Evaluation& now = all_.back();
    if (!best_) return decision_;
    const auto it = now.metrics.find(best_->key());
    if (it == now.metrics.end()) {
      std::string have;
      for (const auto& [k, v] : now.metrics) have += (have.empty() ? "" : ", ") + k;
      detail::fail("BestModel::metric is '", best_->metric, "'; the evaluation of step ", now.step,
                   " has ", have.empty() ? "no metrics" : have);
    }
    const double v = it->second;
    const double margin = std::abs(best_->threshold);
    const bool better = std::isfinite(v) &&
                        (!decision_.best || (best_->greater() ? v > decision_.best_value + margin
                                                              : v < decision_.best_value - margin));
    decision_.improved = better;
    if (better) {
      decision_.best = now;
      decision_.best_value = v;
      decision_.since_best = 0;
    } else {
      ++decision_.since_best;
    }
    decision_.stop = best_->patience > 0 && decision_.since_best >= best_->patience;
    return decision_;
  }

  const EvalDecision& decision() const { return decision_; }
  const std::vector<Evaluation>& all() const { return all_; }
  const std::optional<BestModel>& best_model() const { return best_; }

  /// Writes evaluations.json into `dir` (atomically).
  void write(const std::filesystem::path& dir) const {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& e : all_) list.push_back(detail::evaluation_json(e));
    nlohmann::json j = {{"evaluations", list}};
    if (best_) {
      j["metric"] = best_->key();
      j["greater_is_better"] = best_->greater();
      if (decision_.best) {
        j["best_step"] = decision_.best->step;
        j["best_metric"] = decision_.best_value;
        j["best_checkpoint"] = decision_.best->checkpoint;
      }
    }
    detail::write_file_atomic(dir / file_name, j.dump(1) + "\n");
  }

  /// The decision as JSON (what every rank is told), and back.
  static std::string encode(const EvalDecision& d) {
    nlohmann::json j = {{"improved", d.improved},
                        {"stop", d.stop},
                        {"since_best", d.since_best},
                        {"best_value", d.best_value}};
    if (d.best) j["best"] = detail::evaluation_json(*d.best);
    return j.dump();
  }
  static EvalDecision decode(const std::string& text) {
    const auto j = nlohmann::json::parse(text);
    EvalDecision d;
    d.improved = j.at("improved").get<bool>();
    d.stop = j.at("stop").get<bool>();
    d.since_best = j.at("since_best").get<std::int64_t>();
    d.best_value = j.at("best_value").get<double>();
    if (j.contains("best")) d.best = detail::evaluation_of(j["best"], "the writer's decision");
    return d;
  }

 private:
  std::optional<BestModel> best_;
  std::vector<Evaluation> all_;
  EvalDecision decision_;
};

}  // namespace seqpar::inline v0

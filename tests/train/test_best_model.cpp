// Evaluation schedules and the best model (train/best_model.hpp, evaluation_loss.hpp, the
// evaluations of train/run.hpp): when a run evaluates and saves under transformers'
// strategies, which evaluation is the best by a metric in either direction and with a
// threshold, when the patience ends a run, a resume that goes on counting, the best
// checkpoint kept by the rotation and loaded at the end, and the evaluation loss against
// the trainer's own loss of each example.
#include <doctest/doctest.h>

#include <cmath>
#include <mutex>
#include <string>
#include <vector>

#include "../support/errors.hpp"
#include "../support/files.hpp"
#include "../support/plans.hpp"
#include "seqpar/data/examples.hpp"
#include "seqpar/io/safetensors.hpp"
#include "seqpar/train/best_model.hpp"
#include "seqpar/train/evaluation_loss.hpp"
#include "seqpar/train/run.hpp"
#include "seqpar/train/training_arguments.hpp"

using namespace seqpar;

namespace best_test {

namespace fs = std::filesystem;

using test::error_of;

TEST_CASE("intervals: transformers' strategies, eval_steps alone meaning steps") {
  CHECK(Interval{IntervalStrategy::steps, 5}.due(10, false));
  CHECK(!Interval{IntervalStrategy::steps, 5}.due(11, true));
  CHECK(Interval{IntervalStrategy::epoch, 0}.due(7, true));
  CHECK(!Interval{IntervalStrategy::epoch, 0}.due(5, false));
  CHECK(!Interval{IntervalStrategy::no, 0}.due(5, true));
  CHECK(parse_interval_strategy("steps", "x") == IntervalStrategy::steps);
  CHECK(error_of([] { parse_interval_strategy("step", "--eval_strategy"); }) ==
        "--eval_strategy is 'step'; expected no, steps or epoch");

  TrainingArguments a;
  CHECK(eval_interval(a).strategy == IntervalStrategy::epoch);
  CHECK(save_interval(a).strategy == IntervalStrategy::epoch);
  a.eval_steps = 20;
  a.given.insert("eval_steps");
  CHECK(eval_interval(a).strategy == IntervalStrategy::steps);
  CHECK(eval_interval(a).steps == 20);
  a.eval_strategy = IntervalStrategy::no;
  a.given.insert("eval_strategy");
  CHECK(eval_interval(a).strategy == IntervalStrategy::no);
  // A steps strategy without steps takes logging_steps, as transformers does.
  TrainingArguments b;
  b.eval_strategy = IntervalStrategy::steps;
  b.logging_steps = 7;
  CHECK(eval_interval(b).steps == 7);
  // No best model unless asked; one asked for without evaluations is refused by name.
  CHECK(!best_model(b).has_value());
  b.load_best_model_at_end = true;
  const auto best = best_model(b);
  REQUIRE(best.has_value());
  CHECK(best->metric == "loss");
  CHECK(!best->greater());
  b.eval_strategy = IntervalStrategy::no;
  CHECK(error_of([&] { best_model(b); }).find("TrainingArguments::load_best_model_at_end") !=
        std::string::npos);
}

TEST_CASE("evaluations: the best in either direction, the threshold, the patience") {
  Evaluations e(BestModel{.metric = "eval_accuracy", .patience = 2, .threshold = 0.01});
  CHECK(e.add({1, {{"accuracy", 0.30}}, "step-1.safetensors"}).improved);
  CHECK(e.add({2, {{"accuracy", 0.50}}, "step-2.safetensors"}).improved);
  // 0.505 is not better by more than the threshold: one evaluation without improvement.
  EvalDecision d = e.add({3, {{"accuracy", 0.505}}, "step-3.safetensors"});
  CHECK(!d.improved);
  CHECK(!d.stop);
  CHECK(d.since_best == 1);
  d = e.add({4, {{"accuracy", 0.2}}, "step-4.safetensors"});
  CHECK(d.stop);
  REQUIRE(d.best.has_value());
  CHECK(d.best->step == 2);
  CHECK(d.best_value == 0.50);
  // A loss: smaller is better; NaN never is.
  Evaluations loss(BestModel{.metric = "loss"});
  loss.add({1, {{"loss", 2.0}}, "a"});
  CHECK(!loss.add({2, {{"loss", std::nan("")}}, "b"}).improved);
  CHECK(loss.add({3, {{"loss", 1.5}}, "c"}).best->step == 3);
  CHECK(!loss.add({4, {{"loss", 1.7}}, "d"}).improved);
  // greater_is_better overrides the name's direction.
  Evaluations down(BestModel{.metric = "f1", .greater_is_better = false});
  down.add({1, {{"f1", 0.5}}, "a"});
  CHECK(down.add({2, {{"f1", 0.4}}, "b"}).improved);
  // A metric the evaluation lacks is named with those it has.
  Evaluations wrong(BestModel{.metric = "f1"});
  CHECK(error_of([&] {
          wrong.add({1, {{"accuracy", 1.0}, {"macro_f1", 0.5}}, "a"});
        }) == "BestModel::metric is 'f1'; the evaluation of step 1 has accuracy, macro_f1");
}

TEST_CASE("evaluations.json: written, read back up to a step, refused when damaged") {
  test::TempDir dir;
  Evaluations e(BestModel{.metric = "accuracy", .patience = 3});
  for (int s = 1; s <= 4; ++s) e.add({s, {{"accuracy", s == 2 ? 0.9 : 0.1 * s}}, "c"});
  e.write(dir.path);
  // Up to step 3 (a resume from there): the evaluation of step 4 is to be made again.
  Evaluations back(BestModel{.metric = "accuracy", .patience = 3});
  back.read(dir.path, 3);
  CHECK(back.all().size() == 3);
  CHECK(back.decision().best->step == 2);
  CHECK(back.decision().since_best == 1);
  { std::ofstream(dir / Evaluations::file_name) << "{\"evaluations\": [{\"step\": \"x\"}]}"; }
  Evaluations bad;
  CHECK(error_of([&] { bad.read(dir.path, 9); }).find("evaluations.json: an evaluation is") !=
        std::string::npos);
}

// A run of `steps` steps evaluated after each with the metric `scores[step - 1]`, on two
// ranks; `stop_after` stops it there (to be resumed).
struct Evaluated {
  RunResult result;
  std::vector<std::int64_t> steps;  // the steps taken by this run
};
Evaluated evaluated_run(RunSpec spec, const std::vector<double>& scores) {
  Evaluated out;
  std::mutex m;
  run_ranks(2, [&](ThreadComm& comm) {
    Trainer<test::Small, Replicated<2>> trainer(AnyComm(comm), test::plan_options());
    TrainingRun run(trainer, AnyComm(comm), spec);
    std::vector<std::int64_t> steps;
    while (run.running()) {
      const StepStats st = trainer.step(test::plan_batch(static_cast<int>(run.step())));
      run.after_step(st);
      steps.push_back(st.step);
      // Only the writer's metrics are read: the other rank passes others.
      const double score = comm.rank() == 0 ? scores[static_cast<std::size_t>(st.step - 1)] : -1;
      run.evaluated({{"accuracy", score}});
    }
    RunResult r = run.finish();
    std::lock_guard lock(m);
    if (comm.rank() == 0) out = {r, steps};
  });
  return out;
}

std::map<std::string, std::string> model_bytes(const fs::path& file) {
  const SafetensorsFile f(file);
  std::map<std::string, std::string> out;
  for (const auto& n : f.names()) {
    if (n.starts_with("optimizer.")) continue;
    const TensorEntry* t = f.find(n);
    out[n] = std::string(reinterpret_cast<const char*>(t->bytes.data()),
                         static_cast<std::size_t>(t->numel() * dtype_size(t->dtype)));
  }
  return out;
}

TEST_CASE(
    "the best checkpoint: kept by the rotation, the patience ends the run, loaded at the end") {
  test::TempDir dir;
  const std::vector<double> scores{0.2, 0.6, 0.5, 0.55, 0.4, 0.9, 0.9, 0.9};
  const BestModel best{.metric = "accuracy", .load_at_end = true, .patience = 3};
  const Evaluated straight = evaluated_run(
      {.output_dir = dir / "a", .total_steps = 8, .save_total_limit = 1, .best = best}, scores);
  // Steps 3, 4 and 5 do not beat step 2: the run ends after step 5.
  CHECK(straight.steps == std::vector<std::int64_t>{1, 2, 3, 4, 5});
  CHECK(straight.result.early_stopped);
  CHECK(straight.result.completed);
  REQUIRE(straight.result.evaluations.best.has_value());
  CHECK(straight.result.evaluations.best->step == 2);
  // The newest checkpoint and the best one; the final weights are the best's.
  CHECK(CheckpointDir{dir / "a"}.steps() == std::vector<std::int64_t>{5, 2});
  CHECK(model_bytes(dir / "a" / "model.safetensors") ==
        model_bytes(dir / "a" / "step-2.safetensors"));
  CHECK(model_bytes(dir / "a" / "model.safetensors") !=
        model_bytes(dir / "a" / "step-5.safetensors"));
  // Stopped after step 3 and resumed: the evaluations of the first part still count.
  const Evaluated first = evaluated_run({.output_dir = dir / "b",
                                         .total_steps = 8,
                                         .save_total_limit = 1,
                                         .best = best,
                                         .stop_after = 3},
                                        scores);
  CHECK(first.steps == std::vector<std::int64_t>{1, 2, 3});
  CHECK(!first.result.completed);
  const Evaluated second = evaluated_run({.output_dir = dir / "b",
                                          .total_steps = 8,
                                          .save_total_limit = 1,
                                          .best = best,
                                          .resume = true},
                                         scores);
  CHECK(second.steps == std::vector<std::int64_t>{4, 5});
  CHECK(second.result.early_stopped);
  CHECK(second.result.evaluations.best->step == 2);
  CHECK(model_bytes(dir / "b" / "model.safetensors") ==
        model_bytes(dir / "a" / "model.safetensors"));
  // Without load_at_end the final weights are the last step's.
  BestModel keep_last = best;
  keep_last.load_at_end = false;
  evaluated_run({.output_dir = dir / "c", .total_steps = 8, .best = keep_last}, scores);
  CHECK(model_bytes(dir / "c" / "model.safetensors") ==
        model_bytes(dir / "c" / "step-5.safetensors"));
}

TEST_CASE("the evaluation loss: every example once, weighted by its answer tokens") {
  // Four examples of different lengths; batches of 3 rows (the last one filled).
  ExampleSetBuilder builder;
  for (int i = 0; i < 4; ++i) {
    std::vector<std::int32_t> prompt, answer;
    for (int k = 0; k < 3 + i; ++k) prompt.push_back(5 + 7 * i + k);
    for (int k = 0; k < 1 + i; ++k) answer.push_back(40 + 3 * i + k);
    builder.add(prompt, answer, i, 0);
  }
  const ExampleSet ex = builder.finish();
  Trainer<test::Small, Replicated<1>> t(test::plan_options());
  const double loss = evaluation_loss(t, ex, 3, 0);
  // The reference: each example alone, its loss weighted by its targets.
  double sum = 0;
  std::int64_t targets = 0;
  for (std::int32_t i = 0; i < 4; ++i) {
    const std::vector<std::int32_t> one{i};
    const Batch b = collate(ex, one, 0);
    const std::int64_t n = b.view().target_count();
    sum += t.evaluate(b.view()) * static_cast<double>(n);
    targets += n;
  }
  CHECK(loss == doctest::Approx(sum / static_cast<double>(targets)).epsilon(1e-6));
  CHECK(error_of([&] { evaluation_loss(t, ExampleSetBuilder().finish(), 3, 0); }) ==
        "evaluation_loss: no examples");
}

}  // namespace best_test

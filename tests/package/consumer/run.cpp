// A training program built against the installed package, as a user's would be: a layout
// named at launch (ZeRO-1 over three thread ranks), a trainer chosen at run time, and the
// library's run around the step: an output folder, checkpoints every two steps, a stop and
// a resume that continues the run exactly, metrics.jsonl with one row a step, the final
// weights. Returns non-zero on any wrong result.
#include <unistd.h>
#include <seqpar/seqpar.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

using Model =
    seqpar::Bloom<seqpar::BloomConfig{.vocab_size = 128, .hidden = 32, .layers = 2, .heads = 4}>;
using Plans = seqpar::PlanSet<seqpar::PlanFamily<seqpar::Degrees<1>, seqpar::Degrees<1>>>;

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "run consumer: wrong result: %s\n", what.c_str());
    ++failures;
  }
}

seqpar::Batch batch(std::int64_t step) {
  seqpar::Batch b(6, 8);
  const seqpar::CounterRng rng(static_cast<std::uint64_t>(step), "consumer");
  for (std::size_t i = 0; i < b.input_ids.size(); ++i) {
    b.input_ids[i] = static_cast<std::int32_t>(4 + rng.bits(i) % 120);
    b.labels[i] = b.input_ids[i];
  }
  return b;
}

// Trains `steps` of ZeRO-1 over 3 ranks in `out` (stopping after `stop_after` when > 0, or
// resuming); returns the losses of the steps it took.
std::vector<double> train(const std::filesystem::path& out, std::int64_t stop_after, bool resume) {
  const seqpar::PlanDesc layout =
      seqpar::resolve_plan({*seqpar::parse_plan_name("zero1"), "--plan zero1"}, {3, ""},
                           Model::config, Plans::layouts());
  seqpar::RunFolder folder(out, {.resume = resume});
  folder.take();
  const seqpar::MetricsLog log(out / "metrics.jsonl");
  std::vector<double> losses;
  seqpar::run_ranks(3, [&](seqpar::ThreadComm& comm) {
    const seqpar::AnyComm world(comm);
    seqpar::TrainOptions o;
    o.schedule.peak = 1e-3;
    seqpar::AnyTrainer t =
        seqpar::make_trainer<Model, seqpar::Cpu, seqpar::Precisions<seqpar::Fp32>, Plans>(
            layout, "fp32", world, o);
    seqpar::TrainingRun run(t, world, out,
                            {.total_steps = 6, .save_steps = 2, .stop_after = stop_after});
    if (comm.rank() == 0) run.keep_books(folder, log);
    if (folder.resume_from()) run.resume(*folder.resume_from());
    while (run.running()) {
      const seqpar::StepStats st = t.step(batch(run.step()));
      run.after_step(st);
      if (comm.rank() == 0) losses.push_back(st.loss);
    }
    run.finish(out / "model.safetensors");
  });
  return losses;
}

}  // namespace

int main() try {
  const auto base = std::filesystem::temp_directory_path() /
                    ("seqpar_run_consumer_" + std::to_string(::getpid()));
  std::filesystem::remove_all(base);
  const auto straight = train(base / "straight", 0, false);
  const auto first = train(base / "run", 3, false);
  const auto rest = train(base / "run", 0, true);
  expect(straight.size() == 6 && first.size() == 3 && rest.size() == 3, "6 = 3 + 3 steps");
  for (std::size_t i = 0; i < 3 && i < first.size() && i < rest.size(); ++i) {
    expect(first[i] == straight[i], "step " + std::to_string(i + 1) + " before the stop");
    expect(rest[i] == straight[3 + i], "step " + std::to_string(4 + i) + " after the resume");
  }
  expect(std::filesystem::exists(base / "run" / "model.safetensors"), "the final weights");
  expect(!std::filesystem::exists(base / "run" / "step-2.safetensors"), "step-2 rotated away");
  std::ifstream metrics(base / "run" / "metrics.jsonl");
  int train_rows = 0;
  for (std::string line; std::getline(metrics, line);)
    train_rows += line.find("\"event\":\"train\"") != std::string::npos;
  expect(train_rows == 6,
         "one metrics row a step after the resume, got " + std::to_string(train_rows));
  std::filesystem::remove_all(base);
  std::printf("run consumer: %s\n", failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "run consumer: %s\n", e.what());
  return 1;
}

// A training program built against the installed package, as a user's would be: the
// headline type Trainer<M, Hybrid<TP2, DP2>> over four ranks (threads of this process, or
// processes under mpirun) and the library's run around it: an output folder, checkpoints
// every two steps, a stop after step 3 and a resume whose losses are those of the run that
// never stopped, metrics.jsonl with one row a step, the final weights. Usage:
// run_consumer <folder>. Returns non-zero on any wrong result.
#include <seqpar/seqpar.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

using Model =
    seqpar::Bloom<seqpar::BloomConfig{.vocab_size = 128, .hidden = 32, .layers = 2, .heads = 4}>;
using Plan = seqpar::Hybrid<seqpar::TP2, seqpar::DP2>;

seqpar::Batch batch(std::int64_t step) {
  seqpar::Batch b(8, 8);
  const seqpar::CounterRng rng(static_cast<std::uint64_t>(step), "consumer");
  for (std::size_t i = 0; i < b.input_ids.size(); ++i) {
    b.input_ids[i] = static_cast<std::int32_t>(4 + rng.bits(i) % 120);
    b.labels[i] = b.input_ids[i];
  }
  return b;
}

// Six steps in `out` (stopping after `stop_after` when > 0, or resuming the run there); the
// losses of the steps it took. The run's code, trainer to finished run, is these lines.
std::vector<double> train(seqpar::AnyComm world, const std::filesystem::path& out,
                          std::int64_t stop_after, bool resume) {
  seqpar::Trainer<Model, Plan> trainer(world, {.schedule = {.peak = 1e-3}});
  seqpar::TrainingRun run(trainer, world,
                          {.output_dir = out,
                           .total_steps = 6,
                           .save_steps = 2,
                           .stop_after = stop_after,
                           .resume = resume});
  std::vector<double> losses;
  while (run.running()) {
    const seqpar::StepStats st = trainer.step(batch(run.step()));
    run.after_step(st);
    losses.push_back(st.loss);
  }
  run.finish();
  return losses;
}

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "run consumer: wrong result: %s\n", what.c_str());
    ++failures;
  }
}

// Every rank: the run straight through, then stopped and resumed; world rank 0 checks.
void check(seqpar::AnyComm world, const std::filesystem::path& base) {
  const auto straight = train(world, base / "straight", 0, false);
  const auto first = train(world, base / "run", 3, false);
  const auto rest = train(world, base / "run", 0, true);
  if (world.rank() != 0) return;
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
  std::printf("run consumer (%d ranks): %s\n", world.size(), failures == 0 ? "ok" : "FAILED");
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 2) {
    std::fprintf(stderr, "usage: run_consumer <folder>\n");
    return 2;
  }
  const std::filesystem::path base = argv[1];
#if defined(SEQPAR_WITH_MPI)
  if (seqpar::process_launch_from_environment())
    return seqpar::mpi_main(argc, argv, [&](seqpar::MpiComm& world) {
      check(seqpar::AnyComm(world), base);
      return failures == 0 ? 0 : 1;
    });
#endif
  seqpar::run_ranks(4, [&](seqpar::ThreadComm& comm) { check(seqpar::AnyComm(comm), base); });
  return failures == 0 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "run consumer: %s\n", e.what());
  return 1;
}

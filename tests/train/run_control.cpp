// A small training program for the mpirun tests of tests/train/CMakeLists.txt: the ranks
// agree on their plan and options first (require_agreement), train a tiny BLOOM, and stop
// together at a step boundary when a rank gets SIGTERM (StopSignals, StopRequest),
// saving a checkpoint of the last completed step.
//
//   run_control --plan tp2|dp2 [--batch N] [--steps N] [--seed N] [--out DIR]
//               [--resume FILE] [--signal-rank R --signal-step S [--twice]] [--no-agreement]
//
// Rank R raises SIGTERM on itself after step S (twice with --twice). Rank 0 prints
// "step N loss X" for every step (X to the last bit), "stopped after step N: SIGTERM
// (rank R); checkpoint FILE" when the ranks stop, "finished at step N" otherwise.
// --no-agreement leaves the agreement out, to show what it prevents.
#include <signal.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "seqpar/backend/cpu/ops.hpp"
#include "seqpar/comm/agreement.hpp"
#include "seqpar/comm/mpi_comm.hpp"
#include "seqpar/core/rng.hpp"
#include "seqpar/train/stop.hpp"
#include "seqpar/train/trainer.hpp"

namespace {
using namespace seqpar;
using Tiny = Bloom<BloomConfig{.vocab_size = 256, .hidden = 32, .layers = 2, .heads = 4}>;

struct Args {
  std::string plan = "dp2", out = ".", resume;
  std::int64_t batch = 8, steps = 6, seed = 7;
  int signal_rank = -1;
  std::int64_t signal_step = -1;
  bool twice = false, agreement = true;
};

Batch make_batch(const Args& a, std::int64_t step) {
  Batch b(a.batch, 16);
  const CounterRng rng(static_cast<std::uint64_t>(a.seed * 1000 + step), "run-control");
  for (std::size_t i = 0; i < b.input_ids.size(); ++i) {
    b.input_ids[i] = static_cast<std::int32_t>(rng.bits(i) % Tiny::vocab_size);
    b.labels[i] = b.input_ids[i];
  }
  return b;
}

template <class Plan>
int train(MpiComm& world, const Args& a) {
  TrainOptions o;
  o.schedule.peak = 1e-3;
  o.seed = static_cast<std::uint64_t>(a.seed);
  Trainer<Tiny, Plan> t(world, o);
  if (!a.resume.empty()) t.load_checkpoint(a.resume);
  StopRequest stop;
  while (t.steps_taken() < a.steps) {
    const StepStats st = t.step(make_batch(a, t.steps_taken()));
    if (world.rank() == 0)
      std::printf("step %lld loss %.17g\n", static_cast<long long>(st.step), st.loss);
    if (world.rank() == a.signal_rank && st.step == a.signal_step) {
      ::raise(SIGTERM);
      if (a.twice) ::raise(SIGTERM);  // ends this process here
    }
    if (const StopDecision why = stop.agreed(world)) {
      const auto path =
          std::filesystem::path(a.out) / ("step-" + std::to_string(st.step) + ".safetensors");
      t.save_checkpoint(path);
      std::printf("rank %d: stopped after step %lld: %s; checkpoint %s\n", world.rank(),
                  static_cast<long long>(st.step), why.describe().c_str(), path.c_str());
      return 0;
    }
  }
  if (world.rank() == 0)
    std::printf("finished at step %lld\n", static_cast<long long>(t.steps_taken()));
  return 0;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    const auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(k + " needs a value");
      return argv[++i];
    };
    if (k == "--plan")
      a.plan = next();
    else if (k == "--batch")
      a.batch = std::stoll(next());
    else if (k == "--steps")
      a.steps = std::stoll(next());
    else if (k == "--seed")
      a.seed = std::stoll(next());
    else if (k == "--out")
      a.out = next();
    else if (k == "--resume")
      a.resume = next();
    else if (k == "--signal-rank")
      a.signal_rank = std::stoi(next());
    else if (k == "--signal-step")
      a.signal_step = std::stoll(next());
    else if (k == "--twice")
      a.twice = true;
    else if (k == "--no-agreement")
      a.agreement = false;
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  return mpi_main(argc, argv, [&](MpiComm& world) {
    StopSignals signals;
    if (a.agreement)
      require_agreement(world, {{"plan", a.plan},
                                {"batch", std::to_string(a.batch)},
                                {"steps", std::to_string(a.steps)},
                                {"seed", std::to_string(a.seed)},
                                {"resume", a.resume}});
    if (a.plan == "tp2") return train<TensorSplit<2>>(world, a);
    if (a.plan == "dp2") return train<Replicated<2>>(world, a);
    throw std::invalid_argument("--plan " + a.plan + ": expected tp2 or dp2");
  });
}

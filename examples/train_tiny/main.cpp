// train_tiny: a small BLOOM trained from scratch on in-process ranks, printing its loss curve,
// with the run around the step from the library: the plan named at launch, checkpoints
// every 20 steps in an output folder (the newest two kept), resume, metrics.jsonl and the
// final weights. The data is synthetic: each row counts from a random start with a random
// stride (a, a + k, a + 2k, ... modulo the vocabulary), so the next token follows from the
// last two; a model that learns this drives the loss from log(vocab) towards zero.
//
//   train_tiny [steps] [plan] [out] [--resume]
//     plan: zero2 (default: ZeRO-2 over 2 ranks), single, tp2, tp2zero1x2, dp4, zero3x3, ...
//     out:  the output folder (default train_tiny_out); --resume continues the run there
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "tiny.hpp"

namespace {
void train(int steps, const std::string& plan, const std::filesystem::path& out, bool resume) {
  // The layout the name asks for; `zero2` and the like (no data degree) take 2 ranks.
  const auto asked = seqpar::parse_plan_name(plan);
  SEQPAR_CHECK(asked.has_value(), "'", plan, "' is not a plan name (tp2, zero3x4, ...)");
  const int ranks = asked->data > 0 ? asked->world_size() : 2 * asked->tensor;
  std::vector<seqpar::PlanDesc> compiled = TinyPlans<1>::layouts();
  for (const auto& l : TinyPlans<2>::layouts()) compiled.push_back(l);
  const seqpar::PlanDesc layout =
      seqpar::resolve_plan({*asked, plan}, {ranks, ""}, Tiny::config, compiled);
  seqpar::TrainOptions o;
  o.schedule.peak = 3e-3;
  o.schedule.warmup = 10;
  o.schedule.total = steps;
  o.schedule.decay = seqpar::LrDecay::cosine;
  o.weight_decay = 0.01;
  o.micro_batch_rows = 4;
  seqpar::run_ranks(ranks, [&](seqpar::ThreadComm& comm) {
    train_rank(seqpar::AnyComm(comm), layout, ranks, o, out, steps, resume);
  });
}
}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const bool resume = std::erase(args, "--resume") > 0;
  const int steps = !args.empty() ? std::atoi(args[0].c_str()) : 120;
  try {
    train(steps, args.size() > 1 ? args[1] : "zero2", args.size() > 2 ? args[2] : "train_tiny_out",
          resume);
    std::printf("log(vocab) = %.3f: a loss far below it means the model learned to count\n",
                std::log(static_cast<double>(Tiny::vocab_size)));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_tiny: %s\n", e.what());
    return 1;
  }
  return 0;
}

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

#include "seqpar/seqpar.hpp"

namespace {
using Tiny =
    seqpar::Bloom<seqpar::BloomConfig{.vocab_size = 512, .hidden = 128, .layers = 4, .heads = 4}>;
// The plans this program compiles: tensor degree 1 or 2, every ZeRO stage, any data degree.
using Plans = seqpar::PlanSet<seqpar::PlanFamily<seqpar::Degrees<1, 2>, seqpar::Degrees<1>>>;
constexpr std::int64_t kRows = 16, kSeq = 32, kTokens = Tiny::vocab_size - 4;

// Global batch `step`: counting sequences; the first two tokens of a row are unpredictable.
seqpar::Batch counting_batch(std::int64_t step) {
  seqpar::Batch b(kRows, kSeq);
  const seqpar::CounterRng rng(static_cast<std::uint64_t>(step), "train_tiny");
  for (std::int64_t r = 0; r < kRows; ++r) {
    const std::int64_t start =
        static_cast<std::int64_t>(rng.bits(static_cast<std::uint64_t>(r), 0) % kTokens);
    const std::int64_t stride =
        1 + static_cast<std::int64_t>(rng.bits(static_cast<std::uint64_t>(r), 1) % 8);
    for (std::int64_t t = 0; t < kSeq; ++t) {
      const auto i = static_cast<std::size_t>(r * kSeq + t);
      b.input_ids[i] = static_cast<std::int32_t>(4 + (start + t * stride) % kTokens);
      if (t >= 2) b.labels[i] = b.input_ids[i];
    }
  }
  return b;
}

void train(int steps, const std::string& plan, const std::filesystem::path& out, bool resume) {
  // The layout the name asks for; `zero2` and the like (no data degree) take 2 ranks.
  const auto asked = seqpar::parse_plan_name(plan);
  SEQPAR_CHECK(asked.has_value(), "'", plan, "' is not a plan name (tp2, zero3x4, ...)");
  const int ranks = asked->data > 0 ? asked->world_size() : 2 * asked->tensor;
  const seqpar::PlanDesc layout =
      seqpar::resolve_plan({*asked, plan}, {ranks, ""}, Tiny::config, Plans::layouts());
  seqpar::TrainOptions o;
  o.schedule.peak = 3e-3;
  o.schedule.warmup = 10;
  o.schedule.total = steps;
  o.schedule.decay = seqpar::LrDecay::cosine;
  o.weight_decay = 0.01;
  o.micro_batch_rows = 4;
  seqpar::run_ranks(ranks, [&](seqpar::ThreadComm& comm) {
    const seqpar::AnyComm world(comm);
    seqpar::AnyTrainer t =
        seqpar::make_trainer<Tiny, seqpar::Cpu, seqpar::Precisions<seqpar::Fp32>, Plans>(
            layout, "fp32", world, o);
    // Refuses (every rank alike) before anything is written; Ctrl-C stops at a step boundary.
    seqpar::TrainingRun run(
        t, world, {.output_dir = out, .total_steps = steps, .save_steps = 20, .resume = resume});
    if (comm.rank() == 0)
      std::printf("train_tiny: %lld parameters, plan %s on %d rank(s), from step %lld\n",
                  static_cast<long long>(Tiny::parameter_count), layout.name().c_str(), ranks,
                  static_cast<long long>(run.step()));
    while (run.running()) {
      const seqpar::StepStats st = t.step(counting_batch(run.step()));
      run.after_step(st);
      if (comm.rank() == 0 && (st.step % 10 == 1 || st.step == steps))
        std::printf(
            "step %4lld  loss %.4f  grad norm %.3f  lr %.2e  %.0f tokens/s  peak %.1f MiB\n",
            static_cast<long long>(st.step), st.loss, st.grad_norm, st.lr, st.tokens_per_s,
            static_cast<double>(st.memory.total_peak) / (1 << 20));
    }
    const seqpar::RunResult r = run.finish();
    if (r.stop && comm.rank() == 0)
      std::printf("stopped after step %lld by %s; continue with --resume\n",
                  static_cast<long long>(run.step()), r.stop.describe().c_str());
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

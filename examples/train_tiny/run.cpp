// One rank of train_tiny: its trainer, the library's run around it, the loop.
#include <cstdio>

#include "tiny.hpp"

namespace {
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

}  // namespace

void train_rank(seqpar::AnyComm world, const seqpar::PlanDesc& layout, int ranks,
                const seqpar::TrainOptions& o, const std::filesystem::path& out, int steps,
                bool resume) {
  seqpar::AnyTrainer t =
      layout.tensor == 1
          ? seqpar::make_trainer<Tiny, seqpar::Cpu, seqpar::Precisions<seqpar::Fp32>, TinyPlans<1>>(
                layout, "fp32", world, o)
          : seqpar::make_trainer<Tiny, seqpar::Cpu, seqpar::Precisions<seqpar::Fp32>, TinyPlans<2>>(
                layout, "fp32", world, o);
  // Refuses (every rank alike) before anything is written; Ctrl-C stops at a step boundary.
  seqpar::TrainingRun run(
      t, world, {.output_dir = out, .total_steps = steps, .save_steps = 20, .resume = resume});
  if (world.rank() == 0)
    std::printf("train_tiny: %lld parameters, plan %s on %d rank(s), from step %lld\n",
                static_cast<long long>(Tiny::parameter_count), layout.name().c_str(), ranks,
                static_cast<long long>(run.step()));
  while (run.running()) {
    const seqpar::StepStats st = t.step(counting_batch(run.step()));
    run.after_step(st);
    if (world.rank() == 0 && (st.step % 10 == 1 || st.step == steps))
      std::printf("step %4lld  loss %.4f  grad norm %.3f  lr %.2e  %.0f tokens/s  peak %.1f MiB\n",
                  static_cast<long long>(st.step), st.loss, st.grad_norm, st.lr, st.tokens_per_s,
                  static_cast<double>(st.memory.total_peak) / (1 << 20));
  }
  const seqpar::RunResult r = run.finish();
  if (r.stop && world.rank() == 0)
    std::printf("stopped after step %lld by %s; continue with --resume\n",
                static_cast<long long>(run.step()), r.stop.describe().c_str());
}

// train_tiny: a small BLOOM trained from scratch on two in-process ranks with ZeRO-2,
// printing its loss curve. The data is synthetic: each row counts from a random start
// with a random stride (a, a + k, a + 2k, ... modulo the vocabulary), so the next token
// follows from the last two; a model that learns this drives the loss from log(vocab)
// towards zero.
//
//   train_tiny [steps] [plan]      plan: single | zero2 (default) | tp2
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "seqpar/seqpar.hpp"

namespace {
using Tiny =
    seqpar::Bloom<seqpar::BloomConfig{.vocab_size = 512, .hidden = 128, .layers = 4, .heads = 4}>;
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

template <class Plan>
void train(int ranks, int steps) {
  seqpar::TrainOptions o;
  o.schedule.peak = 3e-3;
  o.schedule.warmup = 10;
  o.schedule.total = steps;
  o.schedule.decay = seqpar::LrDecay::cosine;
  o.weight_decay = 0.01;
  o.micro_batch_rows = 4;
  seqpar::run_ranks(ranks, [&](seqpar::ThreadComm& comm) {
    seqpar::Trainer<Tiny, Plan> t(comm, o);
    if (comm.rank() == 0)
      std::printf("train_tiny: %lld parameters, %d rank(s), %lld tokens per step\n",
                  static_cast<long long>(Tiny::parameter_count), ranks,
                  static_cast<long long>(kRows * kSeq));
    for (int s = 0; s < steps; ++s) {
      const auto st = t.step(counting_batch(s));
      if (comm.rank() == 0 && (s % 10 == 0 || s == steps - 1))
        std::printf(
            "step %4lld  loss %.4f  grad norm %.3f  lr %.2e  %.0f tokens/s  peak %.1f MiB\n",
            static_cast<long long>(st.step), st.loss, st.grad_norm, st.lr, st.tokens_per_s,
            static_cast<double>(st.memory.total_peak) / (1 << 20));
    }
  });
}
}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 120;
  const std::string plan = argc > 2 ? argv[2] : "zero2";
  try {
    if (plan == "single") {
      train<seqpar::Replicated<1>>(1, steps);
    } else if (plan == "zero2") {
      train<seqpar::Sharded<seqpar::Zero2, 2>>(2, steps);
    } else if (plan == "tp2") {
      train<seqpar::TP2>(2, steps);
    } else {
      std::fprintf(stderr, "train_tiny: unknown plan '%s' (single, zero2, tp2)\n", plan.c_str());
      return 2;
    }
    std::printf("log(vocab) = %.3f: a loss far below it means the model learned to count\n",
                std::log(static_cast<double>(Tiny::vocab_size)));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_tiny: %s\n", e.what());
    return 1;
  }
  return 0;
}

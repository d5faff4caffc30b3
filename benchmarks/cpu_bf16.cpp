// bf16 on the CPU against fp32: one SeqGPT-560M training step (forward, backward, clipping,
// AdamW) in a precision and a shape, or the loss curve of the tiny model in fp32 and bf16.
// tools/compare_cpu_bf16.py runs it beside transformers in fp32 and under CPU autocast and
// prints the table of docs/cpu.md; each run is a process of its own, so that its peak
// resident memory is its own.
//
//   bench_cpu_bf16 step PRECISION ROWS SEQ [STEPS]   fp32 | bf16; one warm-up step, then
//                                                    STEPS (default 3) timed; prints JSON
//   bench_cpu_bf16 profile PRECISION ROWS SEQ [STEPS] the GEMM and bandwidth probes, one
//                                                    warm-up step, then STEPS (default 2)
//                                                    profiled: where a step's time goes, as
//                                                    a table (core/profile.hpp), then JSON
//   bench_cpu_bf16 curve [STEPS]                     the tiny model in fp32 and bf16 (default
//                                                    50 steps); prints JSON
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "seqpar/backend/cpu/ops.hpp"
#include "seqpar/backend/cpu/probes.hpp"
#include "seqpar/core/profile.hpp"
#include "seqpar/core/rng.hpp"
#include "seqpar/train/trainer.hpp"

namespace {
using namespace seqpar;

// train_tiny's model and data (examples/train_tiny): counting rows with a random start and
// stride, whose next token follows from the last two, so the loss falls from log(vocab).
using Tiny = Bloom<BloomConfig{.vocab_size = 512, .hidden = 128, .layers = 4, .heads = 4}>;

Batch counting_batch(std::int64_t step) {
  constexpr std::int64_t rows = 16, seq = 32, tokens = Tiny::vocab_size - 4;
  Batch b(rows, seq);
  const CounterRng rng(static_cast<std::uint64_t>(step), "train_tiny");
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto start =
        static_cast<std::int64_t>(rng.bits(static_cast<std::uint64_t>(r), 0) % tokens);
    const auto stride =
        1 + static_cast<std::int64_t>(rng.bits(static_cast<std::uint64_t>(r), 1) % 8);
    for (std::int64_t t = 0; t < seq; ++t) {
      const auto i = static_cast<std::size_t>(r * seq + t);
      b.input_ids[i] = static_cast<std::int32_t>(4 + (start + t * stride) % tokens);
      if (t >= 2) b.labels[i] = b.input_ids[i];
    }
  }
  return b;
}

// Random ids, labels = ids (what tools/bench_torch_step.py feeds transformers).
Batch random_batch(std::int64_t rows, std::int64_t seq, std::int64_t vocab) {
  Batch b(rows, seq);
  const CounterRng rng(1, "bench");
  for (std::size_t i = 0; i < b.input_ids.size(); ++i) {
    b.input_ids[i] = static_cast<std::int32_t>(rng.bits(i) % static_cast<std::uint64_t>(vocab));
    b.labels[i] = b.input_ids[i];
  }
  return b;
}

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

template <class Prec>
int step(std::int64_t rows, std::int64_t seq, int steps) {
  using M = SeqGPT560M;
  TrainOptions o;  // as tools/bench_torch_step.py's AdamW: lr 1e-4, betas 0.9 / 0.95, decay 0.1
  o.schedule.peak = 1e-4;
  o.beta2 = 0.95;
  o.weight_decay = 0.1;
  Trainer<M, Replicated<1>, Cpu, Prec> t(o);
  const Batch b = random_batch(rows, seq, M::vocab_size);
  double loss = t.step(b).loss;  // warm-up: first-touch allocations
  std::vector<double> wall, cpu;
  for (int s = 0; s < steps; ++s) {
    const double c0 = cpu_seconds();
    const auto w0 = std::chrono::steady_clock::now();
    loss = t.step(b).loss;
    wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count());
    cpu.push_back(cpu_seconds() - c0);
  }
  using T = typename Trainer<M, Replicated<1>, Cpu, Prec>::T;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double tokens = static_cast<double>(rows * seq);
  const double flops = tokens * (6.0 * M::parameter_count + 12.0 * M::layers * M::hidden * seq);
  std::printf(
      "{\"precision\": \"%s\", \"rows\": %lld, \"seq\": %lld, \"steps\": %d, \"ms_per_step\": [",
      dtype_name(Prec::dtype).data(), static_cast<long long>(rows), static_cast<long long>(seq),
      steps);
  for (std::size_t i = 0; i < wall.size(); ++i) std::printf("%s%.1f", i ? ", " : "", 1e3 * wall[i]);
  std::printf("], \"cpu_ms_per_step\": [");
  for (std::size_t i = 0; i < cpu.size(); ++i) std::printf("%s%.1f", i ? ", " : "", 1e3 * cpu[i]);
  std::printf(
      "], \"median_ms\": %.1f, \"gflops\": %.2f, \"loss\": %.6f, \"arena_peak_bytes\": %lld, "
      "\"max_rss_bytes\": %lld, \"gemm_path\": \"%s\"}\n",
      1e3 * median(wall), flops / median(wall) * 1e-9, loss,
      static_cast<long long>(t.memory().total_peak), static_cast<long long>(ru.ru_maxrss) * 1024,
      Ops<Cpu>::gemm_path<T>());
  return 0;
}

template <class Prec>
int profile_step(std::int64_t rows, std::int64_t seq, int steps) {
  using M = SeqGPT560M;
  using T = ComputeType<Prec, Cpu>;
  const profile::Peaks peaks = probe_peaks<T>();
  TrainOptions o;
  o.schedule.peak = 1e-4;
  o.beta2 = 0.95;
  o.weight_decay = 0.1;
  Trainer<M, Replicated<1>, Cpu, Prec> t(o);
  const Batch b = random_batch(rows, seq, M::vocab_size);
  t.step(b);
  profile::reset();
  profile::enable();
  for (int s = 0; s < steps; ++s) t.step(b);
  profile::enable(false);
  const profile::Totals totals = profile::totals();
  const double tokens = static_cast<double>(rows * seq);
  const double flops = tokens * (6.0 * M::parameter_count + 12.0 * M::layers * M::hidden * seq);
  std::printf("SeqGPT-560M, %s, %lld x %lld, %d steps, %d threads; GEMM: %s\n\n",
              dtype_name(Prec::dtype).data(), static_cast<long long>(rows),
              static_cast<long long>(seq), steps, peaks.threads, Ops<Cpu>::gemm_path<T>());
  std::fputs(profile::table(totals, peaks, flops).c_str(), stdout);
  std::printf(
      "{\"precision\": \"%s\", \"rows\": %lld, \"seq\": %lld, \"steps\": %d, "
      "\"step_s\": %.4f, \"gemm_probe_gflops\": %.2f, \"bandwidth_gbs\": %.2f, "
      "\"packing_thread_s\": %.4f, \"phases\": {",
      dtype_name(Prec::dtype).data(), static_cast<long long>(rows), static_cast<long long>(seq),
      steps, totals.step_seconds / steps, 1e-9 * peaks.gemm_flops_per_s, 1e-9 * peaks.bytes_per_s,
      totals.packing_thread_seconds / steps);
  for (std::size_t i = 0; i < profile::phase_count; ++i)
    std::printf("%s\"%s\": [%.4f, %.4g, %.4g]", i ? ", " : "", profile::phases[i].name.data(),
                totals.seconds[i] / steps, totals.flops[i] / steps, totals.bytes[i] / steps);
  std::printf("}}\n");
  return 0;
}

template <class Prec>
std::vector<double> curve(int steps) {
  TrainOptions o;
  o.schedule.peak = 3e-3;
  o.schedule.warmup = 5;
  o.schedule.total = steps;
  o.weight_decay = 0.01;
  Trainer<Tiny, Replicated<1>, Cpu, Prec> t(o);
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) losses.push_back(t.step(counting_batch(s)).loss);
  return losses;
}

int curves(int steps) {
  const auto fp32 = curve<Fp32>(steps), bf16 = curve<Bf16Mixed>(steps);
  std::printf("{\"steps\": %d, \"fp32\": [", steps);
  for (std::size_t i = 0; i < fp32.size(); ++i) std::printf("%s%.6f", i ? ", " : "", fp32[i]);
  std::printf("], \"bf16\": [");
  for (std::size_t i = 0; i < bf16.size(); ++i) std::printf("%s%.6f", i ? ", " : "", bf16[i]);
  std::printf("]}\n");
  return 0;
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: bench_cpu_bf16 step fp32|bf16 ROWS SEQ [STEPS]\n"
               "       bench_cpu_bf16 profile fp32|bf16 ROWS SEQ [STEPS]\n"
               "       bench_cpu_bf16 curve [STEPS]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  if (what == "curve") return curves(argc > 2 ? std::atoi(argv[2]) : 50);
  if ((what != "step" && what != "profile") || argc < 5) usage();
  const std::string precision = argv[2];
  const std::int64_t rows = std::atoll(argv[3]), seq = std::atoll(argv[4]);
  const int steps = argc > 5 ? std::atoi(argv[5]) : what == "step" ? 3 : 2;
  if (rows < 1 || seq < 2 || steps < 1) usage();
  const bool profiled = what == "profile";
  if (precision == "fp32")
    return profiled ? profile_step<Fp32>(rows, seq, steps) : step<Fp32>(rows, seq, steps);
  if (precision == "bf16")
    return profiled ? profile_step<Bf16Mixed>(rows, seq, steps) : step<Bf16Mixed>(rows, seq, steps);
  usage();
}

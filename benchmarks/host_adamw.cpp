// How fast does the host AdamW of offloaded optimizer state run, per path and thread
// count, against a plain loop? One step over a slice of SeqGPT-560M's 559,214,592
// parameters (an eighth by default: 69.9M parameters, 1.1 GB of weights, gradients and
// moments, which a shared machine can spare; SEQPAR_ADAM_PARAMS sets the count) in fp32. Counters:
// params_per_s, and GB_per_s of memory traffic (28 bytes a parameter: p, g, m, v read, p, m, v
// written). Scale a slice's time by 559,214,592 / params for the whole model.
// tools/bench_host_adamw.py times torch.optim.AdamW(foreach=True) on the same count.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "seqpar/optim/adamw.hpp"
#include "seqpar/optim/host_adamw.hpp"

using namespace seqpar;

namespace {

constexpr std::int64_t seqgpt_params = 559'214'592;

std::int64_t param_count() {
  if (const char* s = std::getenv("SEQPAR_ADAM_PARAMS")) return std::atoll(s);
  return seqgpt_params / 8;
}

struct Arrays {
  std::vector<float> p, g, m, v;
  explicit Arrays(std::int64_t n)
      : p(static_cast<std::size_t>(n)),
        g(static_cast<std::size_t>(n)),
        m(static_cast<std::size_t>(n)),
        v(static_cast<std::size_t>(n)) {
    // Not zeros: weights, gradients and moments as a few steps in.
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      const auto k = static_cast<std::size_t>(i);
      p[k] = 0.02f * static_cast<float>((i * 7919) % 2001 - 1000) / 1000.0f;
      g[k] = 1e-3f * static_cast<float>((i * 104729) % 2001 - 1000) / 1000.0f;
      m[k] = 0.1f * g[k];
      v[k] = 1e-3f * g[k] * g[k] + 1e-12f;
    }
  }
};

Arrays& arrays() {
  static Arrays a(param_count());
  return a;
}

const kernels::AdamCoeffs kCoeffs = adam_coeffs({0.9, 0.999, 1e-8, 0.01}, 2e-5, 10);

void report(benchmark::State& state, std::int64_t n) {
  state.counters["params_per_s"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB_per_s"] = benchmark::Counter(static_cast<double>(n) * 28 / 1e9,
                                                  benchmark::Counter::kIsIterationInvariantRate);
  // Seconds a step of the whole model takes at this rate: time per step x 559M / n.
  state.counters["seqgpt_step_s"] = benchmark::Counter(
      static_cast<double>(n) / static_cast<double>(seqgpt_params),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// The textbook loop a user would write (torch.optim.AdamW's single-tensor formula, decay
// on every element), compiled as this repository's programs are.
void BM_plain_loop(benchmark::State& state) {
  auto& a = arrays();
  const auto n = static_cast<std::int64_t>(a.p.size());
  const int threads = static_cast<int>(state.range(0));
  const kernels::AdamCoeffs c = kCoeffs;
  for (auto _ : state) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (std::int64_t i = 0; i < n; ++i) {
      const auto k = static_cast<std::size_t>(i);
      float p = a.p[k], m = a.m[k], v = a.v[k];
      const float g = a.g[k];
      p *= 1 - c.lr * c.weight_decay;
      m = c.beta1 * m + (1 - c.beta1) * g;
      v = c.beta2 * v + (1 - c.beta2) * g * g;
      p -= c.step_size * m / (std::sqrt(v) / c.bias_correction2_sqrt + c.eps);
      a.p[k] = p;
      a.m[k] = m;
      a.v[k] = v;
    }
    benchmark::ClobberMemory();
  }
  report(state, n);
}
BENCHMARK(BM_plain_loop)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_host_adamw(benchmark::State& state) {
  const auto isa = static_cast<HostIsa>(state.range(0));
  if (!host_isa_available(isa)) {
    state.SkipWithError("this CPU does not have this path");
    return;
  }
  auto& a = arrays();
  const auto n = static_cast<std::int64_t>(a.p.size());
  const auto decay = kernels::Segments<bool>::uniform(n, true);
  for (auto _ : state) {
    host_adamw(a.p.data(), a.g.data(), a.m.data(), a.v.data(), decay, kCoeffs, 1.0f, isa,
               static_cast<int>(state.range(1)));
    benchmark::ClobberMemory();
  }
  state.SetLabel(isa_name(isa));
  report(state, n);
}
BENCHMARK(BM_host_adamw)
    ->ArgNames({"isa", "threads"})
    ->ArgsProduct({{0, 1, 2}, {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

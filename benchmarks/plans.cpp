// Every parallel plan on one small BLOOM (vocab 8192, hidden 256, 4 layers, 8 heads; global
// batch 8 x 128, micro-batches of 2 rows): one optimizer step per iteration on ThreadComm
// ranks, with the bytes each rank sends per step (by axis), its peak memory by category and
// the CPU time of its thread, each the maximum over ranks (CPU time also summed over ranks).
// docs/plans.md shows a measured table next to the ZeRO, ring, tensor and pipeline figures;
// tools/plans_table.py makes it from --benchmark_format=json output.
//
// The ranks are threads of this process, each limited to one OpenMP thread, so a plan with
// more ranks than the machine has cores is oversubscribed: step times compare plans on one
// machine, they are not the speed-up the same plan gets with one core (or GPU) per rank.
#include <benchmark/benchmark.h>
#if defined(_OPENMP)
#include <omp.h>
#endif

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "seqpar/backend/cpu/ops.hpp"
#include "seqpar/comm/thread_comm.hpp"
#include "seqpar/core/rng.hpp"
#include "seqpar/train/trainer.hpp"

namespace {
using namespace seqpar;
using Small = Bloom<BloomConfig{.vocab_size = 8192, .hidden = 256, .layers = 4, .heads = 8}>;
constexpr std::int64_t kRows = 8, kSeq = 128, kMicroRows = 2;
// Iterations per plan after one untimed step (first-touch allocations, AdamW state).
constexpr int kTimedSteps = 2;

Batch make_batch() {
  Batch b(kRows, kSeq);
  const CounterRng rng(1, "bench-plans");
  for (std::size_t i = 0; i < b.input_ids.size(); ++i) {
    b.input_ids[i] = static_cast<std::int32_t>(rng.bits(i) % Small::vocab_size);
    b.labels[i] = b.input_ids[i];
  }
  return b;
}

TrainOptions make_options() {
  TrainOptions o;
  o.schedule.peak = 1e-4;
  o.weight_decay = 0.01;
  o.micro_batch_rows = kMicroRows;
  return o;
}

// CPU seconds of the calling thread: a rank's own work, whatever else runs on the cores
// (ThreadComm waits on condition variables, so waiting costs none).
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// What one rank saw over its timed steps; bytes and CPU seconds are per step.
struct RankResult {
  double loss = 0;  // of the last step: the same for every plan, up to fp32 rounding
  double cpu = 0;
  std::uint64_t sent_data = 0, sent_tensor = 0, sent_pipeline = 0;
  std::int64_t state = 0, activations = 0, buffers = 0, transient = 0, peak = 0;
};

template <class Plan>
void bm_plan(benchmark::State& state) {
  constexpr int n = PlanTraits<Plan>::world_size;
  const Batch batch = make_batch();
  std::vector<RankResult> results(n);
  std::vector<double> seconds;  // per timed step, world barrier to world barrier (rank 0)
  run_ranks(n, [&](ThreadComm& world) {
#if defined(_OPENMP)
    omp_set_num_threads(1);  // this thread only: n ranks share the cores, one thread each
#endif
    Trainer<Small, Plan> t(world, make_options());
    t.step(batch);
    const CommStats d0 = t.data_stats(), t0 = t.tensor_stats(), p0 = t.mesh().pipeline.stats();
    StepStats last;
    double cpu = 0;
    for (int s = 0; s < kTimedSteps; ++s) {
      world.barrier();
      const auto start = std::chrono::steady_clock::now();
      const double cpu0 = thread_cpu_seconds();
      last = t.step(batch);
      cpu += thread_cpu_seconds() - cpu0;
      world.barrier();
      if (world.rank() == 0)
        seconds.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    const auto per_step = [](const CommStats& now, const CommStats& before) {
      return (now.total_bytes_sent() - before.total_bytes_sent()) / kTimedSteps;
    };
    const MemoryStats& m = last.memory;
    results[static_cast<std::size_t>(world.rank())] = {
        last.loss,
        cpu / kTimedSteps,
        per_step(t.data_stats(), d0),
        per_step(t.tensor_stats(), t0),
        per_step(t.mesh().pipeline.stats(), p0),
        m.peak_of(Memory::parameters) + m.peak_of(Memory::gradients) + m.peak_of(Memory::optimizer),
        m.peak_of(Memory::activations),
        m.peak_of(Memory::buffers),
        m.peak_of(Memory::gathered_parameters) + m.peak_of(Memory::unreduced_gradients),
        m.total_peak};
  });

  std::size_t i = 0;
  for (auto _ : state) state.SetIterationTime(seconds[i++ % seconds.size()]);

  RankResult worst;
  std::uint64_t sent = 0;
  double cpu_sum = 0;
  for (const auto& r : results) {
    cpu_sum += r.cpu;
    worst.cpu = std::max(worst.cpu, r.cpu);
    sent = std::max(sent, r.sent_data + r.sent_tensor + r.sent_pipeline);
    worst.sent_data = std::max(worst.sent_data, r.sent_data);
    worst.sent_tensor = std::max(worst.sent_tensor, r.sent_tensor);
    worst.sent_pipeline = std::max(worst.sent_pipeline, r.sent_pipeline);
    worst.state = std::max(worst.state, r.state);
    worst.activations = std::max(worst.activations, r.activations);
    worst.buffers = std::max(worst.buffers, r.buffers);
    worst.transient = std::max(worst.transient, r.transient);
    worst.peak = std::max(worst.peak, r.peak);
  }
  const auto bytes = [](double v) {
    return benchmark::Counter(v, benchmark::Counter::kDefaults, benchmark::Counter::kIs1024);
  };
  state.counters["ranks"] = n;
  state.counters["loss"] = results[0].loss;
  // CPU milliseconds per step: of all ranks together (the work the plan costs) and of the
  // busiest rank (what bounds the step when every rank has a core of its own).
  state.counters["cpu_ms_all"] = 1e3 * cpu_sum;
  state.counters["cpu_ms_max"] = 1e3 * worst.cpu;
  state.counters["sent"] = bytes(static_cast<double>(sent));
  state.counters["sent_data"] = bytes(static_cast<double>(worst.sent_data));
  state.counters["sent_tensor"] = bytes(static_cast<double>(worst.sent_tensor));
  state.counters["sent_pipeline"] = bytes(static_cast<double>(worst.sent_pipeline));
  state.counters["state_peak"] = bytes(static_cast<double>(worst.state));
  state.counters["act_peak"] = bytes(static_cast<double>(worst.activations));
  state.counters["buffer_peak"] = bytes(static_cast<double>(worst.buffers));
  // ZeRO-2/3's unit buffers: gathered parameters and unreduced gradients (each at its peak)
  state.counters["transient_peak"] = bytes(static_cast<double>(worst.transient));
  state.counters["total_peak"] = bytes(static_cast<double>(worst.peak));
}

template <class Plan>
void add(const char* name) {
  benchmark::RegisterBenchmark(name, bm_plan<Plan>)
      ->Iterations(kTimedSteps)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
}

[[maybe_unused]] const bool registered = [] {
  add<Replicated<1>>("Replicated<1>");
  add<Replicated<2>>("Replicated<2>");
  add<Replicated<4>>("Replicated<4>");
  add<Sharded<Zero1, 4>>("Sharded<Zero1,4>");
  add<Sharded<Zero2, 4>>("Sharded<Zero2,4>");
  add<Sharded<Zero3, 4>>("Sharded<Zero3,4>");
  add<TP2>("TP2");
  add<TP4>("TP4");
  add<PP2>("PP2");
  add<Pipeline<2, GPipe>>("Pipeline<2,GPipe>");  // 4 micro-batches > 2 stages: GPipe holds more
  add<PP4>("PP4");
  add<Pipeline<4, GPipe>>("Pipeline<4,GPipe>");
  add<Hybrid<TP2, DP2>>("Hybrid<TP2,DP2>");
  add<Hybrid<TP2, PP2>>("Hybrid<TP2,PP2>");
  add<Hybrid<TP2, PP2, DP2>>("Hybrid<TP2,PP2,DP2>");
  add<Hybrid<TP2, Sharded<Zero3, 2>>>("Hybrid<TP2,Sharded<Zero3,2>>");
  add<Hybrid<TP2, DP4>>("Hybrid<TP2,DP4>");
  return true;
}();
}  // namespace

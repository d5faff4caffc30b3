// What the communicators' checks cost (comm/fingerprint.hpp; SEQPAR_COMM_CHECKS): the step
// time of a tiny and of a mid-size BLOOM under TensorSplit<2> (the plan that makes the most
// collectives a step), with the checks on and off, side by side in one run: blocks of steps
// alternate between the two, each on a trainer of its own.
//
//   bench_comm_checks [--steps N] [--blocks B]                  ThreadComm: 2 threads
//   mpirun -np 2 bench_comm_checks --mpi [--steps N] [--blocks B]  MpiComm: 2 processes
//
// Under MpiComm "on" is one more all-reduce of 6 integers before each collective; under
// ThreadComm, whose rendezvous compares the calls either way, it is the history alone. A
// step is timed by rank 0 between two barriers of its communicator; the table gives the
// median of all blocks' steps and the collectives one rank makes a step. A last row times
// a bare all_reduce of one float (microseconds a call), the fingerprint's whole price.
#if defined(_OPENMP)
#include <omp.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "seqpar/backend/cpu/ops.hpp"
#include "seqpar/comm/thread_comm.hpp"
#include "seqpar/core/rng.hpp"
#include "seqpar/train/trainer.hpp"
#if defined(SEQPAR_WITH_MPI)
#include "seqpar/comm/mpi_comm.hpp"
#endif

namespace {
using namespace seqpar;
using Plan = TensorSplit<2>;
using Tiny = Bloom<BloomConfig{.vocab_size = 256, .hidden = 64, .layers = 2, .heads = 4}>;
using Mid = Bloom<BloomConfig{.vocab_size = 8192, .hidden = 256, .layers = 4, .heads = 8}>;

template <class M>
Batch make_batch(std::int64_t rows, std::int64_t seq) {
  Batch b(rows, seq);
  const CounterRng rng(3, "bench-comm-checks");
  for (std::size_t i = 0; i < b.input_ids.size(); ++i) {
    b.input_ids[i] = static_cast<std::int32_t>(rng.bits(i) % M::vocab_size);
    b.labels[i] = b.input_ids[i];
  }
  return b;
}

struct Block {
  std::vector<double> seconds;    // per step, on rank 0
  std::uint64_t collectives = 0;  // per step, this rank
};

// One untimed step, then `steps` timed ones on a new trainer over `world`.
template <class M>
Block run_block(AnyComm world, const Batch& batch, int steps) {
#if defined(_OPENMP)
  omp_set_num_threads(1);  // the ranks share the cores, one thread each
#endif
  TrainOptions o;
  o.lr = 1e-4;
  Trainer<M, Plan> t(world, o);
  t.step(batch);
  const auto calls = [&] {
    return t.tensor_stats().total_calls() + t.data_stats().total_calls() +
           t.mesh().pipeline.stats().total_calls() + world.stats().total_calls();
  };
  const std::uint64_t before = calls();
  Block b;
  for (int s = 0; s < steps; ++s) {
    world.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    t.step(batch);
    world.barrier();
    if (world.rank() == 0)
      b.seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  b.collectives = (calls() - before) / static_cast<std::uint64_t>(steps) - 2;  // the barriers
  return b;
}

// `calls` bare all-reduces of one float on `world`, timed by rank 0 (one "step" each).
Block bare_all_reduces(AnyComm world, int calls) {
  Block b;
  float x = 1;
  world.barrier();
  for (int i = 0; i < calls; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    world.all_reduce(&x, 1, ReduceOp::sum);
    if (world.rank() == 0)
      b.seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  b.collectives = 1;
  return b;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Result {
  std::vector<double> on, off;
  std::uint64_t collectives = 0;
};

void print(const char* transport, const char* model, const Result& r, double unit = 1e3) {
  const double on = median(r.on) * unit, off = median(r.off) * unit;
  std::printf("%-10s %-5s %6llu %12.3f %12.3f %+9.1f %%\n", transport, model,
              static_cast<unsigned long long>(r.collectives), off, on, 100.0 * (on - off) / off);
  std::fflush(stdout);
}

void header(int steps, int blocks) {
  std::printf("TensorSplit<2>, %d blocks of %d steps per setting, median step\n", blocks, steps);
  std::printf("%-10s %-5s %6s %12s %12s %11s\n", "transport", "model", "calls", "off ms", "on ms",
              "on vs off");
  std::printf("(model bare: one all_reduce of one float, in microseconds)\n");
}

// `block(checks_on)` runs one block on every rank and returns rank 0's.
template <class RunBlock>
Result alternate(int blocks, RunBlock&& block) {
  Result r;
  for (int k = 0; k < blocks; ++k)
    for (const bool on : {false, true}) {
      const Block b = block(on);
      (on ? r.on : r.off).insert((on ? r.on : r.off).end(), b.seconds.begin(), b.seconds.end());
      r.collectives = b.collectives;
    }
  return r;
}

// `block(world)` on 2 ThreadComm ranks, the checks on or off, for each block.
template <class RunBlock>
Result on_threads(int blocks, RunBlock&& block) {
  return alternate(blocks, [&](bool on) {
    Block rank0;
    run_ranks(2, [&](ThreadComm& world) {
      world.set_checks(on);
      Block b = block(AnyComm(world));
      if (world.rank() == 0) rank0 = std::move(b);
    });
    return rank0;
  });
}

#if defined(SEQPAR_WITH_MPI)
// `block(world)` on two communicators of the same ranks, one with the checks and one
// without (the trainers' groups, split from them, keep their setting), block by block.
template <class RunBlock>
Result on_mpi(MpiComm& world, int blocks, RunBlock&& block) {
  MpiComm with = world.split(0, world.rank()), without = world.split(0, world.rank());
  with.set_checks(true);
  without.set_checks(false);
  return alternate(blocks, [&](bool on) { return block(AnyComm(on ? with : without)); });
}
#endif

}  // namespace

int main(int argc, char** argv) {
  int steps = 20, blocks = 5;
  bool mpi = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--steps" && i + 1 < argc) steps = std::stoi(argv[++i]);
    if (a == "--blocks" && i + 1 < argc) blocks = std::stoi(argv[++i]);
    if (a == "--mpi") mpi = true;
  }
  const Batch tiny = make_batch<Tiny>(4, 32), mid = make_batch<Mid>(8, 128);
  const int mid_steps = std::max(1, steps / 4);
  const auto tiny_block = [&](AnyComm w) { return run_block<Tiny>(w, tiny, steps); };
  const auto mid_block = [&](AnyComm w) { return run_block<Mid>(w, mid, mid_steps); };
  const auto bare_block = [&](AnyComm w) { return bare_all_reduces(w, 200 * steps); };
  if (!mpi) {
    header(steps, blocks);
    print("ThreadComm", "tiny", on_threads(blocks, tiny_block));
    print("ThreadComm", "mid", on_threads(blocks, mid_block));
    print("ThreadComm", "bare", on_threads(blocks, bare_block), 1e6);
    return 0;
  }
#if defined(SEQPAR_WITH_MPI)
  return mpi_main(argc, argv, [&](MpiComm& world) {
    if (world.rank() == 0) header(steps, blocks);
    const Result t = on_mpi(world, blocks, tiny_block);
    if (world.rank() == 0) print("MpiComm", "tiny", t);
    const Result m = on_mpi(world, blocks, mid_block);
    if (world.rank() == 0) print("MpiComm", "mid", m);
    const Result b = on_mpi(world, blocks, bare_block);
    if (world.rank() == 0) print("MpiComm", "bare", b, 1e6);
  });
#else
  std::fprintf(stderr, "bench_comm_checks: built without MPI; --mpi is not available\n");
  return 2;
#endif
}

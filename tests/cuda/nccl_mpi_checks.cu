// nccl_mpi_checks: NcclComm between processes, one GPU each, started by mpirun:
//   mpirun -np N nccl_mpi_checks        (N >= 2; the processes of a node take GPUs 0, 1, ...)
// Every collective for float, double, int64, bf16 and fp16 device buffers and for host
// scalars against the serial sums, async calls joined, sendrecv between pairs of ranks;
// then trainers of the tiny model under data-parallel, ZeRO, tensor and pipeline plans
// (fp32 and bf16) against the one-rank trainer, which every rank also runs on its own GPU,
// and a checkpoint written under ZeRO-3 that the one-rank trainer resumes.
// Exits 0 when every check passed, 1 when one failed, and 77 (nothing checked) when a node
// has fewer GPUs than processes.
#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "seqpar/backend/cuda/ops.hpp"
#include "seqpar/comm/nccl_comm.hpp"
#include "seqpar/train/trainer.hpp"
#include "trainer_reference.hpp"

#if !defined(SEQPAR_HAS_NCCL_COMM) || !defined(SEQPAR_HAS_MPI_COMM)
#error "nccl_mpi_checks needs nvcc, <nccl.h> and <mpi.h>"
#endif

using namespace seqpar;
using namespace seqpar::test;

namespace {

struct Checker {
  int rank = 0;
  std::int64_t checks = 0, failures = 0;
  void expect(bool ok, const std::string& what) {
    ++checks;
    if (ok) return;
    ++failures;
    std::fprintf(stderr, "rank %d: check failed: %s\n", rank, what.c_str());
  }
};

// Storage values as floats and back: detail::to_float / from_float, and casts for double.
template <class T>
float as_float(T x) {
  if constexpr (std::is_same_v<T, double>)
    return static_cast<float>(x);
  else
    return detail::to_float(x);
}

template <class T>
T from_float(float x) {
  if constexpr (std::is_same_v<T, double>)
    return x;
  else
    return detail::from_float<T>(x);
}

// Rank r's element i: a small integer, so that every sum over up to 8 ranks is exact in
// every type (below 256, which bf16 holds exactly).
float input(int r, std::size_t i) {
  return static_cast<float>((r + 1) * static_cast<int>(i % 7 + 1));
}

template <class T>
std::vector<float> download(const Buffer<T, DeviceArena<Cuda>>& b) {
  std::vector<T> h(b.size());
  Ops<Cuda>::download(h.data(), b.data(), static_cast<std::int64_t>(b.size()));
  std::vector<float> out(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) out[i] = as_float(h[i]);
  return out;
}

template <class T>
Buffer<T, DeviceArena<Cuda>> device_inputs(DeviceArena<Cuda>& arena, int r, std::size_t n) {
  std::vector<T> h(n);
  for (std::size_t i = 0; i < n; ++i) h[i] = from_float<T>(input(r, i));
  Buffer<T, DeviceArena<Cuda>> b(arena, n, Memory::buffers);
  Ops<Cuda>::upload(b.data(), h.data(), static_cast<std::int64_t>(n));
  return b;
}

// Every collective on device buffers of storage type T (through AnyComm, which passes the
// 16-bit types as their bits), against the serial results.
template <class T>
void check_collectives(AnyComm& comm, Checker& chk, const std::string& type) {
  const int N = comm.size(), r = comm.rank();
  constexpr std::size_t n = 1031;
  DeviceArena<Cuda> arena;
  const auto all = [&](const std::vector<float>& got, auto want) {
    bool ok = true;
    for (std::size_t i = 0; i < got.size(); ++i) ok = ok && got[i] == want(i);
    return ok;
  };
  const auto sum = [&](std::size_t i) {
    float s = 0;
    for (int k = 0; k < N; ++k) s += input(k, i);
    return s;
  };
  auto a = device_inputs<T>(arena, r, n);
  comm.all_reduce(a.data(), n, ReduceOp::sum);
  chk.expect(all(download(a), sum), type + " all_reduce sum");
  a = device_inputs<T>(arena, r, n);
  comm.all_reduce(a.data(), n, ReduceOp::max);
  chk.expect(all(download(a), [&](std::size_t i) { return input(N - 1, i); }),
             type + " all_reduce max");

  auto big = device_inputs<T>(arena, r, n * N);
  Buffer<T, DeviceArena<Cuda>> block(arena, n, Memory::buffers),
      gathered(arena, n * N, Memory::buffers);
  comm.reduce_scatter(big.data(), block.data(), n, ReduceOp::sum);
  chk.expect(all(download(block), [&](std::size_t i) { return sum(r * n + i); }),
             type + " reduce_scatter");
  comm.all_gather(block.data(), gathered.data(), n);
  chk.expect(all(download(gathered), [&](std::size_t i) { return sum(i); }), type + " all_gather");

  a = device_inputs<T>(arena, r, n);
  comm.broadcast(a.data(), n, N - 1);
  chk.expect(all(download(a), [&](std::size_t i) { return input(N - 1, i); }), type + " broadcast");

  // async: three queued; the gather joined by its ticket, then all of them; then read
  a = device_inputs<T>(arena, r, n);
  Buffer<T, DeviceArena<Cuda>> regathered(arena, n * N, Memory::buffers);
  const CommTicket gather = comm.all_gather_async(block.data(), regathered.data(), n);
  comm.all_reduce_async(a.data(), n, ReduceOp::sum);
  comm.join(gather);
  chk.expect(all(download(regathered), [&](std::size_t i) { return sum(i); }),
             type + " all_gather_async");
  comm.reduce_scatter_async(big.data(), block.data(), n, ReduceOp::sum);
  comm.join();
  chk.expect(all(download(a), sum), type + " all_reduce_async");
  chk.expect(all(download(block), [&](std::size_t i) { return sum(r * n + i); }),
             type + " reduce_scatter_async");

  // sendrecv between ranks 2k and 2k + 1 (both send first: one NCCL group each)
  const int peer = r ^ 1;
  if (peer < N) {
    auto mine = device_inputs<T>(arena, r, n);
    Buffer<T, DeviceArena<Cuda>> theirs(arena, n, Memory::buffers);
    comm.sendrecv(mine.data(), n, 0, theirs.data(), n, 0, peer);
    chk.expect(all(download(theirs), [&](std::size_t i) { return input(peer, i); }),
               type + " sendrecv");
  }
}

constexpr int kSteps = 3;

// The one-rank trainer's losses, computed once per precision and batch (every plan is
// checked against them).
template <class Prec>
const std::vector<double>& one_rank_losses(std::int64_t rows) {
  static std::map<std::int64_t, std::vector<double>> by_rows;
  std::vector<double>& losses = by_rows[rows];
  if (losses.empty()) {
    Trainer<TrainTiny, Replicated<1>, Cuda, Prec> t(trainer_options());
    for (int s = 0; s < kSteps; ++s) losses.push_back(t.step(trainer_batch(s, rows)).loss);
  }
  return losses;
}

// Plan over the world against the one-rank trainer: losses to 1e-5 (fp32) or 2e-2 (bf16).
template <class Plan, class Prec>
void check_plan(NcclComm& world, Checker& chk, const std::string& name) {
  const std::int64_t rows = 4 * world.size();
  const std::vector<double>& want = one_rank_losses<Prec>(rows);
  Trainer<TrainTiny, Plan, Cuda, Prec> t(world, trainer_options());
  const double tol = std::is_same_v<Prec, Fp32> ? 1e-5 : 2e-2;
  for (int s = 0; s < kSteps; ++s) {
    const double got = t.step(trainer_batch(s, rows)).loss;
    chk.expect(std::abs(got - want[s]) <= tol * std::abs(want[s]),
               name + " step " + std::to_string(s) + ": loss " + std::to_string(got) +
                   ", one rank " + std::to_string(want[s]));
  }
}

// A checkpoint written by ZeRO-3 over every rank, resumed by a one-rank trainer on rank 0.
void check_checkpoint(NcclComm& world, Checker& chk) {
  const std::int64_t rows = 4 * world.size();
  const std::string path = "/tmp/seqpar_nccl_mpi_checks.safetensors";
  {
    Trainer<TrainTiny, Sharded<Zero3>, Cuda, Fp32> t(world, trainer_options());
    for (int s = 0; s < 2; ++s) t.step(trainer_batch(s, rows));
    t.save_checkpoint(path);
  }
  if (world.rank() != 0) return;
  const double want = one_rank_losses<Fp32>(rows)[2];
  TrainOptions o = trainer_options();
  o.seed = 9;  // overwritten by the load
  Trainer<TrainTiny, Replicated<1>, Cuda, Fp32> resumed(o);
  resumed.load_checkpoint(path);
  std::remove(path.c_str());
  const double got = resumed.step(trainer_batch(2, rows)).loss;
  chk.expect(std::abs(got - want) <= 1e-5 * std::abs(want),
             "ZeRO-3 checkpoint resumed on one rank");
}

int run_checks(MpiComm& mpi) {
  // One GPU per process of a node, or nothing is checked.
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  std::int64_t short_of_gpus = node_local_rank(mpi) >= devices ? 1 : 0;
  mpi.all_reduce(&short_of_gpus, 1, ReduceOp::max);
  if (short_of_gpus) {
    if (mpi.rank() == 0)
      std::printf(
          "nccl_mpi_checks: a node has fewer GPUs than processes (rank 0 sees %d): skipped\n",
          devices);
    return 77;
  }
  NcclComm world(mpi);
  Checker chk{world.rank()};
  const auto t0 = std::chrono::steady_clock::now();
  {
    AnyComm any(world);
    check_collectives<float>(any, chk, "float");
    check_collectives<double>(any, chk, "double");
    check_collectives<__nv_bfloat16>(any, chk, "bf16");
    check_collectives<__half>(any, chk, "fp16");
    double loss = world.rank() + 1.0;
    world.all_reduce(&loss, 1, ReduceOp::sum);
    chk.expect(loss == world.size() * (world.size() + 1) / 2.0, "host double all_reduce");
    std::int64_t count = world.rank();
    world.all_reduce(&count, 1, ReduceOp::max);
    chk.expect(count == world.size() - 1, "host int64 all_reduce max");
  }
  check_plan<Replicated<>, Fp32>(world, chk, "Replicated");
  check_plan<Sharded<Zero1>, Fp32>(world, chk, "ZeRO-1");
  check_plan<Sharded<Zero2>, Fp32>(world, chk, "ZeRO-2");
  check_plan<Sharded<Zero3>, Fp32>(world, chk, "ZeRO-3");
  check_plan<Sharded<Zero2>, Bf16Mixed>(world, chk, "ZeRO-2 bf16");
  if (world.size() % 2 == 0) {
    check_plan<Hybrid<TP2, Replicated<>>, Fp32>(world, chk, "TP2 x DP");
    check_plan<Hybrid<Pipeline<2, OneFOneB>, Replicated<>>, Fp32>(world, chk, "PP2 (1F1B) x DP");
    check_plan<Hybrid<Pipeline<2, GPipe>, Sharded<Zero2>>, Fp32>(world, chk,
                                                                 "PP2 (GPipe) x ZeRO-2");
  }
  if (world.size() % 4 == 0)
    check_plan<Hybrid<TP2, Pipeline<2>, Replicated<>>, Bf16Mixed>(world, chk,
                                                                  "TP2 x PP2 x DP bf16");
  check_checkpoint(world, chk);
  std::int64_t totals[2] = {chk.checks, chk.failures};
  mpi.all_reduce(totals, 2, ReduceOp::sum);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (mpi.rank() == 0)
    std::printf("nccl_mpi_checks: %d ranks, %lld checks, %lld failed, %.1f s\n", mpi.size(),
                static_cast<long long>(totals[0]), static_cast<long long>(totals[1]), s);
  return totals[1] == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return mpi_main(argc, argv, run_checks); }

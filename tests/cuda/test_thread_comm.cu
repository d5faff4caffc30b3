// CudaThreadComm: ThreadComm ranks whose collectives take device buffers (staged through
// pinned host memory), and multi-rank plans of the Trainer on one GPU against the one-rank
// trainer on the same GPU. Test suite "multi-rank" (tools/gpu-check.sh runs it apart).
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cuda_test_util.hpp"
#include "seqpar/backend/cuda/ops.hpp"
#include "seqpar/comm/cuda_thread_comm.hpp"
#include "seqpar/train/trainer.hpp"
#include "trainer_reference.hpp"

using namespace seqpar;
using namespace seqpar::test;

namespace {

// Value of element i on rank r: distinct everywhere, exact in float sums.
float value(int r, std::size_t i) {
  return static_cast<float>(r * 1000 + static_cast<int>(i % 997));
}

template <class T>
std::vector<T> download_all(const DeviceBuffer<T>& b) {
  std::vector<T> h(b.size());
  Ops<Cuda>::download(h.data(), b.data(), static_cast<std::int64_t>(b.size()));
  return h;
}

// The one-rank trainer the multi-rank plans below are checked against, run once per
// precision (its steps do not depend on the plan).
constexpr int kPlanSteps = 3;
struct OneRankFp32 {
  std::vector<double> losses, norms;
  std::map<std::string, std::vector<float>> weights;
};
const OneRankFp32& one_rank_fp32() {
  static const OneRankFp32 ref = [] {
    OneRankFp32 r;
    Trainer<TrainTiny, Replicated<1>, Cuda, Fp32> t(trainer_options());
    for (int s = 0; s < kPlanSteps; ++s) {
      const auto st = t.step(trainer_batch(s));
      r.losses.push_back(st.loss);
      r.norms.push_back(st.grad_norm);
    }
    t.for_each_param(
        [&](const ParamSpec& p, float* v, float*) { r.weights[p.name].assign(v, v + p.numel()); });
    return r;
  }();
  return ref;
}
inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
inline float to_float(__half v) { return __half2float(v); }
// The 16-bit working weights of a mixed-precision trainer, in order, as floats.
template <class T>
void flat_working_weights(T& t, std::vector<float>& out) {
  out.clear();
  t.for_each_param([&](const ParamSpec& p, auto* v, auto*) {
    for (std::int64_t i = 0; i < p.numel(); ++i) out.push_back(to_float(v[i]));
  });
}
struct OneRankMixed {
  std::vector<double> losses;
  std::vector<float> weights, start;
};
// The one-rank trainer in precision P (Bf16Mixed or Fp16Mixed), once per precision.
template <Precision P>
const OneRankMixed& one_rank_mixed() {
  static const OneRankMixed ref = [] {
    OneRankMixed r;
    Trainer<TrainTiny, Replicated<1>, Cuda, P> t(trainer_options());
    flat_working_weights(t, r.start);
    for (int s = 0; s < kPlanSteps; ++s) r.losses.push_back(t.step(trainer_batch(s)).loss);
    flat_working_weights(t, r.weights);
    return r;
  }();
  return ref;
}

// A multi-rank plan in precision P follows the one-rank trainer in P: the ranks exchange
// 16-bit activations and gradients (summed in float on the host, rounded once), so to the
// precision's rounding, not bit for bit.
template <class Plan, Precision P>
void check_mixed_plan(const std::string& tag) {
  constexpr int steps = kPlanSteps;
  const OneRankMixed& ref = one_rank_mixed<P>();
  std::mutex m;
  run_cuda_ranks(PlanTraits<Plan>::world_size, [&](CudaThreadComm& comm) {
    Trainer<TrainTiny, Plan, Cuda, P> t(comm, trainer_options());
    std::vector<double> losses;
    for (int s = 0; s < steps; ++s) losses.push_back(t.step(trainer_batch(s)).loss);
    // The whole model, gathered in the canonical layout, compared on world rank 0.
    const std::string path =
        "/tmp/seqpar_" + tag + "_plan_" + std::to_string(::getpid()) + ".safetensors";
    t.save_weights(path);
    std::lock_guard lock(m);
    for (int s = 0; s < steps; ++s) {
      CAPTURE(s);
      CHECK(std::abs(losses[s] - ref.losses[s]) < 2e-2 * std::abs(ref.losses[s]));
    }
    if (comm.rank() != 0) return;
    Trainer<TrainTiny, Replicated<1>, Cuda, P> loaded(trainer_options());
    loaded.load_weights(path);
    std::filesystem::remove(path);
    std::vector<float> got;
    flat_working_weights(loaded, got);
    const double moved = rel_err(ref.weights, ref.start), apart = rel_err(got, ref.weights);
    INFO("the one-rank weights moved ", moved, "; this plan's end ", apart, " from them");
    // Three steps at lr 2e-3, the first at lr 0 (the warmup's step 0): 0.037 relative,
    // measured (the fp32 CPU trainer's weights move as much).
    CHECK(moved > 0.02);
    CHECK(apart < 0.5 * moved);
  });
}

}  // namespace

TEST_SUITE("multi-rank") {
  TEST_CASE("CudaThreadComm: collectives on device buffers and on host scalars") {
    constexpr int n_ranks = 3;
    constexpr std::size_t n = 1031;
    std::mutex m;
    run_cuda_ranks(n_ranks, [&](CudaThreadComm& comm) {
      const int r = comm.rank();
      CudaArena arena;
      std::vector<float> mine(n);
      for (std::size_t i = 0; i < n; ++i) mine[i] = value(r, i);

      // all_reduce, sum and max, in place on the device
      DeviceBuffer<float> a(arena, n, Memory::buffers);
      Ops<Cuda>::upload(a.data(), mine.data(), n);
      comm.all_reduce(a.data(), n, ReduceOp::sum);
      const auto sum = download_all(a);
      Ops<Cuda>::upload(a.data(), mine.data(), n);
      comm.all_reduce(a.data(), n, ReduceOp::max);
      const auto mx = download_all(a);

      // reduce_scatter of n * size elements into a block of n; all_gather back
      std::vector<float> big(n * n_ranks);
      for (std::size_t i = 0; i < big.size(); ++i) big[i] = value(r, i);
      DeviceBuffer<float> in(arena, big.size(), Memory::buffers), block(arena, n, Memory::buffers),
          gathered(arena, big.size(), Memory::buffers);
      Ops<Cuda>::upload(in.data(), big.data(), big.size());
      comm.reduce_scatter(in.data(), block.data(), n, ReduceOp::sum);
      const auto rs = download_all(block);
      comm.all_gather(block.data(), gathered.data(), n);
      const auto ag = download_all(gathered);

      // broadcast from rank 1; send / recv around the ring
      DeviceBuffer<double> b(arena, 7, Memory::buffers);
      std::vector<double> seven(7, r == 1 ? 2.5 : -1.0);
      Ops<Cuda>::upload(b.data(), seven.data(), 7);
      comm.broadcast(b.data(), 7, 1);
      const auto bc = download_all(b);
      DeviceBuffer<std::int64_t> msg(arena, 5, Memory::buffers), got(arena, 5, Memory::buffers);
      std::vector<std::int64_t> payload(5, 100 + r);
      Ops<Cuda>::upload(msg.data(), payload.data(), 5);
      comm.send(msg.data(), 5, (r + 1) % n_ranks, 9);
      comm.recv(got.data(), 5, (r + n_ranks - 1) % n_ranks, 9);
      const auto p2p = download_all(got);

      // a host scalar goes through unstaged
      double loss = r + 1.0;
      comm.all_reduce(&loss, 1, ReduceOp::sum);
      comm.barrier();

      std::lock_guard lock(m);
      CAPTURE(r);
      bool ok_sum = true, ok_max = true, ok_rs = true, ok_ag = true;
      for (std::size_t i = 0; i < n; ++i) {
        float s = 0, x = value(0, i);
        for (int q = 0; q < n_ranks; ++q) s += value(q, i), x = std::max(x, value(q, i));
        ok_sum = ok_sum && sum[i] == s;
        ok_max = ok_max && mx[i] == x;
        float srs = 0;
        for (int q = 0; q < n_ranks; ++q) srs += value(q, static_cast<std::size_t>(r) * n + i);
        ok_rs = ok_rs && rs[i] == srs;
      }
      for (std::size_t i = 0; i < big.size(); ++i) {
        float s = 0;
        for (int q = 0; q < n_ranks; ++q) s += value(q, i);
        ok_ag = ok_ag && ag[i] == s;
      }
      CHECK(ok_sum);
      CHECK(ok_max);
      CHECK(ok_rs);
      CHECK(ok_ag);
      CHECK(bc == std::vector<double>(7, 2.5));
      CHECK(p2p == std::vector<std::int64_t>(5, 100 + (r + n_ranks - 1) % n_ranks));
      CHECK(loss == 6.0);
      // Counters follow ThreadComm's ring model.
      CHECK(comm.stats()[CollectiveKind::all_reduce].calls == 3);
      CHECK(comm.stats()[CollectiveKind::send].bytes_sent == 5 * 8);
    });
  }

  TEST_CASE("run_cuda_ranks' ranks work on the calling thread's GPU, not on device 0") {
    int devices = 0;
    REQUIRE(cudaGetDeviceCount(&devices) == cudaSuccess);
    if (devices < 2) {
      MESSAGE("one GPU: not run");
      return;
    }
    const int gpu = devices - 1;
    std::thread([&] {  // a thread of its own, so that this one's context stays on device 0
      CHECK(cudaSetDevice(gpu) == cudaSuccess);
      std::mutex m;
      std::vector<int> used;
      std::vector<float> sums;
      run_cuda_ranks(2, [&](CudaThreadComm& comm) {
        CudaArena arena;
        const float one = static_cast<float>(comm.rank() + 1);
        DeviceBuffer<float> x(arena, 1, Memory::buffers);
        Ops<Cuda>::upload(x.data(), &one, 1);
        comm.all_reduce(x.data(), 1, ReduceOp::sum);
        cudaPointerAttributes a{};
        CHECK(cudaPointerGetAttributes(&a, x.data()) == cudaSuccess);
        const float sum = download_all(x)[0];
        std::lock_guard lock(m);
        used.push_back(CudaContext::current().device());
        used.push_back(a.device);
        sums.push_back(sum);
      });
      CHECK(used == std::vector<int>(4, gpu));
      CHECK(sums == std::vector<float>{3.0f, 3.0f});
    })
        .join();
  }

  TEST_CASE("AnyComm moves and sums bf16 and fp16 device buffers over CudaThreadComm") {
    constexpr int n_ranks = 3;
    constexpr std::size_t n = 517;
    std::mutex m;
    run_cuda_ranks(n_ranks, [&](CudaThreadComm& cuda) {
      AnyComm comm{cuda};
      const int r = comm.rank();
      CudaArena arena;
      // Small integers: exact in bf16, and so are their sums (< 256).
      std::vector<__nv_bfloat16> ints(n);
      for (std::size_t i = 0; i < n; ++i)
        ints[i] = __float2bfloat16(static_cast<float>((r + 1) * (i % 9 + 1)));
      DeviceBuffer<__nv_bfloat16> a(arena, n, Memory::buffers);
      Ops<Cuda>::upload(a.data(), ints.data(), n);
      comm.all_reduce(a.data(), n, ReduceOp::sum);
      const auto sum = download_all(a);
      // Summed in float, rounded once: 1 + 2 * 2^-8 (added one rank at a time in bf16, 1).
      const __nv_bfloat16 once_in = __float2bfloat16(r == 0 ? 1.0f : 0x1p-8f);
      DeviceBuffer<__nv_bfloat16> once(arena, 1, Memory::buffers);
      Ops<Cuda>::upload(once.data(), &once_in, 1);
      comm.all_reduce(once.data(), 1, ReduceOp::sum);
      const float once_out = __bfloat162float(download_all(once)[0]);
      // fp16: reduce_scatter of n * size, all_gather back, send around the ring
      std::vector<__half> big(n * n_ranks);
      for (std::size_t i = 0; i < big.size(); ++i)
        big[i] = __float2half(static_cast<float>(r * 100 + i % 50));
      DeviceBuffer<__half> in(arena, big.size(), Memory::buffers), block(arena, n, Memory::buffers),
          gathered(arena, big.size(), Memory::buffers), got(arena, n, Memory::buffers);
      Ops<Cuda>::upload(in.data(), big.data(), big.size());
      comm.reduce_scatter(in.data(), block.data(), n, ReduceOp::sum);
      const auto rs = download_all(block);
      comm.all_gather(block.data(), gathered.data(), n);
      const auto ag = download_all(gathered);
      comm.send(block.data(), n, (r + 1) % n_ranks, 3);
      comm.recv(got.data(), n, (r + n_ranks - 1) % n_ranks, 3);
      const auto p2p = download_all(got);

      std::lock_guard lock(m);
      CAPTURE(r);
      bool ok_sum = true, ok_rs = true, ok_ag = true, ok_p2p = true;
      const auto rs_want = [&](int rank, std::size_t i) {
        float s = 0;
        for (int q = 0; q < n_ranks; ++q) s += static_cast<float>(q * 100 + (rank * n + i) % 50);
        return s;
      };
      for (std::size_t i = 0; i < n; ++i) {
        ok_sum = ok_sum && __bfloat162float(sum[i]) == static_cast<float>(6 * (i % 9 + 1));
        ok_rs = ok_rs && __half2float(rs[i]) == rs_want(r, i);
        ok_p2p = ok_p2p && __half2float(p2p[i]) == rs_want((r + n_ranks - 1) % n_ranks, i);
      }
      for (int q = 0; q < n_ranks; ++q)
        for (std::size_t i = 0; i < n; ++i)
          ok_ag = ok_ag && __half2float(ag[q * n + i]) == rs_want(q, i);
      CHECK(ok_sum);
      CHECK(once_out == 1.0f + 0x1p-7f);
      CHECK(ok_rs);
      CHECK(ok_ag);
      CHECK(ok_p2p);
      // Bytes are counted at 2 per element.
      CHECK(comm.stats()[CollectiveKind::send].bytes_sent == 2 * n);
    });
  }

  TEST_CASE_TEMPLATE("a multi-rank plan on one GPU trains as the one-rank trainer", Plan,
                     Replicated<2>, Sharded<Zero1, 2>, Sharded<Zero2, 2>, Sharded<Zero3, 2>,
                     TensorSplit<2>, Hybrid<TensorSplit<2>, Replicated<2>>, Pipeline<2, GPipe>,
                     Pipeline<2, OneFOneB>, Hybrid<TensorSplit<2>, Pipeline<2>>,
                     Hybrid<Pipeline<2>, Sharded<Zero2, 2>>) {
    constexpr int steps = kPlanSteps;
    const std::vector<double>& ref_losses = one_rank_fp32().losses;
    const std::vector<double>& ref_norms = one_rank_fp32().norms;
    const std::map<std::string, std::vector<float>>& ref_weights = one_rank_fp32().weights;
    std::mutex m;
    run_cuda_ranks(PlanTraits<Plan>::world_size, [&](CudaThreadComm& comm) {
      Trainer<TrainTiny, Plan, Cuda, Fp32> t(comm, trainer_options());
      std::vector<double> losses, norms;
      for (int s = 0; s < steps; ++s) {
        const auto st = t.step(trainer_batch(s));
        losses.push_back(st.loss);
        norms.push_back(st.grad_norm);
      }
      double worst = 0;
      t.for_each_param([&](const ParamSpec& p, float* v, float*) {
        // This rank's block of the full reference tensor.
        const auto& full = ref_weights.at(p.name);
        std::vector<float> want(static_cast<std::size_t>(p.numel())), got(v, v + p.numel());
        for (std::int64_t r = 0; r < p.local_rows; ++r)
          for (std::int64_t c = 0; c < p.local_cols; ++c) {
            const std::int64_t fr = p.row0 + r, fc = p.col0 + c;
            const bool inside = fr * p.cols < static_cast<std::int64_t>(full.size());
            want[static_cast<std::size_t>(r * p.local_cols + c)] =
                inside ? full[static_cast<std::size_t>(fr * p.cols + fc)] : 0.0f;
          }
        worst = std::max(worst, rel_err(got, want));
      });
      std::lock_guard lock(m);
      CAPTURE(comm.rank());
      for (int s = 0; s < steps; ++s) {
        CAPTURE(s);
        CHECK(losses[s] == doctest::Approx(ref_losses[s]).epsilon(1e-5));
        CHECK(norms[s] == doctest::Approx(ref_norms[s]).epsilon(1e-5));
      }
      INFO("worst weight rel err ", worst);
      CHECK(worst < 1e-4);
    });
  }

  TEST_CASE("a checkpoint written by ZeRO-3 over 2 GPU ranks resumes in a one-rank GPU trainer") {
    double want = 0;
    {
      Trainer<TrainTiny, Replicated<1>, Cuda, Fp32> t(trainer_options());
      for (int s = 0; s < 3; ++s) want = t.step(trainer_batch(s)).loss;
    }
    const std::string path =
        "/tmp/seqpar_zero3_ckpt_" + std::to_string(::getpid()) + ".safetensors";
    run_cuda_ranks(2, [&](CudaThreadComm& comm) {
      Trainer<TrainTiny, Sharded<Zero3, 2>, Cuda, Fp32> t(comm, trainer_options());
      for (int s = 0; s < 2; ++s) t.step(trainer_batch(s));
      t.save_checkpoint(path);
    });
    TrainOptions o = trainer_options();
    o.seed = 3;  // overwritten by the load
    Trainer<TrainTiny, Replicated<1>, Cuda, Fp32> resumed(o);
    resumed.load_checkpoint(path);
    std::filesystem::remove(path);
    const StepStats st = resumed.step(trainer_batch(2));
    CHECK(st.step == 3);
    CHECK(st.loss == doctest::Approx(want).epsilon(1e-5));
  }

  TEST_CASE_TEMPLATE(
      "a multi-rank Bf16Mixed plan on one GPU follows the one-rank Bf16Mixed trainer", Plan,
      Replicated<2>, Sharded<Zero2, 2>, Sharded<Zero3, 2>, TensorSplit<2>, Pipeline<2>,
      Hybrid<TensorSplit<2>, Pipeline<2>, Replicated<2>>) {
    check_mixed_plan<Plan, Bf16Mixed>("bf16");
  }

  // fp16 with its dynamic loss scale: every rank takes the same skip-or-step decision.
  TEST_CASE_TEMPLATE(
      "a multi-rank Fp16Mixed plan on one GPU follows the one-rank Fp16Mixed trainer", Plan,
      Replicated<2>, Sharded<Zero1, 2>, Sharded<Zero3, 2>, TensorSplit<2>, Pipeline<2, OneFOneB>,
      Hybrid<TensorSplit<2>, Pipeline<2>, Replicated<2>>) {
    check_mixed_plan<Plan, Fp16Mixed>("fp16");
  }

}  // TEST_SUITE

// test_nccl: NcclComm on one GPU as a one-rank group (NcclComm::single(), no MPI): every
// collective and element type on device buffers and host scalars, the order between the
// communicator's stream and the calling thread's, async collectives joined (all at once or
// one by its ticket), and a trainer over it. Where the machine has several GPUs (the emulated
// device has eight), groups of ranks that are threads of this process, a GPU each: a peer that
// never comes ends a host scalar's collective at the timeout, and plans with several
// communicators in flight (tensor, pipeline and data axes) train as the one-rank trainer. Ranks
// in several processes: nccl_mpi_checks, under mpirun.
#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cuda_test_util.hpp"
#include "seqpar/backend/cuda/ops.hpp"
#include "seqpar/comm/nccl_comm.hpp"
#include "seqpar/train/trainer.hpp"
#include "trainer_reference.hpp"

#if !defined(SEQPAR_HAS_NCCL_COMM)
#error "nccl_comm.hpp did not define NcclComm: nvcc and <nccl.h> are needed"
#endif

using namespace seqpar;
using namespace seqpar::test;

namespace {

template <class T>
std::vector<T> download_all(const DeviceBuffer<T>& b) {
  std::vector<T> h(b.size());
  Ops<Cuda>::download(h.data(), b.data(), static_cast<std::int64_t>(b.size()));
  return h;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Every collective of a one-rank group leaves the values as they are (a copy for the
// out-of-place ones). Storage type T crosses as its wire type (Bf16Bits for bf16, ...).
template <class T>
void one_rank_collectives(NcclComm& comm, CudaArena& arena) {
  using W = typename CommWire<T>::type;
  const auto w = [](T* p) { return reinterpret_cast<W*>(p); };
  constexpr std::size_t n = 1000;
  std::vector<T> host(n);
  for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<T>(static_cast<float>(i % 97) - 40.0f);
  const std::vector<T> zeros(n, T(0));
  DeviceBuffer<T> a(arena, n, Memory::buffers), b(arena, n, Memory::buffers);
  Ops<Cuda>::upload(a.data(), host.data(), n);
  comm.all_reduce(w(a.data()), n, ReduceOp::sum);
  comm.all_reduce(w(a.data()), n, ReduceOp::max);
  comm.broadcast(w(a.data()), n, 0);
  comm.reduce_scatter(w(a.data()), w(b.data()), n, ReduceOp::sum);
  CHECK(same_bits(download_all(b), host));
  Ops<Cuda>::upload(b.data(), zeros.data(), n);
  comm.all_gather(w(a.data()), w(b.data()), n);
  CHECK(same_bits(download_all(b), host));
  Ops<Cuda>::upload(b.data(), zeros.data(), n);
  comm.reduce_scatter_async(w(a.data()), w(b.data()), n, ReduceOp::sum);
  comm.all_reduce_async(w(a.data()), n, ReduceOp::sum);
  comm.join();
  CHECK(same_bits(download_all(b), host));
  CHECK(same_bits(download_all(a), host));
  // Six async gathers (more than the communicator's four event slots), each joined by its
  // own ticket before its output is read.
  std::vector<DeviceBuffer<T>> outs;
  std::vector<CommTicket> tickets;
  for (int k = 0; k < 6; ++k) {
    outs.emplace_back(arena, n, Memory::buffers);
    tickets.push_back(comm.all_gather_async(w(a.data()), w(outs.back().data()), n));
  }
  for (int k = 0; k < 6; ++k) {
    CAPTURE(k);
    CHECK(tickets[k].seq > (k > 0 ? tickets[k - 1].seq : 0));
    comm.join(tickets[k]);
    CHECK(same_bits(download_all(outs[k]), host));
  }
  CHECK_THROWS_WITH(comm.join(CommTicket{tickets.back().seq + 1}),
                    doctest::Contains("was given ticket"));
}

}  // namespace

TEST_CASE("NcclComm::single(): every collective and element type on device and host memory") {
  CudaArena arena;
  NcclComm nccl = NcclComm::single();
  CHECK(nccl.rank() == 0);
  CHECK(nccl.size() == 1);
  one_rank_collectives<float>(nccl, arena);
  one_rank_collectives<double>(nccl, arena);
  one_rank_collectives<__nv_bfloat16>(nccl, arena);
  one_rank_collectives<__half>(nccl, arena);
  // host scalars go through a device buffer and come back
  double loss = 2.5;
  std::int64_t count = 7;
  nccl.all_reduce(&loss, 1, ReduceOp::sum);
  nccl.all_reduce(&count, 1, ReduceOp::max);
  CHECK(loss == 2.5);
  CHECK(count == 7);
  nccl.barrier();
  CHECK(nccl.stats()[CollectiveKind::all_reduce].calls == 4 * 3 + 2);
  // A split of one rank is a group of one again.
  NcclComm sub = nccl.split(0, 0);
  CHECK(sub.size() == 1);
  sub.barrier();
}

TEST_CASE("NcclComm's stream waits for the caller's work, and the caller's later work for it") {
  // 64 Mi floats: long enough that a missing wait would let the copy read unfilled memory,
  // or the scale run before the copy.
  constexpr std::size_t n = std::size_t{1} << 26;
  CudaArena arena;
  NcclComm nccl = NcclComm::single();
  DeviceBuffer<float> in(arena, n, Memory::buffers), out(arena, n, Memory::buffers);
  enum Join { blocking, join_all, join_ticket, gather_ticket };
  for (const Join mode : {blocking, join_all, join_ticket, gather_ticket}) {
    CAPTURE(mode);
    Ops<Cuda>::fill(out.data(), 0.0f, static_cast<std::int64_t>(n));
    Ops<Cuda>::fill(in.data(), 7.0f,
                    static_cast<std::int64_t>(n));  // queued on the caller's stream
    if (mode == blocking) {
      nccl.reduce_scatter(in.data(), out.data(), n, ReduceOp::sum);
    } else if (mode == gather_ticket) {
      nccl.join(nccl.all_gather_async(in.data(), out.data(), n));
    } else {
      const CommTicket t = nccl.reduce_scatter_async(in.data(), out.data(), n, ReduceOp::sum);
      if (mode == join_all)
        nccl.join();
      else
        nccl.join(t);
    }
    Ops<Cuda>::scale(out.data(), 2.0f, static_cast<std::int64_t>(n));  // after the collective
    const auto got = download_all(out);
    std::size_t wrong = 0;
    for (const float x : got) wrong += x != 14.0f;
    CHECK(wrong == 0);
  }
}

TEST_CASE("a trainer over NcclComm::single() trains as the trainer without a communicator") {
  std::vector<double> want, got;
  {
    Trainer<TrainTiny, Replicated<1>, Cuda, Bf16Mixed> t(trainer_options());
    for (int s = 0; s < 3; ++s) want.push_back(t.step(trainer_batch(s)).loss);
  }
  Trainer<TrainTiny, Replicated<1>, Cuda, Bf16Mixed> t(NcclComm::single(), trainer_options());
  for (int s = 0; s < 3; ++s) got.push_back(t.step(trainer_batch(s)).loss);
  CHECK(got == want);
}

namespace {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  return n;
}

}  // namespace

TEST_CASE(
    "a peer that never comes: a host scalar's collective ends at the timeout, not in a copy") {
  if (device_count() < 2) {
    MESSAGE("one GPU: not run");
    return;
  }
  const ncclUniqueId id = NcclComm::unique_id();
  std::mutex m;
  std::condition_variable cv;
  bool finished = false;
  std::thread peer([&] {  // joins the group, then never calls the collective
    CHECK(cudaSetDevice(1) == cudaSuccess);
    NcclComm c(id, 2, 1);
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return finished; });
  });
  std::string error;
  double seconds = 0;
  std::thread([&] {
    CHECK(cudaSetDevice(0) == cudaSuccess);
    NcclComm c(id, 2, 0);
    c.set_timeout(CommSeconds(1.0));
    double loss = 1.5;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      c.all_reduce(&loss, 1, ReduceOp::sum);
    } catch (const Error& e) {
      error = e.what();
    }
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }).join();
  {
    std::lock_guard lock(m);
    finished = true;
  }
  cv.notify_all();
  peer.join();
  INFO(error);
  CHECK(error.find("waited more than 1 s") != std::string::npos);
  CHECK(seconds < 30);
}

namespace {

// The one-rank trainer's losses, which every plan below follows: computed once.
const std::vector<double>& one_rank_losses() {
  static const std::vector<double> losses = [] {
    std::vector<double> l;
    Trainer<TrainTiny, Replicated<1>, Cuda, Fp32> t(trainer_options());
    for (int s = 0; s < 3; ++s) l.push_back(t.step(trainer_batch(s)).loss);
    return l;
  }();
  return losses;
}

}  // namespace

// Plan over n ranks that are threads of this process, rank r an NcclComm on GPU r, against the
// one-rank trainer: the plan's communicators (one per axis, split from the world) have
// collectives in flight at once.
template <class Plan>
void check_plan_over_threads() {
  constexpr int n = PlanTraits<Plan>::world_size;
  if (device_count() < n) {
    MESSAGE("fewer GPUs than ranks: not run");
    return;
  }
  const std::vector<double>& want = one_rank_losses();
  const ncclUniqueId id = NcclComm::unique_id();
  std::mutex m;
  std::vector<std::vector<double>> losses(n);
  run_ranks(n, [&](ThreadComm& host) {
    const int r = host.rank();
    SEQPAR_CUDA_CHECK(cudaSetDevice(r));
    NcclComm comm(id, n, r);
    Trainer<TrainTiny, Plan, Cuda, Fp32> t(comm, trainer_options());
    std::vector<double> mine;
    for (int s = 0; s < 3; ++s) mine.push_back(t.step(trainer_batch(s)).loss);
    std::lock_guard lock(m);
    losses[static_cast<std::size_t>(r)] = mine;
  });
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    for (int s = 0; s < 3; ++s) {
      CAPTURE(s);
      CHECK(losses[static_cast<std::size_t>(r)][static_cast<std::size_t>(s)] ==
            doctest::Approx(want[static_cast<std::size_t>(s)]).epsilon(1e-5));
    }
  }
}

TEST_CASE_TEMPLATE("plans of several axes over NcclComm ranks on a GPU each train as one rank",
                   Plan, Hybrid<TensorSplit<2>, Replicated<2>>,
                   Hybrid<Pipeline<2, OneFOneB>, Sharded<Zero2, 2>>,
                   Hybrid<TensorSplit<2>, Pipeline<2, GPipe>>, Sharded<Zero3, 2>) {
  check_plan_over_threads<Plan>();
}

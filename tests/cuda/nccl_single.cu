// test_nccl: NcclComm on one GPU as a one-rank group (NcclComm::single(), no MPI): every
// collective and element type on device buffers and host scalars, the order between the
// communicator's stream and the calling thread's, async collectives joined (all at once or
// one by its ticket), and a trainer
// over it. A group of more ranks needs one GPU per rank and mpirun (NcclComm(MpiComm&)).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
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

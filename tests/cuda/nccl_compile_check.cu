// Compiled, never run: NcclComm over MpiComm with every collective and element type, and a
// two-rank trainer on it. Built as an object library (seqpar_nccl_compile_check) where NCCL
// and MPI are found, so that the NCCL path keeps compiling on machines without a GPU;
// running it needs mpirun and one GPU per rank.
#include "seqpar/backend/cuda/ops.hpp"
#include "seqpar/comm/nccl_comm.hpp"
#include "seqpar/train/trainer.hpp"
#include "trainer_reference.hpp"

#if !defined(SEQPAR_HAS_NCCL_COMM)
#error "nccl_comm.hpp did not define NcclComm: nvcc, <nccl.h> and <mpi.h> are needed"
#endif

namespace seqpar::test {

template <class T>
void every_collective(NcclComm& c, T* device, T* host) {
  c.all_reduce(device, 4, ReduceOp::sum);
  c.all_reduce(host, 1, ReduceOp::max);
  c.reduce_scatter(device, device + 8, 2, ReduceOp::sum);
  c.all_gather(device, device + 8, 2);
  c.broadcast(device, 4, 0);
  c.send(device, 4, 1, 0);
  c.recv(device, 4, 1, 0);
  c.all_reduce_async(device, 4, ReduceOp::sum);
  c.reduce_scatter_async(device, device + 8, 2, ReduceOp::sum);
  c.join();
}

void nccl_compile_check(MpiComm& mpi) {
  NcclComm comm(mpi);
  NcclComm one = NcclComm::single();
  NcclComm sub = comm.split(comm.rank() % 2, comm.rank());
  sub.barrier();
  float* f = nullptr;
  double* d = nullptr;
  std::int64_t* i = nullptr;
  float hf = 0;
  double hd = 0;
  std::int64_t hi = 0;
  every_collective(comm, f, &hf);
  every_collective(comm, d, &hd);
  every_collective(one, i, &hi);
  Bf16Bits* b = nullptr;
  Bf16Bits hb{};
  every_collective(comm, b, &hb);
  static_assert(Communicator<NcclComm> && AsyncCommunicator<NcclComm>);
  Trainer<TrainTiny, Replicated<2>, Cuda, Fp32> t(comm, trainer_options());
  t.step(trainer_batch(0));
  // bf16 over every axis: ZeRO-2 data ranks, tensor split, pipeline stages
  Trainer<TrainTiny, Hybrid<TensorSplit<2>, Pipeline<2>, Sharded<Zero2, 2>>, Cuda, Bf16Mixed> h(comm, trainer_options());
  h.step(trainer_batch(0));
  h.save_checkpoint("checkpoint.safetensors");
}

}  // namespace seqpar::test

// seqgpt_ner --device cuda: which communicator the ranks get (device_launch.hpp) and which
// model unit runs them. Under mpirun or srun each process takes the GPU of its rank on its
// node and trains on NcclComm; without a launcher the plan's ranks are threads sharing the
// current GPU (CudaThreadComm, made by run_world).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda_run.hpp"
#include "device_launch.hpp"
#include "models.hpp"
#include "seqpar/comm/nccl_comm.hpp"  // where NCCL is found
#if defined(SEQPAR_WITH_MPI)
#include "seqpar/comm/mpi_comm.hpp"  // as main.cpp: run_cuda_processes exists where it calls it
#endif

int ner::visible_gpus() {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: counted as none
    gpus = 0;
  }
  return gpus;
}

#if defined(SEQPAR_HAS_MPI_COMM)
int ner::run_cuda_processes(const Options& o, Launch launch, seqpar::MpiComm& mpi) {
  // Eval and predict run on rank 0 alone, on its GPU (its node's first).
  if (o.command != "train") return run_cuda(o, launch);
  // Every rank learns every node's counts, so that all refuse alike and rank 0 says why.
  const NodeGpus mine{mpi.rank(), seqpar::node_local_size(mpi), visible_gpus()};
  const std::int64_t out[3] = {mine.rank, mine.node_processes, mine.gpus};
  std::vector<std::int64_t> all(3 * static_cast<std::size_t>(mpi.size()));
  mpi.all_gather(out, all.data(), 3);
  std::vector<NodeGpus> ranks;
  for (std::size_t r = 0; r < all.size(); r += 3) ranks.push_back({all[r], all[r + 1], all[r + 2]});
  if (const std::string why = gpu_shortage(ranks, launch.launcher); !why.empty()) {
    if (mpi.rank() == 0) std::fprintf(stderr, "seqgpt_ner: %s\n", why.c_str());
    return 2;
  }
#if defined(SEQPAR_HAS_NCCL_COMM)
  // Selects GPU node_local_rank (before any other CUDA work of this process); rank 0's
  // NCCL id crosses over MPI.
  seqpar::NcclComm nccl(mpi);
  launch.world = seqpar::AnyComm(nccl);
  return run_cuda(o, launch);
#else
  if (mpi.rank() == 0)
    std::fprintf(stderr,
                 "seqgpt_ner: --device cuda under %s needs NCCL, which this build did not find "
                 "next to the CUDA toolkit (seqpar::nccl); start seqgpt_ner without %s to run "
                 "the plan's ranks as threads sharing one GPU\n",
                 launch.launcher.c_str(), launch.launcher.c_str());
  return 2;
#endif
}
#endif

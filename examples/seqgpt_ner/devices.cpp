// What seqgpt_ner needs of its devices (devices.hpp).
#include "devices.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

#include <algorithm>

#include <string>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/train/launch.hpp"
#if defined(SEQPAR_WITH_MPI)
#include "seqpar/comm/mpi_comm.hpp"
#endif
#if defined(SEQPAR_NER_WITH_CUDA)
#include <cuda_runtime.h>

#include "seqpar/backend/cuda/error.hpp"
#include "seqpar/comm/nccl_comm.hpp"  // where NCCL is found
#endif

namespace ner {

void set_threads(int n) {
#if defined(_OPENMP)
  omp_set_num_threads(std::max(1, n));
#else
  (void)n;
#endif
}

int visible_gpus() {
#if defined(SEQPAR_NER_WITH_CUDA)
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: counted as none
    gpus = 0;
  }
  return gpus;
#else
  return 0;
#endif
}

std::string device_label(std::string_view device) {
#if defined(SEQPAR_NER_WITH_CUDA)
  if (device == "cuda") {
    int gpu = 0;
    SEQPAR_CUDA_CHECK(cudaGetDevice(&gpu));
    cudaDeviceProp p{};
    SEQPAR_CUDA_CHECK(cudaGetDeviceProperties(&p, gpu));
    return "cuda:" + std::to_string(gpu) + " " + p.name;
  }
#endif
  return std::string(device);
}

#if defined(SEQPAR_HAS_MPI_COMM)
seqpar::AnyComm process_world(seqpar::MpiComm& mpi, std::string_view device,
                              const std::string& launcher) {
  if (device != "cuda") return seqpar::AnyComm(mpi);
  seqpar::AnyComm world(mpi);
#if defined(SEQPAR_NER_WITH_CUDA)
  // The GPU each process will take (NcclComm: its rank on the node, modulo the GPUs it
  // sees), named by its UUID, gathered so that every process judges the same view.
  const int local = seqpar::node_local_rank(mpi), gpus = visible_gpus();
  std::string uuid;
  if (gpus > 0) {
    cudaDeviceProp p{};
    SEQPAR_CUDA_CHECK(cudaGetDeviceProperties(&p, local % gpus));
    static const char* hex = "0123456789abcdef";
    for (const char c : p.uuid.bytes) {
      uuid += hex[(static_cast<unsigned char>(c) >> 4) & 15];
      uuid += hex[static_cast<unsigned char>(c) & 15];
    }
  }
  const auto hosts = seqpar::all_gather_text(world, seqpar::host_name());
  const auto ids = seqpar::all_gather_text(world, uuid);
  std::vector<std::int64_t> mine{seqpar::node_local_size(mpi), gpus},
      counts(2 * static_cast<std::size_t>(mpi.size()));
  world.all_gather(mine.data(), counts.data(), 2);
  std::vector<seqpar::ProcessGpu> ranks;
  for (int r = 0; r < mpi.size(); ++r)
    ranks.push_back({r, hosts[static_cast<std::size_t>(r)],
                     static_cast<int>(counts[2 * static_cast<std::size_t>(r)]),
                     static_cast<int>(counts[2 * static_cast<std::size_t>(r) + 1]),
                     ids[static_cast<std::size_t>(r)]});
  // Every process judges the same view: all refuse alike.
  if (const std::string why = seqpar::gpu_binding_problem(ranks, launcher); !why.empty())
    throw seqpar::Refusal(why + " (Slurm binds one with --gpus-per-task=1 or --gpu-bind)");
#if defined(SEQPAR_HAS_NCCL_COMM)
  // Selects GPU node_local_rank % visible (before any other CUDA work of this process);
  // rank 0's NCCL id crosses over MPI.
  return seqpar::AnyComm(seqpar::NcclComm(mpi));
#else
  throw seqpar::Refusal("--device cuda under " + launcher +
                        " needs NCCL, which this build did not find next to the CUDA toolkit "
                        "(seqpar::nccl); start seqgpt_ner without " +
                        launcher + " to run the ranks as threads sharing one GPU");
#endif
#else
  (void)world;
  throw seqpar::Refusal(
      "--device cuda: this seqgpt_ner was built without CUDA; run with --device "
      "cpu under " +
      launcher);
#endif
}
#endif

}  // namespace ner

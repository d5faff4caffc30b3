// Which device, precision, plans and communicator a seqgpt_ner run gets, decided in main.cpp
// before any rank starts, and checkable without a GPU (test_deepspeed_config.cpp):
//
//   --device cpu   every plan of plans.hpp in fp32; ranks on ThreadComm, or MpiComm under
//                  mpirun / srun (one rank per process)
//   --device cuda  the plans of CudaPlans in fp32, bf16 (Bf16Mixed) or fp16 (Fp16Mixed, with
//                  dynamic loss scaling); ranks on CudaThreadComm (threads sharing one GPU),
//                  or NcclComm under mpirun / srun (one process per GPU, the GPU chosen by
//                  the process's rank on its node; cuda_launch.cu)
//
// A build without CUDA (no SEQPAR_NER_WITH_CUDA: the CUDA translation units are not in the
// program) refuses --device cuda.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "options.hpp"
#include "plans.hpp"
#include "seqpar/core/error.hpp"

namespace ner {

#if defined(SEQPAR_NER_WITH_CUDA)
inline constexpr bool built_with_cuda = true;
#else
inline constexpr bool built_with_cuda = false;
#endif

/// The plans --device cuda is compiled for (cuda_*.cu), a deliberately small set: what
/// users run on GPUs, chosen from plans.hpp's by name. More here multiply the CUDA units'
/// compile time by 3 precisions.
using CudaPlans = PlanFamily<"cuda", PlanCalled<"single">, PlanCalled<"dp2">, PlanCalled<"dp4">,
                             PlanCalled<"zero3x2">, PlanCalled<"zero3x4">, PlanCalled<"tp2">>;

/// The names of CudaPlans, for messages.
inline std::string cuda_plan_list() {
  std::string s;
  CudaPlans::each([&](auto plan) { s += (s.empty() ? "" : " ") + std::string(plan.name); });
  return s;
}

/// Refuses a device this build or the plan cannot run (a command-line error: exit 2).
/// The precision against the device is check_precision_device's (exit 1, as a DeepSpeed
/// configuration may have set it).
inline void check_device(const Options& o, bool with_cuda = built_with_cuda) {
  if (o.device != "cuda") return;
  SEQPAR_CHECK(with_cuda,
               "--device cuda: this seqgpt_ner was built without CUDA; build it with nvcc "
               "(cmake --preset cuda, or -DSEQPAR_WITH_CUDA=ON) or run with --device cpu");
  SEQPAR_CHECK(o.command != "train" || CudaPlans::with(o.plan, [](auto) {}), "--plan ", o.plan,
               " is not built for --device cuda; the CUDA plans are ", cuda_plan_list(),
               " (every plan runs with --device cpu)");
}

/// How a run's ranks talk to each other.
enum class RankComm { thread, cuda_thread, mpi, nccl };

inline const char* rank_comm_name(RankComm c) {
  switch (c) {
    case RankComm::thread: return "ThreadComm";
    case RankComm::cuda_thread: return "CudaThreadComm";
    case RankComm::mpi: return "MpiComm";
    case RankComm::nccl: return "NcclComm";
  }
  return "?";
}

/// The communicator of a run on `device`: under a launcher (`processes`) one rank per
/// process, MpiComm on the CPU and NcclComm (bootstrapped over MPI) on GPUs; without one the
/// ranks are threads of this process, on the device flavour of ThreadComm for GPUs (NCCL
/// refuses two ranks on one GPU).
inline RankComm rank_comm(std::string_view device, bool processes) {
  if (device == "cuda") return processes ? RankComm::nccl : RankComm::cuda_thread;
  return processes ? RankComm::mpi : RankComm::thread;
}

/// One process of a job as NcclComm sees it: its world rank, how many processes of the
/// job share its node (MPI_Comm_split_type, MPI_COMM_TYPE_SHARED) and the GPUs it sees.
struct NodeGpus {
  std::int64_t rank = 0, node_processes = 1, gpus = 0;
};

/// Why a process sees no CUDA GPU, as the refusals say it.
inline constexpr std::string_view no_gpu_why =
    "sees no CUDA GPU (no driver, or CUDA_VISIBLE_DEVICES hides them all); run with --device cpu";

/// The refusal of --device cuda when the plan's ranks would be threads of this process and
/// it sees no GPU: said before the data are read or the output folder is taken.
inline std::string no_gpu_for_threads() {
  return "--device cuda: this process " + std::string(no_gpu_why);
}

/// The refusal when a node runs more processes of the job than it has GPUs (NcclComm takes
/// one GPU per process and NCCL refuses two ranks on one), naming the first such rank and
/// both counts; empty when every process has a GPU of its own.
inline std::string gpu_shortage(const std::vector<NodeGpus>& ranks, std::string_view launcher) {
  for (const auto& r : ranks) {
    if (r.node_processes <= r.gpus) continue;
    if (r.gpus == 0)
      return "--device cuda under " + std::string(launcher) + ": rank " + std::to_string(r.rank) +
             " " + std::string(no_gpu_why) + " there";
    const std::string gpus = std::to_string(r.gpus) + " GPU" + (r.gpus == 1 ? "" : "s");
    return "--device cuda under " + std::string(launcher) + ": the node of rank " +
           std::to_string(r.rank) + " runs " + std::to_string(r.node_processes) +
           " processes of this job but has " + gpus +
           "; each process takes a GPU of its own (NCCL): start at most " + std::to_string(r.gpus) +
           " per node, or start seqgpt_ner without a launcher to run the plan's ranks as "
           "threads sharing one GPU (CudaThreadComm)";
  }
  return {};
}

}  // namespace ner

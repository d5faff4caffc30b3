// The CUDA half of seqgpt_ner (built when the build has CUDA: SEQPAR_NER_WITH_CUDA, the
// cuda_*.cpp units and seqpar_compiled_cuda.cu): main.cpp hands a --device cuda run here.
// device_launch.hpp says which plans, precisions and communicators it offers.
#pragma once

#include "launch.hpp"
#include "options.hpp"

namespace seqpar::inline v0 {
class MpiComm;
}

namespace ner {

/// Runs the command of `o` (its model resolved) on the GPU: the plan's ranks as threads of
/// this process sharing the current GPU (CudaThreadComm), or, when `launch` is a job of
/// processes, this process's rank on the communicator `launch.world` holds
/// (cuda_commands.cu).
int run_cuda(const Options& o, const Launch& launch);

/// The CUDA GPUs this process sees; 0 without a driver or a device (cuda_launch.cu).
int visible_gpus();

/// One process of a job under mpirun or srun with --device cuda: training runs on NcclComm
/// over `mpi` (rank 0's NCCL id broadcast by MPI), on the GPU of the process's rank on its
/// node; a node with more processes than GPUs is refused (exit 2, said by rank 0). Eval and
/// predict run on rank 0 alone (cuda_launch.cu).
int run_cuda_processes(const Options& o, Launch launch, seqpar::MpiComm& mpi);

}  // namespace ner

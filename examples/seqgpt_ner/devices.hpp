// What seqgpt_ner needs of its devices: the GPUs a process sees, what the memory lines call
// a rank's device, and on GPUs under mpirun or srun the world of processes: NcclComm over
// MPI, each process on a GPU of its own (devices.cpp; the CUDA parts exist in a build with
// CUDA: SEQPAR_NER_WITH_CUDA).
#pragma once

#include <string>
#include <string_view>

#include "seqpar/comm/any_comm.hpp"

namespace seqpar::inline v0 {
class MpiComm;
}

namespace ner {

#if defined(SEQPAR_NER_WITH_CUDA)
inline constexpr bool built_with_cuda = true;
#else
inline constexpr bool built_with_cuda = false;
#endif

/// OpenMP threads for the calling thread's parallel regions (a rank's; at least 1).
void set_threads(int n);

/// The CUDA GPUs this process sees; 0 without a driver, a device, or CUDA in the build.
int visible_gpus();

/// The device of the calling thread as the memory lines name it: "cpu", or on Cuda the GPU
/// it runs on, "cuda:INDEX NAME" (e.g. "cuda:0 NVIDIA H200").
std::string device_label(std::string_view device);

/// The world of a job of processes on `device`: `mpi` itself on the CPU; on GPUs NcclComm
/// over it, each process on the GPU of its rank on its node among those it sees (all of the
/// node's, or the one the launcher bound to it: Slurm's --gpus-per-task=1 or --gpu-bind).
/// Collective; every process refuses alike (rank 0 says why) when two processes of a node
/// would share a GPU, one sees none, or the build has no NCCL.
seqpar::AnyComm process_world(seqpar::MpiComm& mpi, std::string_view device,
                              const std::string& launcher);

}  // namespace ner

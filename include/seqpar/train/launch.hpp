#pragma once
// Where the ranks of a run live: threads of this process (ThreadComm; on Cuda the threads
// share one GPU, CudaThreadComm), or one per process when mpirun or srun started it (the
// program makes the world: MpiComm, or NcclComm over it). What the launcher says before MPI
// starts (process_launch_from_environment), one body run on every rank either way
// (run_world), and the check that each process of a node has a GPU of its own.

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "seqpar/backend/device.hpp"  // DeviceKind
#include "seqpar/comm/any_comm.hpp"
#include "seqpar/comm/text.hpp"  // Refusal, decide_on_writer: decisions every rank follows
#include "seqpar/comm/thread_comm.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/core/separate_compilation.hpp"  // SEQPAR_CUDA_BACKEND
#if defined(SEQPAR_CUDA_BACKEND)
#include "seqpar/comm/cuda_thread_comm.hpp"
#endif

namespace seqpar::inline v0 {

/// This machine's host name ("localhost" when it has none).
inline std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

/// This process as one rank of several, read from what the launcher sets before MPI starts:
/// Open MPI's mpirun (OMPI_COMM_WORLD_*), a PMI launcher (MPICH's mpiexec: PMI_*), Slurm's
/// srun (SLURM_PROCID with SLURM_STEP_NUM_TASKS: an sbatch script's one process has
/// SLURM_NTASKS but no step), or a PMIx launcher (PMIX_RANK; no size).
struct ProcessLaunch {
  std::string launcher;  // "mpirun", "mpiexec (PMI)", "srun", "PMIx launcher"
  int rank = 0;          // as the launcher says; MPI's own is the one used once it runs
  int size = 0;          // 0: the launcher does not say
};

inline std::optional<ProcessLaunch> process_launch_from_environment() {
  const auto number = [](const char* name) -> std::optional<int> {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return std::nullopt;
    const auto n = detail::parse_number<std::int64_t>(v);
    if (!n || *n < 0 || *n > 1 << 24) return std::nullopt;
    return static_cast<int>(*n);
  };
  const auto from = [&](const char* launcher, const char* rank,
                        const char* size) -> std::optional<ProcessLaunch> {
    const auto r = number(rank), s = size ? number(size) : std::optional<int>(0);
    if (!r || !s) return std::nullopt;
    return ProcessLaunch{launcher, *r, *s};
  };
  if (auto l = from("mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")) return l;
  if (auto l = from("mpiexec (PMI)", "PMI_RANK", "PMI_SIZE")) return l;
  if (auto l = from("srun", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS")) return l;
  if (auto l = from("PMIx launcher", "PMIX_RANK", nullptr)) return l;
  return std::nullopt;
}

/// The ranks of a run: `processes` empty, `threads` ranks as threads of this process;
/// otherwise this process is rank processes.rank() of processes.size(), started by
/// `launcher`.
struct RankLaunch {
  AnyComm processes;
  std::string launcher;    // for messages: "mpirun", "srun", ...
  int threads = 1;         // ranks as threads, without a launcher
  int node_processes = 1;  // processes of this run on this node: they share its cores

  bool under_launcher() const { return static_cast<bool>(processes); }
  int world_size() const { return under_launcher() ? processes.size() : threads; }
  /// The process that prints, owns the output folder and writes files (world rank 0).
  bool writer() const { return processes.rank() == 0; }
  /// How the world came to be, for messages ("mpirun started 8 processes", "2 thread ranks").
  std::string origin() const {
    if (!under_launcher())
      return std::to_string(threads) + (threads == 1 ? " thread rank" : " thread ranks");
    const int n = processes.size();
    return launcher + " started " + std::to_string(n) + " process" + (n == 1 ? "" : "es");
  }
  /// How the ranks run, for the plan line.
  std::string how() const {
    return under_launcher() ? "processes under " + launcher
                            : std::string("threads of this process");
  }
};

/// Runs body(AnyComm& world) on every rank: on `launch.threads` threads of this process
/// (run_ranks: a rank that fails makes the others fail promptly and the first failure is
/// rethrown; on DeviceKind::cuda each thread's ThreadComm becomes a CudaThreadComm, its own
/// stream on the one GPU), or once in this process when it is one of several (its world is
/// launch.processes).
template <class F>
void run_world(const RankLaunch& launch, DeviceKind device, F&& body) {
  if (launch.under_launcher()) {
    AnyComm world = launch.processes;
    body(world);
    return;
  }
  run_ranks(launch.threads, [&](ThreadComm& c) {
#if defined(SEQPAR_CUDA_BACKEND)
    if (device == DeviceKind::cuda) {
      AnyComm world{CudaThreadComm(c)};
      body(world);
      return;
    }
#endif
    SEQPAR_CHECK(device == DeviceKind::cpu, "device '", device_name(device),
                 "' is not built into this program");
    AnyComm world(c);
    body(world);
  });
}

/// One process of a job on GPUs, as it will train: its world rank, its node (host name),
/// how many processes of the job share the node, the GPUs it sees, and the identity of the
/// GPU it takes (empty when it sees none).
struct ProcessGpu {
  int rank = 0;
  std::string node;
  int node_processes = 1, visible_gpus = 0;
  std::string gpu;  // e.g. the GPU's UUID
};

/// Why this job cannot give each process a GPU of its own (NCCL refuses two ranks on one
/// GPU), naming the first rank concerned; empty when every process has one. A launcher may
/// show each process all the node's GPUs (the process takes the one of its rank on the
/// node) or bind one to each (Slurm's --gpus-per-task=1 or --gpu-bind; mpirun's per-rank
/// CUDA_VISIBLE_DEVICES): either works while no two processes of a node take the same GPU.
inline std::string gpu_binding_problem(const std::vector<ProcessGpu>& ranks,
                                       std::string_view launcher) {
  for (const auto& r : ranks)
    if (r.visible_gpus == 0)
      return "DeviceKind::cuda under " + std::string(launcher) + ": rank " +
             std::to_string(r.rank) + " (node " + r.node +
             ") sees no CUDA GPU (no driver, or CUDA_VISIBLE_DEVICES hides them all); run with "
             "DeviceKind::cpu";
  for (std::size_t i = 0; i < ranks.size(); ++i)
    for (std::size_t j = 0; j < i; ++j) {
      const auto &a = ranks[j], &b = ranks[i];
      if (a.node != b.node || a.gpu != b.gpu) continue;
      const std::string gpus =
          std::to_string(b.visible_gpus) + " GPU" + (b.visible_gpus == 1 ? "" : "s");
      return "DeviceKind::cuda under " + std::string(launcher) + ": ranks " +
             std::to_string(a.rank) + " and " + std::to_string(b.rank) + " would share GPU " +
             b.gpu + " on node " + b.node + " (" + std::to_string(b.node_processes) +
             " processes there, each seeing " + gpus +
             "); each process takes a GPU of its own (NCCL): start at most as many processes per "
             "node as it has GPUs, or have the launcher bind one GPU to each, or start the "
             "program without a launcher to run the ranks as threads sharing one GPU";
    }
  return {};
}

}  // namespace seqpar::inline v0

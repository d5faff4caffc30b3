// How the ranks of a seqgpt_ner run exist: as threads of this process (ThreadComm; on Cuda
// CudaThreadComm, the threads sharing one GPU), or one per process when mpirun or srun
// started it (the world of processes, MpiComm made by main.cpp; on Cuda NcclComm over it,
// made by cuda_launch.cu). One training body runs on either; only rank 0 prints and writes
// files, and every rank's memory is gathered there, one line per rank.
#pragma once

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "seqpar/core/separate_compilation.hpp"  // SEQPAR_CUDA_BACKEND
#if defined(SEQPAR_CUDA_BACKEND)
#include <cuda_runtime.h>

#include "seqpar/backend/cuda/device.hpp"
#include "seqpar/backend/cuda/error.hpp"
#include "seqpar/comm/cuda_thread_comm.hpp"
#endif

#include "seqpar/backend/device.hpp"
#include "seqpar/comm/any_comm.hpp"
#include "seqpar/comm/thread_comm.hpp"
#include "seqpar/core/arena.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/parse.hpp"

namespace ner {

/// This process as one rank of several, read from what the launcher sets in the environment
/// before MPI is started: Open MPI's mpirun (OMPI_COMM_WORLD_*), a PMI or PMIx launcher
/// (MPICH's mpiexec: PMI_*; PMIx: PMIX_RANK), or Slurm's srun (SLURM_STEP_NUM_TASKS,
/// SLURM_PROCID). An sbatch script sets SLURM_NTASKS and SLURM_PROCID for its one process
/// too, so only a job step's task count counts as srun.
struct ProcessLaunch {
  std::string launcher;  // "mpirun", "mpiexec (PMI)", "PMIx launcher", "srun"
  int rank = 0;          // from the environment; MPI's own rank is the one used once it runs
  int size = 0;          // 0: the launcher does not say (PMIx)
};

inline std::optional<ProcessLaunch> process_launch_from_environment() {
  const auto number = [](const char* name) -> std::optional<int> {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return std::nullopt;
    const auto n = seqpar::detail::parse_number<std::int64_t>(v);
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

/// Where the ranks of a run live. `world` empty: threads of this process, started by
/// run_world. Otherwise this process is rank world.rank() of world.size() processes.
struct Launch {
  seqpar::AnyComm world;
  std::string launcher;    // for messages: "mpirun", "srun", ...
  int node_processes = 1;  // processes of this run on this node: they share its cores

  bool processes() const { return static_cast<bool>(world); }
  /// The process that prints, owns the output folder and writes files (world rank 0).
  bool writer() const { return world.rank() == 0; }
  /// How the ranks run, for the plan line.
  std::string how() const {
    return processes() ? "processes under " + launcher : std::string("threads of this process");
  }
};

/// The message for a job whose process count is not the plan's.
inline std::string world_size_mismatch(std::string_view plan, int needed, const Launch& l) {
  return "--plan " + std::string(plan) + " needs " + std::to_string(needed) + " ranks, but " +
         l.launcher + " started " + std::to_string(l.world.size()) + " process" +
         (l.world.size() == 1 ? "" : "es") + "; launch it with " + std::to_string(needed) +
         " (e.g. mpirun -np " + std::to_string(needed) + ", srun -n " + std::to_string(needed) +
         ") or pick a plan for " + std::to_string(l.world.size()) + " ranks";
}

/// Runs body(AnyComm& world) on every rank of an n-rank run on device Dev: on n threads of
/// this process (run_ranks: a rank that fails makes the others fail promptly and the first
/// failure is rethrown; on Cuda each thread's ThreadComm becomes a CudaThreadComm, its own
/// stream on the one GPU), or once in this process when it is one of n processes (a rank
/// that fails ends the job in main.cpp, with MPI_Abort).
template <seqpar::Device Dev, class F>
void run_world(const Launch& launch, int n, std::string_view plan, F&& body) {
  if (!launch.processes()) {
    seqpar::run_ranks(n, [&](seqpar::ThreadComm& c) {
#if defined(SEQPAR_CUDA_BACKEND)
      if constexpr (std::is_same_v<Dev, seqpar::Cuda>) {
        seqpar::AnyComm world{seqpar::CudaThreadComm(c)};
        body(world);
        return;
      }
#endif
      seqpar::AnyComm world(c);
      body(world);
    });
    return;
  }
  SEQPAR_CHECK(launch.world.size() == n, world_size_mismatch(plan, n, launch));
  seqpar::AnyComm world = launch.world;
  body(world);
}

/// What the memory lines call device Dev for the calling thread: "cpu", or on Cuda the GPU
/// the thread runs on, "cuda:INDEX NAME" (e.g. "cuda:0 NVIDIA H200").
template <seqpar::Device Dev>
std::string device_label() {
  return Dev::name;
}

#if defined(SEQPAR_CUDA_BACKEND)
template <>
inline std::string device_label<seqpar::Cuda>() {
  int gpu = 0;
  SEQPAR_CUDA_CHECK(cudaGetDevice(&gpu));
  cudaDeviceProp p{};
  SEQPAR_CUDA_CHECK(cudaGetDeviceProperties(&p, gpu));
  return "cuda:" + std::to_string(gpu) + " " + p.name;
}
#endif

/// The peak bytes of one rank over a run, by category (the arena's peaks are per step:
/// on Cuda the device arena's, with the pinned host arena of offloaded state counted in).
struct RankMemory {
  /// The device label travels as this many bytes (longer ones are cut).
  static constexpr std::size_t device_bytes = 64;
  std::int64_t rank = 0, pid = 0, total = 0;
  std::array<std::int64_t, seqpar::memory_kinds> peak{};
  std::string device = "cpu";  // device_label<Dev>() of the rank

  void add(const seqpar::MemoryStats& m) {
    total = std::max(total, m.total_peak);
    for (std::size_t k = 0; k < peak.size(); ++k) peak[k] = std::max(peak[k], m.peak[k]);
  }
};

/// Collective: every rank's peaks, gathered to all (rank order). Each rank sends
/// [rank, pid, total, peak by category, its device label's bytes as 8-byte words].
inline std::vector<RankMemory> gather_memory(seqpar::AnyComm& world, RankMemory mine) {
  constexpr std::size_t label_words = RankMemory::device_bytes / 8;
  constexpr std::size_t head = 3 + seqpar::memory_kinds, fields = head + label_words;
  mine.rank = world.rank();
  mine.pid = ::getpid();
  std::vector<std::int64_t> out(fields), all(fields * static_cast<std::size_t>(world.size()));
  out[0] = mine.rank, out[1] = mine.pid, out[2] = mine.total;
  std::copy(mine.peak.begin(), mine.peak.end(), out.begin() + 3);
  std::memcpy(out.data() + head, mine.device.data(),
              std::min(mine.device.size(), RankMemory::device_bytes));
  world.all_gather(out.data(), all.data(), fields);
  std::vector<RankMemory> ranks(static_cast<std::size_t>(world.size()));
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const std::int64_t* f = all.data() + r * fields;
    ranks[r].rank = f[0], ranks[r].pid = f[1], ranks[r].total = f[2];
    std::copy(f + 3, f + head, ranks[r].peak.begin());
    const char* label = reinterpret_cast<const char*>(f + head);
    ranks[r].device.assign(label, strnlen(label, RankMemory::device_bytes));
  }
  return ranks;
}

/// One line per rank, like nvidia-smi's per-process view: rank, pid, device, peak in all
/// and by category.
inline void print_memory(const std::vector<RankMemory>& ranks) {
  const auto mib = [](std::int64_t b) { return static_cast<double>(b) / (1 << 20); };
  std::printf("peak memory per rank (MiB)\n");
  for (const auto& r : ranks) {
    std::printf("  rank %lld  pid %lld  %s  %9.1f:", static_cast<long long>(r.rank),
                static_cast<long long>(r.pid), r.device.c_str(), mib(r.total));
    // The categories this rank used (offload's host ones and ZeRO's transient ones only
    // under the plans and options that have them).
    for (std::size_t k = 0; k < r.peak.size(); ++k)
      if (r.peak[k] > 0)
        std::printf("  %s %.1f", seqpar::memory_name(static_cast<seqpar::Memory>(k)),
                    mib(r.peak[k]));
    std::printf("\n");
  }
}

inline nlohmann::json memory_json(const std::vector<RankMemory>& ranks) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : ranks) {
    nlohmann::json by = nlohmann::json::object();
    for (std::size_t k = 0; k < r.peak.size(); ++k)
      by[seqpar::memory_name(static_cast<seqpar::Memory>(k))] = r.peak[k];
    list.push_back({{"rank", r.rank},
                    {"pid", r.pid},
                    {"device", r.device},
                    {"peak_bytes", r.total},
                    {"by", by}});
  }
  return {{"event", "memory"}, {"ranks", list}};
}

}  // namespace ner

#pragma once
// A process's rank on its node, which picks its GPU: what its launcher says (launcher_local_rank)
// checked against what MPI finds (checked_local_rank; MpiComm's node_local_rank calls both).

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>

#include "seqpar/core/error.hpp"
#include "seqpar/core/parse.hpp"

namespace seqpar::inline v0 {

/// A node-local rank as a launcher set it, and the variable that holds it.
struct LauncherLocalRank {
  int rank = 0;
  std::string variable;  // e.g. "OMPI_COMM_WORLD_LOCAL_RANK"
};

/// The node-local rank the launcher gave this process, or nullopt when none says: Open MPI's
/// mpirun (OMPI_COMM_WORLD_LOCAL_RANK), MPICH's Hydra (MPI_LOCALRANKID), Slurm's srun
/// (SLURM_LOCALID), torchrun and torch.distributed.launch (LOCAL_RANK). The first set is
/// taken, most specific launcher first: mpirun inside an sbatch script inherits the script's
/// SLURM_LOCALID, which is not its own. `env` reads a variable (std::getenv by default);
/// a value that is not a whole number from 0 to 2^24 is an error naming the variable.
inline std::optional<LauncherLocalRank> launcher_local_rank(
    const std::function<const char*(const char*)>& env = [](const char* n) {
      return std::getenv(n);
    }) {
  for (const char* name :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK"}) {
    const char* v = env(name);
    if (v == nullptr || *v == '\0') continue;
    const auto n = detail::parse_number<std::int64_t>(v);
    SEQPAR_CHECK(n && *n >= 0 && *n <= (1 << 24), "the launcher's node-local rank ", name, "='", v,
                 "' is not a whole number from 0 to 16777216");
    return LauncherLocalRank{static_cast<int>(*n), name};
  }
  return std::nullopt;
}

/// The node-local rank of world rank `rank`: `shared`, its rank among the processes sharing
/// its memory (MPI's split by node), where the launcher says the same or says nothing; a
/// launcher that says otherwise is an error naming both values and the rank (a GPU taken
/// twice, or one left idle, would follow).
inline int checked_local_rank(int shared, const std::optional<LauncherLocalRank>& launcher,
                              int rank) {
  SEQPAR_CHECK(!launcher || launcher->rank == shared, "rank ", rank,
               ": the launcher's node-local rank ", launcher ? launcher->variable : "", "=",
               launcher ? launcher->rank : 0, " differs from its rank ", shared,
               " among the processes on its node (MPI's shared-memory split); the GPU a process "
               "takes follows its node-local rank, so the two must agree");
  return shared;
}

}  // namespace seqpar::inline v0

// The node-local rank that picks a process's GPU: what each launcher sets (the most specific
// launcher's variable first), and a launcher that disagrees with MPI's split named with both
// values and the rank.
#include <doctest/doctest.h>

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "../support/errors.hpp"
#include "seqpar/comm/local_rank.hpp"
#include "seqpar/core/error.hpp"

using namespace seqpar;

namespace {

// launcher_local_rank over the variables `vars` (nothing else set).
std::optional<LauncherLocalRank> from(const std::map<std::string, std::string>& vars) {
  return launcher_local_rank([&](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

using test::error_of;

}  // namespace

TEST_CASE("each launcher's node-local rank, the most specific launcher's first") {
  CHECK_FALSE(from({}).has_value());
  CHECK_FALSE(from({{"LOCAL_RANK", ""}}).has_value());
  const auto check = [](const std::map<std::string, std::string>& vars, int rank,
                        const char* variable) {
    const auto l = from(vars);
    REQUIRE(l.has_value());
    CHECK(l->rank == rank);
    CHECK(l->variable == variable);
  };
  check({{"OMPI_COMM_WORLD_LOCAL_RANK", "3"}}, 3, "OMPI_COMM_WORLD_LOCAL_RANK");
  check({{"SLURM_LOCALID", "2"}}, 2, "SLURM_LOCALID");
  check({{"MPI_LOCALRANKID", "1"}}, 1, "MPI_LOCALRANKID");
  check({{"LOCAL_RANK", "7"}}, 7, "LOCAL_RANK");
  // mpirun inside an sbatch script: the script's SLURM_LOCALID (0) is not this process's.
  check({{"SLURM_LOCALID", "0"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "5"}}, 5,
        "OMPI_COMM_WORLD_LOCAL_RANK");
  check({{"LOCAL_RANK", "0"}, {"SLURM_LOCALID", "4"}}, 4, "SLURM_LOCALID");
  CHECK(error_of([] {
          from({{"SLURM_LOCALID", "one"}});
        }) ==
        "the launcher's node-local rank SLURM_LOCALID='one' is not a whole number from 0 to "
        "16777216");
  CHECK(error_of([] {
          from({{"LOCAL_RANK", "-1"}});
        }).find("LOCAL_RANK='-1'") != std::string::npos);
}

TEST_CASE("the launcher's node-local rank is checked against MPI's shared-memory split") {
  CHECK(checked_local_rank(2, std::nullopt, 6) == 2);
  CHECK(checked_local_rank(2, LauncherLocalRank{2, "SLURM_LOCALID"}, 6) == 2);
  CHECK(error_of([] {
          checked_local_rank(1, LauncherLocalRank{0, "SLURM_LOCALID"}, 5);
        }) ==
        "rank 5: the launcher's node-local rank SLURM_LOCALID=0 differs from its rank 1 among "
        "the processes on its node (MPI's shared-memory split); the GPU a process takes "
        "follows its node-local rank, so the two must agree");
}

// seqgpt_ner: SeqGPT-style Chinese named-entity recognition with seqpar (docs/ner.md).
//
//   seqgpt_ner                                 a tiny BLOOM from scratch on the bundled corpus,
//                                              2 thread ranks, dev F1 at the end
//   seqgpt_ner --data_dir ../shared/data/cluener --zero-stage 2
//   mpirun -np 8 seqgpt_ner --tensor-parallel 2 --zero-stage 1      TP2 x ZeRO-1 over 4
//   seqgpt_ner --weights SeqGPT-560M --data_dir cluener              fine-tune published weights
//   seqgpt_ner eval | predict --text "..." | export --checkpoint F --to DIR
//
// The path from main to a training step:
//   main
//   -> seqpar::run_world           the ranks: threads, or the processes mpirun or srun started
//   -> ner::TrainRank::operator()  train.cpp: the loop of one rank
//   -> seqpar::AnyTrainer::step    the plan, model, device and precision chosen at launch
//   -> seqpar::Trainer<Model, Plan, Device, Precision>::step
// Before it, ner::run_command (command.cpp: the model resolved), ner::check_launch (the
// layout over the launch's ranks) and ner::prepare_training (the data, the output folder);
// after it, ner::finish_training.
#include <cstdio>
#include <exception>
#include <optional>

#include "command.hpp"
#include "devices.hpp"
#include "options.hpp"
#include "seqpar/comm/local_rank.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/train/launch.hpp"
#if defined(SEQPAR_WITH_MPI)
#include "seqpar/comm/mpi_comm.hpp"
#endif

namespace {

using ner::say;

// --local_rank N (torch.distributed.launch passes it) against this process's node-local rank
// `local` as `source` says it; empty when they agree.
std::string local_rank_disagreement(const ner::Options& o, int local, const std::string& source) {
  if (o.local_rank < 0 || o.local_rank == local) return "";
  return "--local_rank " + std::to_string(o.local_rank) + ", but " + source +
         " makes this process number " + std::to_string(local) + " on its node";
}

#if defined(SEQPAR_HAS_MPI_COMM)
// One rank of a job of processes: MPI's world is the run's. Only rank 0 prints (the others'
// stdout goes to /dev/null; their errors still reach stderr). A rank that fails otherwise
// prints its error and ends the whole job (MPI_Abort), so that no rank waits for it.
int run_processes(int argc, char** argv, const ner::Options& o, const std::string& launcher) {
  seqpar::MpiSession session(argc, argv);
  int rank = -1;
  try {
    seqpar::MpiComm mpi = seqpar::MpiComm::world();
    rank = mpi.rank();
    if (rank != 0 && std::freopen("/dev/null", "w", stdout) == nullptr)
      seqpar::detail::fail("rank ", rank, ": cannot send stdout to /dev/null");
    if (o.local_rank >= 0)
      if (const std::string why = local_rank_disagreement(
              o, seqpar::node_local_rank(mpi), launcher + " (rank " + std::to_string(rank) + ")");
          !why.empty())
        seqpar::detail::fail(why);
    return ner::run_command(o, ner::process_launch(mpi, o, launcher));
  } catch (const seqpar::Refusal& e) {
    say(rank == 0, e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "seqgpt_ner: rank %d: %s\n", rank, ner::in_flag_terms(e.what()).c_str());
  }
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  // Under mpirun or srun every process parses the same command line: rank 0 speaks for all.
  const std::optional<seqpar::ProcessLaunch> processes = seqpar::process_launch_from_environment();
  const bool speaks = !processes || processes->rank == 0;
  ner::Options o;
  try {
    o = ner::parse_options(argc, argv);
  } catch (const ner::UsageError& e) {
    if (speaks) {
      // A mistake is one line (with the nearest names); --help prints every option.
      if (e.what()[0] != '\0')
        std::fprintf(stderr, "seqgpt_ner: %s (seqgpt_ner --help lists every option)\n", e.what());
      else
        std::fputs(ner::usage(), stdout);
    }
    return e.what()[0] != '\0' ? 2 : 0;
  }
  // --device cuda where this build has no CUDA, or (as threads) no GPU: said before anything.
  if (o.device == "cuda" && (!ner::built_with_cuda || (!processes && ner::visible_gpus() == 0))) {
    say(speaks, ner::built_with_cuda
                    ? "--device cuda: this process sees no CUDA GPU (no driver, or "
                      "CUDA_VISIBLE_DEVICES hides them all); run with --device cpu"
                    : "--device cuda: this seqgpt_ner was built without CUDA; build it with the "
                      "CUDA toolkit (cmake --preset cuda, or -DSEQPAR_WITH_CUDA=ON) or run with "
                      "--device cpu");
    return 2;
  }
  if (processes) {
#if defined(SEQPAR_HAS_MPI_COMM)
    return run_processes(argc, argv, o, processes->launcher);
#else
    say(speaks, ("started by " + processes->launcher +
                 " as one of several processes, but this build has no MPI (configure with MPI "
                 "installed: the seqpar::mpi component); run it without " +
                 processes->launcher + " to have the ranks as threads")
                    .c_str());
    return 2;
#endif
  }
  try {
    if (const auto l = o.local_rank >= 0 ? seqpar::launcher_local_rank() : std::nullopt)
      if (const std::string why = local_rank_disagreement(o, l->rank, l->variable); !why.empty()) {
        say(true, why.c_str());
        return 2;
      }
    seqpar::RankLaunch launch;
    launch.threads = ner::thread_ranks(o);
    return ner::run_command(o, launch);
  } catch (const std::exception& e) {
    say(true, e.what());
    return 1;
  }
}

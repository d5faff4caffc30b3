// seqgpt_ner: SeqGPT-style Chinese named-entity recognition with seqpar.
//
//   seqgpt_ner                      train a tiny BLOOM from scratch on the bundled corpus
//                                   on 2 in-process ranks and print its dev F1
//   seqgpt_ner --data-dir ../shared/data/cluener --plan zero2x2
//   seqgpt_ner --weights SeqGPT-560M/pytorch_model.bin --tokenizer SeqGPT-560M/tokenizer.json
//              --data-dir cluener --plan single --lr 2e-5 --epochs 3
//   seqgpt_ner eval  [--out DIR]    dev F1 of the trained weights
//   seqgpt_ner predict --text "..." answers and entities as JSON lines
//   mpirun -np 4 seqgpt_ner --plan tp2dp2   one rank per process (also srun)
//   mpirun -np 4 seqgpt_ner --device cuda --precision bf16 --plan zero3x4
//                                   one GPU per process (NCCL); built with CUDA
//
// docs/ner.md describes the prompt and answer format, the data and the options.
#include <cstdio>
#include <exception>
#include <optional>
#include <stdexcept>

#include "data.hpp"
#include "deepspeed_config.hpp"
#include "device_launch.hpp"
#include "launch.hpp"
#include "models.hpp"
#include "options.hpp"
#include "plans.hpp"
#include "seqpar/core/error.hpp"

#if defined(SEQPAR_WITH_MPI)
#include "seqpar/comm/mpi_comm.hpp"
#endif
#if defined(SEQPAR_NER_WITH_CUDA)
#include "cuda_run.hpp"
#endif

namespace {

int run(const ner::Options& given, const ner::Launch& launch) {
  ner::Options o = given;
  o.model = ner::resolve_model(o);
#if defined(SEQPAR_NER_WITH_CUDA)
  if (o.device == "cuda") return ner::run_cuda(o, launch);
#endif
  return ner::run_cpu(o, launch);
}

#if defined(SEQPAR_HAS_MPI_COMM)
// One rank of a job of processes: MPI's world is the run's. Only rank 0 prints (the
// others' stdout goes to /dev/null; their errors still reach stderr). A rank that fails
// prints its error and ends the whole job (MPI_Abort), so that no rank waits for it.
int run_processes(int argc, char** argv, const ner::Options& o, const ner::ProcessLaunch& p) {
  seqpar::MpiSession session(argc, argv);
  ner::Launch launch;
  launch.launcher = p.launcher;
  int rank = -1;
  try {
    seqpar::MpiComm world = seqpar::MpiComm::world();
    rank = world.rank();
    launch.node_processes = seqpar::node_local_size(world);
    launch.world = seqpar::AnyComm(world);
    if (rank != 0 && std::freopen("/dev/null", "w", stdout) == nullptr)
      seqpar::detail::fail("rank ", rank, ": cannot send stdout to /dev/null");
    if (o.command == "train") {
      // A job of the wrong size is refused by every rank alike: said once, no abort.
      const int needed = ner::plan_world_size(o.plan);
      if (needed != world.size()) {
        if (rank == 0)
          std::fprintf(stderr, "seqgpt_ner: %s\n",
                       ner::world_size_mismatch(o.plan, needed, launch).c_str());
        return 2;
      }
    }
#if defined(SEQPAR_NER_WITH_CUDA)
    if (o.device == "cuda") {
      ner::Options resolved = o;
      resolved.model = ner::resolve_model(o);
      return ner::run_cuda_processes(resolved, launch, world);
    }
#endif
    return run(o, launch);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "seqgpt_ner: rank %d: %s\n", rank, e.what());
  }
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  // Under mpirun or srun every process parses the same command line: rank 0 speaks for all.
  const std::optional<ner::ProcessLaunch> processes = ner::process_launch_from_environment();
  const bool speaks = !processes || processes->rank == 0;
  ner::Options o;
  try {
    o = ner::parse_options(argc, argv);
  } catch (const std::invalid_argument& e) {
    if (speaks) {
      if (e.what()[0] != '\0') std::fprintf(stderr, "seqgpt_ner: %s\n\n", e.what());
      std::fputs(ner::usage(), e.what()[0] != '\0' ? stderr : stdout);
    }
    return e.what()[0] != '\0' ? 2 : 0;
  }
  // The DeepSpeed configuration maps onto the options before the plan is known: its ZeRO
  // stage spans every rank of the launch (the processes under mpirun, else the threads).
  try {
    if (!o.deepspeed.empty()) {
      SEQPAR_CHECK(o.command == "train", "--deepspeed configures training; ", o.command,
                   " takes no DeepSpeed configuration");
      const int ranks = processes && processes->size > 0 ? processes->size : ner::in_process_ranks;
      const auto report = ner::apply_deepspeed_file(o, ranks);
      if (speaks)
        for (const auto& line : report.lines()) std::printf("%s\n", line.c_str());
    }
    ner::check_precision_device(o, o.device);
    ner::check_loss_scale_flags(o);
  } catch (const std::exception& e) {  // a file's content, not the command line: exit 1
    if (speaks) std::fprintf(stderr, "seqgpt_ner: %s\n", e.what());
    return 1;
  }
  if (o.command == "train" && ner::plan_world_size(o.plan) == 0) {
    if (speaks)
      std::fprintf(stderr, "seqgpt_ner: --plan '%s' is not one of: %s\n", o.plan.c_str(),
                   ner::plan_list().c_str());
    return 2;
  }
  // The device this build and the plan allow (the precision's was checked above).
  try {
    ner::check_device(o);
  } catch (const seqpar::Error& e) {
    if (speaks) std::fprintf(stderr, "seqgpt_ner: %s\n", e.what());
    return 2;
  }
#if defined(SEQPAR_NER_WITH_CUDA)
  // Under a launcher every rank counts its node's GPUs (run_cuda_processes).
  if (o.device == "cuda" && !processes && ner::visible_gpus() == 0) {
    std::fprintf(stderr, "seqgpt_ner: %s\n", ner::no_gpu_for_threads().c_str());
    return 2;
  }
#endif
  if (processes) {
#if defined(SEQPAR_HAS_MPI_COMM)
    return run_processes(argc, argv, o, *processes);
#else
    if (speaks)
      std::fprintf(stderr,
                   "seqgpt_ner: started by %s as one of several processes, but this build has no "
                   "MPI (configure with MPI installed: the seqpar::mpi component); run it "
                   "without %s to have the plan's ranks as threads\n",
                   processes->launcher.c_str(), processes->launcher.c_str());
    return 2;
#endif
  }
  try {
    return run(o, ner::Launch{});
  } catch (const seqpar::Error& e) {
    std::fprintf(stderr, "seqgpt_ner: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "seqgpt_ner: unexpected error: %s\n", e.what());
    return 1;
  }
}

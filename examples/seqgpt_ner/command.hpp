// seqgpt_ner's commands as calls: what main runs once it has parsed its command line, and what
// the Python package (python/) runs with the same Options. The model is resolved, the command
// runs on the ranks of its launch, and its outcome comes back as well as its exit code.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "devices.hpp"  // seqpar::MpiComm, declared
#include "options.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/train/launch.hpp"

namespace ner {

/// A layout the launch cannot run, or a precision or device this build lacks (check_launch):
/// a command-line mistake, exit code 2.
struct LaunchRefusal : seqpar::Error {
  using Error::Error;
};

/// What a command gave back: the exit code main returns, and the outcome a caller that goes
/// on reads: train: the run's (global_step, completed, early_stopped, stopped_by, metrics,
/// best, weights, last_checkpoint, model_dir); eval: {metrics, scores}; predict: the
/// prediction lines as JSON; export: {dir}. Ranks other than the writer get code 0 and no
/// value for eval, predict and export, which run on the writer alone.
struct Outcome {
  int code = 0;
  nlohmann::json value;
};

/// The ranks of a command without a launcher: --ranks, else the plan name's, else tensor x
/// pipeline, at least `at_least` (the command line's default run is data parallel over 2
/// ranks; one step at a time from Python starts with one).
int thread_ranks(const Options& o, int at_least = 2);

/// The launch of one process of a job `launcher` started, over MPI's world `mpi`: its
/// processes are the ranks (a --ranks that differs is refused, every process alike), and a
/// training run's world is process_world's. Exists where the program has MPI.
seqpar::RankLaunch process_launch(seqpar::MpiComm& mpi, const Options& o,
                                  const std::string& launcher);

/// A library message in this program's terms (its flags for the fields they set), to stderr
/// when `speaks` (the writer's, for what every rank says alike).
void say(bool speaks, const char* what);

/// What every command does first, every rank alike: applies --deepspeed (its report said by
/// the writer), resolves the model (--weights DIR: the compiled model its config.json
/// describes, with its tokenizer) and a training run's fine-tuning defaults. Throws
/// seqpar::Error naming the file or field.
void prepare_command(Options& o, const seqpar::RankLaunch& launch);

/// Runs the prepared command o.command on the ranks of `launch`: train on every rank; eval,
/// predict and export on the writer alone. Throws LaunchRefusal (above), seqpar::Refusal for
/// what every rank refuses alike, seqpar::Error for a bad file or value, anything else for a
/// fault. With `print_predictions` false, predict returns its lines without printing them.
Outcome execute(const Options& o, const seqpar::RankLaunch& launch, bool print_predictions = true);

/// prepare_command and execute with their refusals said once, by the writer, in this
/// program's flag terms: exit code 2 for LaunchRefusal, 1 for the other refusals and for a
/// file prepare_command could not use, the command's own otherwise. Other errors propagate.
int run_command(Options o, const seqpar::RankLaunch& launch);

}  // namespace ner

// seqgpt_ner train: what the ranks of a run share (Training, made by prepare_training before
// any rank starts), the loop each rank runs (TrainRank), and the end of the run
// (finish_training). The run around the step is seqpar's TrainingRun; the task's parts are
// ner_data.hpp's and ner_eval.hpp's.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models.hpp"
#include "ner_data.hpp"
#include "ner_eval.hpp"
#include "options.hpp"
#include "seqpar/data/batching.hpp"
#include "seqpar/train/launch.hpp"
#include "seqpar/train/run.hpp"

namespace ner {

/// The layout of a training run over its launch, its model's services and the batch of a
/// step, checked before any data is read (a refusal here is a command-line one: exit 2).
struct Launched {
  seqpar::PlanDesc layout;
  const ModelInfo* model = nullptr;
  seqpar::BatchShape batch;
  seqpar::Interval eval, save;            // when the run evaluates and saves
  std::optional<seqpar::BestModel> best;  // what the evaluations choose by
};
Launched check_launch(const Options& o, const seqpar::RankLaunch& launch);

/// OpenMP threads for each rank: --threads, else the node's cores shared by the ranks the
/// launch puts on it (its processes there, or its threads), at least 1.
int rank_threads(const Options& o, const seqpar::RankLaunch& launch);

/// What the ranks of a training run share, made before any of them starts.
struct Training {
  Options o;
  seqpar::RankLaunch launch;
  Launched run;
  std::unique_ptr<ModelServices> services;
  NerData data;
  TokenizerChoice tokenizer_choice;
  std::optional<seqpar::Tokenizer> tokenizer;
  SplitExamples train_ex;
  // The dev records every evaluation during training scores (a stratified sample, or all),
  // and their examples (the evaluation loss).
  seqpar::AnyRecords dev;
  seqpar::RecordSample dev_sample;
  seqpar::ExampleSet dev_ex;
  std::int64_t max_new_tokens = 0, per_epoch = 0, total = 0;
  int threads = 1;
  seqpar::TrainOptions options;
  seqpar::BatchingOptions batching;
  seqpar::RunSpec spec;  // the run of every rank (its data hooks are each rank's)
  // What rank 0 found, for finish_training.
  EvalResult final_eval;
  seqpar::RunResult result;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
};

/// Reads the data and makes the tokenizer and examples (in memory, or from the folder's
/// cache) and the run's spec; writes nothing (the run writes the program's files once it has
/// taken the folder: RunHooks::on_take). Every process of a job calls it.
std::unique_ptr<Training> prepare_training(const Options& o, const seqpar::RankLaunch& launch,
                                           const Launched& run);

/// The loop of one rank: seqpar::run_world calls it on every rank of the run.
struct TrainRank {
  Training& t;
  void operator()(seqpar::AnyComm& world) const;
};

/// The end of a run (the writer): every rank's memory and bytes, the transformers directory
/// of a finished run, the last F1. Returns the exit code.
int finish_training(Training& t);

/// `seqgpt_ner export`: the transformers directory of a checkpoint (export.cpp).
int export_command(const Options& o);

}  // namespace ner

// seqgpt_ner's commands as calls (command.hpp).
#include "command.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <memory>

#include "models.hpp"
#include "seqpar/train/deepspeed_config.hpp"
#include "task_eval.hpp"
#include "train.hpp"
#if defined(SEQPAR_WITH_MPI)
#include "seqpar/comm/mpi_comm.hpp"
#endif

namespace ner {

namespace {

// The model: --model; the compiled model whose shape --weights' config.json describes (a
// Hugging Face directory, with its tokenizer or --tokenizer); a weights file is
// SeqGPT-560M's; eval and predict without --weights take the trained run's; else tiny.
void resolve_model(Options& o) {
  if (!o.weights.empty() && std::filesystem::is_directory(o.weights)) {
    const auto hf = seqpar::HfModelDir::open(o.weights);
    if (o.model.empty()) o.model = model_of_shape(hf.config, hf.config_file.string()).name;
    hf.check(model_info(o.model).config, o.model);
    // Its weights know its tokenizer's ids only: never one built from the data.
    if (o.tokenizer.empty() && hf.tokenizer.empty())
      throw seqpar::MissingFile((o.weights / "tokenizer.json").string() +
                                " is missing: the weights of " + o.weights.string() +
                                " were trained with a tokenizer of their own; add it there or "
                                "pass --tokenizer FILE");
    if (o.tokenizer.empty()) o.tokenizer = hf.tokenizer;
    o.model_dir = o.weights;
    o.weights = hf.weights;
  }
  if (o.model.empty() && o.command != "train" && o.weights.empty())
    if (const auto info = RunInfo::read(o.out_dir); info && !info->model.empty())
      o.model = info->model;
  if (o.model.empty()) o.model = o.weights.empty() ? "tiny" : "seqgpt560m";
  check_compiled(o.model);
}

// A training run's outcome (command.hpp's Outcome::value).
nlohmann::json train_outcome(const Training& t) {
  const seqpar::RunResult& r = t.result;
  nlohmann::json v = {{"global_step", r.step},
                      {"completed", r.completed},
                      {"early_stopped", r.early_stopped},
                      {"stopped_by", r.stop ? nlohmann::json(r.stop.describe()) : nullptr},
                      {"signal", r.stop ? r.stop.signal : 0},
                      {"weights", r.weights.string()},
                      {"last_checkpoint", r.last_checkpoint.string()},
                      {"output_dir", t.o.out_dir.string()}};
  if (r.completed && t.spec.hf_export) v["model_dir"] = t.spec.hf_export->dir.string();
  if (t.final_eval.prompts > 0)
    v["metrics"] = eval_metrics(t.final_eval.task, std::numeric_limits<double>::quiet_NaN());
  if (t.spec.best && r.evaluations.best)
    v["best"] = {{"step", r.evaluations.best->step},
                 {"metric", t.spec.best->key()},
                 {"value", r.evaluations.best_value},
                 {"checkpoint", r.evaluations.best->checkpoint}};
  return v;
}

}  // namespace

int thread_ranks(const Options& o, int at_least) {
  const seqpar::PlanDesc& l = o.train.plan.layout;
  if (o.ranks > 0) return o.ranks;
  if (l.data > 0) return l.world_size();
  return std::max(at_least, l.tensor * l.pipeline);
}

#if defined(SEQPAR_HAS_MPI_COMM)
seqpar::RankLaunch process_launch(seqpar::MpiComm& mpi, const Options& o,
                                  const std::string& launcher) {
  if (o.ranks != 0 && o.ranks != mpi.size())
    throw seqpar::Refusal("--ranks " + std::to_string(o.ranks) + ", but " + launcher + " started " +
                          std::to_string(mpi.size()) +
                          " processes; under a launcher its processes are the ranks");
  seqpar::RankLaunch launch;
  launch.launcher = launcher;
  launch.node_processes = seqpar::node_local_size(mpi);
  launch.processes =
      o.command == "train" ? process_world(mpi, o.device, launcher) : seqpar::AnyComm(mpi);
  return launch;
}
#endif

void say(bool speaks, const char* what) {
  if (speaks) std::fprintf(stderr, "seqgpt_ner: %s\n", in_flag_terms(what).c_str());
}

void prepare_command(Options& o, const seqpar::RankLaunch& launch) {
  if (!o.deepspeed.empty()) {
    SEQPAR_CHECK(o.command == "train", "--deepspeed configures training; ", o.command,
                 " takes no DeepSpeed configuration");
    const auto report = seqpar::apply_deepspeed_file(o.train, o.deepspeed, launch.world_size());
    for (const auto& line : report.lines())
      if (launch.writer()) std::printf("%s\n", in_flag_terms(line).c_str());
  }
  resolve_model(o);
  if (o.command == "train") apply_fine_tuning_defaults(o);
}

Outcome execute(const Options& o, const seqpar::RankLaunch& launch, bool print_predictions) {
  if (o.command != "train") {
    if (!launch.writer()) return {};
    if (o.command == "export") return {export_command(o), {{"dir", o.export_to.string()}}};
    if (o.command == "eval") return {0, eval_command(o)};
    nlohmann::json lines = nlohmann::json::array();
    for (const auto& line : predict_command(o, print_predictions))
      lines.push_back(nlohmann::json::parse(line));
    return {0, std::move(lines)};
  }
  Launched run;
  try {
    run = check_launch(o, launch);  // before any data is read
  } catch (const seqpar::Error& e) {
    throw LaunchRefusal(e.what());
  }
  const std::unique_ptr<Training> t = prepare_training(o, launch, run);
  // The run refuses (every rank alike) before it writes; SIGTERM (what Slurm and mpirun send
  // first) and SIGINT stop every rank at the next step boundary with a checkpoint.
  seqpar::run_world(launch, o.device == "cuda" ? seqpar::DeviceKind::cuda : seqpar::DeviceKind::cpu,
                    TrainRank{*t});
  Outcome out;
  out.code = finish_training(*t);
  out.value = train_outcome(*t);
  return out;
}

int run_command(Options o, const seqpar::RankLaunch& launch) {
  const bool writer = launch.writer();
  try {
    prepare_command(o, launch);
  } catch (const seqpar::Error& e) {  // a file's content, not the command line: exit 1
    say(writer, e.what());
    return 1;
  }
  try {
    return execute(o, launch).code;
  } catch (const LaunchRefusal& e) {
    say(writer, e.what());
    return 2;
  } catch (const seqpar::Refusal& e) {
    say(writer, e.what());
    return 1;
  }
}

}  // namespace ner

#pragma once
// TrainingRun: the run around any trainer's steps (a Trainer<M, Plan, D, P> or an
// AnyTrainer), on every rank. Made from a RunSpec, it opens in one collective call; then the
// program loops and finishes:
//
//   seqpar::TrainingRun run(trainer, world, {.output_dir = "out", .total_steps = 100});
//   while (run.running()) run.after_step(trainer.step(next_batch(run.step())));
//   run.finish();

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "seqpar/comm/agreement.hpp"
#include "seqpar/comm/any_comm.hpp"
#include "seqpar/comm/text.hpp"
#include "seqpar/core/arena.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/parallel/mesh.hpp"
#include "seqpar/plan/registry.hpp"
#include "seqpar/train/hf_model_dir.hpp"
#include "seqpar/train/metrics_log.hpp"
#include "seqpar/train/rank_report.hpp"
#include "seqpar/train/run_folder.hpp"
#include "seqpar/train/run_keys.hpp"
#include "seqpar/train/run_spec.hpp"
#include "seqpar/train/stop.hpp"
#include "seqpar/train/train_options.hpp"
#include "seqpar/train/trainer.hpp"

namespace seqpar::inline v0 {

/// A trainer a TrainingRun can drive: Trainer<M, Plan, D, P> and AnyTrainer.
template <class T>
concept RunnableTrainer = requires(T& t, const T& c, const BatchView& batch,
                                   const std::filesystem::path& path,
                                   const std::map<std::string, std::string>& metadata) {
  { t.step(batch) } -> std::same_as<StepStats>;
  t.save_checkpoint(path, metadata);
  { t.load_checkpoint(path) } -> std::same_as<std::map<std::string, std::string>>;
  t.save_weights(path);
  { c.facts() } -> std::convertible_to<TrainerFacts>;
  { c.options() } -> std::convertible_to<const TrainOptions&>;
  { c.memory() } -> std::same_as<MemoryStats>;
  { c.steps_taken() } -> std::convertible_to<std::int64_t>;
  { c.comm_stats(MeshAxis::data) } -> std::convertible_to<const CommStats&>;
};

/// How a run ended, on every rank (finish).
struct RunResult {
  bool completed = false;      // the last step was taken (or an early stop): final weights written
  bool early_stopped = false;  // the evaluations ended it (BestModel::patience)
  std::int64_t step = 0;       // the last step taken
  EvalDecision evaluations;    // what the evaluations decided: the best, where RunSpec::best
  StopDecision stop;           // a signal or request_stop that stopped it, or none
  std::filesystem::path weights, last_checkpoint;
  std::vector<RankReport> ranks;  // every rank's report, in rank order
};

/// What after_step did.
struct StepOutcome {
  bool saved = false;    // a checkpoint of this step was written
  bool stopped = false;  // the run stops here (stop_after or a stop request)
};

/// Refuses, naming the field, a spec that cannot work (what every rank checks on its own).
inline void check_run_spec(const RunSpec& s) {
  SEQPAR_CHECK(s.total_steps > 0, "RunSpec::total_steps is ", s.total_steps,
               "; expected at least one step");
  SEQPAR_CHECK(s.save_total_limit > 0, "RunSpec::save_total_limit is ", s.save_total_limit,
               "; expected at least one checkpoint kept");
  SEQPAR_CHECK(s.save_steps >= 0 && s.stop_after >= 0, "RunSpec::save_steps is ", s.save_steps,
               " and RunSpec::stop_after ", s.stop_after,
               "; expected 0 (none) or a number of steps");
  SEQPAR_CHECK(!s.weights_file.empty() && s.weights_file.find('/') == std::string::npos,
               "RunSpec::weights_file is '", s.weights_file, "'; expected a file name");
  SEQPAR_CHECK(s.resume || s.resume_from.empty(), "RunSpec::resume_from is ",
               s.resume_from.string(), " but RunSpec::resume is false; set it to resume");
  if (s.best)
    SEQPAR_CHECK(!s.best->key().empty() && s.best->patience >= 0 &&
                     std::isfinite(s.best->threshold) && s.best->threshold >= 0,
                 "RunSpec::best has metric '", s.best->metric, "', patience ", s.best->patience,
                 " and threshold ", s.best->threshold,
                 "; expected a metric's name, a patience of 0 (none) or more evaluations and a "
                 "threshold of 0 or more");
}

/// The keys every checkpoint of a run records and a resume compares: the trainer's model and
/// options (trainer_keys), then the program's (RunSpec::keys). Known before any trainer is
/// built: `f` needs only the model and its parameter count.
inline std::vector<RunKey> run_keys(const TrainerFacts& f, const TrainOptions& o,
                                    const RunSpec& spec) {
  auto k = trainer_keys(f, o);
  k.insert(k.end(), spec.keys.begin(), spec.keys.end());
  return k;
}

/// Collective over `world`, before anything is built or written: every rank's spec, then the
/// writer's look at the folder (RunFolder) and at the checkpoint's `keys` (run_keys). Every
/// rank throws the same Refusal, or returns the checkpoint to resume ("" for a fresh run).
/// `folder`, where given, keeps the writer's look for taking the folder. A program calls it
/// before it builds its trainers; TrainingRun calls it again as it opens.
template <class C>
std::string refuse_run(C& world, const RunSpec& spec, const std::vector<RunKey>& keys,
                       std::optional<RunFolder>* folder = nullptr) {
  refuse_together(world, [&] { check_run_spec(spec); });
  return decide_on_writer(world, [&]() -> std::string {
    std::optional<RunFolder> mine;
    std::optional<RunFolder>& f = folder ? *folder : mine;
    f.emplace(spec);
    if (!f->resume_from()) return {};
    check_resume_keys(*f->resume_from(), f->resume_metadata(), keys, spec.allow_changed);
    return f->resume_from()->string();
  });
}

/// The run of `trainer` on this rank of `world` (see the top of this file). World rank 0,
/// the writer, holds the output folder (its lock, the rotation) and metrics.jsonl.
template <RunnableTrainer T>
class TrainingRun {
 public:
  /// Collective, on every rank with the same spec: refuses what cannot work (the spec's
  /// fields; the folder: another run's, an earlier run's checkpoints, nothing to resume; a
  /// checkpoint whose keys differ), then makes every rank agree on the trainer, its
  /// options, the spec and the program's keys, then takes the folder (RunHooks::on_take),
  /// then resumes (resumed()). Every rank throws alike, and a refused run has
  /// written nothing.
  TrainingRun(T& trainer, AnyComm world, RunSpec spec)
      : trainer_(trainer), world_(std::move(world)), spec_(std::move(spec)) {
    const std::string checkpoint = refuse();
    agree(checkpoint);
    take(checkpoint.empty());
    if (!checkpoint.empty()) resume(checkpoint);
    report_.build_peak = trainer_.memory().total_peak;  // the steps' peaks are their own
    counted_ = sent();
  }

  std::int64_t step() const { return trainer_.steps_taken(); }
  std::int64_t total_steps() const { return spec_.total_steps; }
  const RunSpec& spec() const { return spec_; }
  /// Whether another step is to be taken: the run has neither ended nor stopped.
  bool running() const { return !stopped_ && !ended_early_ && step() < spec_.total_steps; }
  bool stopped() const { return stopped_; }
  /// Why the run stopped at a step boundary (a signal or request_stop, and the rank).
  const StopDecision& stop_decision() const { return stop_decision_; }
  /// What the resume found; none for a fresh run.
  const std::optional<Resumed>& resumed() const { return resumed_; }
  const std::filesystem::path& last_checkpoint() const { return last_checkpoint_; }
  bool writer() const { return world_.rank() == 0; }
  /// What taking the folder did (the writer), a line each: a stale lock taken over, a
  /// killed save's leftovers removed, an earlier run's checkpoints deleted, a torn metrics
  /// row cut.
  const std::vector<std::string>& folder_notes() const { return notes_; }

  /// Asks the run to stop after this step, as a caught SIGTERM or SIGINT does (`sig` names
  /// the reason); every rank stops at the next step boundary.
  void request_stop(int sig = SIGTERM) { stop_.request(sig); }

  /// Appends a row to metrics.jsonl and hands it to the reporters (RunSpec::report_to): the
  /// writer; a no-op elsewhere.
  void log(nlohmann::json row) const {
    if (log_) log_->append(std::move(row));
  }

  /// Collective, after each step: its row in the metrics (`extra` added), a checkpoint when
  /// one is due (every save_steps steps, where the program asks with `save_here`, at the
  /// last step, at stop_after, or when a rank asks to stop), then the rotation. A skipped
  /// step (no update) saves nothing unless the run stops there.
  StepOutcome after_step(const StepStats& st, bool save_here = false,
                         nlohmann::json extra = nlohmann::json::object()) {
    const auto now = sent();
    for (const MeshAxis a : mesh_axes) report_.bytes.sent[a] += now[a] - counted_[a];
    ++report_.bytes.steps;
    report_.add(st.memory);
    log(train_row(st, now, std::move(extra)));
    StepOutcome out;
    const std::int64_t s = st.step;
    const bool last = s >= spec_.total_steps;
    // One all-reduce of one integer: every rank stops after the same step.
    if (!last) stop_decision_ = stop_.agreed(world_);
    out.stopped = static_cast<bool>(stop_decision_) ||
                  (spec_.stop_after > 0 && s == spec_.stop_after && !last);
    const bool due =
        save_here || last || out.stopped || (spec_.save_steps > 0 && s % spec_.save_steps == 0);
    if (due && (!st.skipped || out.stopped)) {
      save();
      out.saved = true;
    }
    if (stop_decision_)
      log({{"event", "interrupted"},
           {"step", s},
           {"signal", signal_name(stop_decision_.signal)},
           {"rank", stop_decision_.rank},
           {"checkpoint", last_checkpoint_.string()}});
    stopped_ = out.stopped;
    counted_ = sent();
    return out;
  }

  /// Collective, after an evaluation of this step: the writer's `metrics` (the other ranks'
  /// are not read) are recorded in evaluations.json and, with RunSpec::best, decide whether
  /// this step is the best so far and whether the run ends here (its patience ran out). The
  /// step's checkpoint is written first where it has none: the best is always a checkpoint.
  EvalDecision evaluated(const std::map<std::string, double>& metrics) {
    if (last_checkpoint_ != CheckpointDir{spec_.output_dir}.path(step())) save();
    decision_ = Evaluations::decode(decide_on_writer(world_, [&] {
      const EvalDecision d =
          evaluations_.add({step(), metrics, last_checkpoint_.filename().string()});
      evaluations_.write(spec_.output_dir);
      return Evaluations::encode(d);
    }));
    ended_early_ = decision_.stop;
    return decision_;
  }
  const EvalDecision& evaluations() const { return decision_; }

  /// Collective: a checkpoint of this step (the run's keys, the program's and the hook's
  /// metadata, the plan, device and precision that trained it), written atomically by the writer,
  /// then the rotation. Returns its path.
  std::filesystem::path save() {
    std::map<std::string, std::string> meta;
    if (spec_.hooks.checkpoint_metadata) meta = spec_.hooks.checkpoint_metadata();
    for (const auto& k : keys()) meta[k.key] = k.value;
    // What trained it, for the reader: a resume may change each.
    const TrainerFacts facts = trainer_.facts();
    meta["plan"] = plan_name(facts.plan);
    meta["device"] = device_name(facts.device);
    meta["precision"] = std::string(facts.precision);
    const std::filesystem::path path = CheckpointDir{spec_.output_dir}.path(step());
    trainer_.save_checkpoint(path, meta);
    if (folder_)
      folder_->rotate(spec_.save_total_limit,
                      decision_.best ? std::optional(decision_.best->step) : std::nullopt);
    last_checkpoint_ = path;
    counted_ = sent();
    return path;
  }

  /// Collective, once the loop is over: when the run took its last step or its evaluations
  /// ended it, the final weights (the best checkpoint's with BestModel::load_at_end) and
  /// (RunSpec::hf_export) the Hugging Face model directory; then every rank's report,
  /// written to metrics.jsonl with the run's end.
  RunResult finish() {
    RunResult r;
    r.stop = stop_decision_;
    r.step = step();
    r.last_checkpoint = last_checkpoint_;
    r.early_stopped = ended_early_;
    r.completed = step() >= spec_.total_steps || ended_early_;
    r.evaluations = decision_;
    if (r.completed) {
      const auto& best = decision_.best;
      if (spec_.best && spec_.best->load_at_end && best && best->step != step()) {
        trainer_.load_checkpoint(spec_.output_dir / best->checkpoint);
        log({{"event", "best_loaded"}, {"step", best->step}, {"checkpoint", best->checkpoint}});
      }
      r.weights = spec_.output_dir / spec_.weights_file;
      trainer_.save_weights(r.weights);
      if (spec_.hf_export)
        decide_on_writer(world_, [&] {
          write_hf_model_dir(trainer_.facts().model, r.weights, *spec_.hf_export);
          return std::string();
        });
    }
    RankReport mine = report_;
    mine.device =
        spec_.device_label.empty() ? device_name(trainer_.facts().device) : spec_.device_label;
    r.ranks = gather_rank_reports(world_, mine);
    log(rank_reports_json(r.ranks));
    log({{"event", "end"},
         {"step", r.step},
         {"completed", r.completed},
         {"early_stopped", r.early_stopped},
         {"seconds", std::chrono::duration<double>(Clock::now() - opened_).count()}});
    counted_ = sent();
    return r;
  }

 private:
  using Clock = std::chrono::steady_clock;

  // The keys every checkpoint records and a resume compares: the trainer's and the program's.
  std::vector<RunKey> keys() const { return run_keys(trainer_.facts(), trainer_.options(), spec_); }

  // 1. What can refuse the run, before anything is written (refuse_run). Returns the
  // checkpoint to resume ("" for a fresh run), the same on every rank.
  std::string refuse() { return refuse_run(world_, spec_, keys(), &folder_); }

  // 2. Every rank runs what the others run: the trainer, its options, the spec, the
  // program's keys and values, the checkpoint.
  void agree(const std::string& checkpoint) {
    AgreedValues v = agreed_values(trainer_.facts(), trainer_.options());
    const AgreedValues s = spec_values(spec_);
    v.insert(v.end(), s.begin(), s.end());
    v.emplace_back("checkpoint resumed", checkpoint.empty() ? "(none)" : checkpoint);
    try {
      require_agreement(world_, v);
    } catch (const Refusal&) {
      throw;
    } catch (const Error& e) {
      throw Refusal(e.what());  // the same message on every rank
    }
  }

  // 3. The writer takes the folder (lock, leftovers), starts the metrics and lets the
  // program write its files; every rank waits for it. A fresh run's evaluations start empty.
  void take(bool fresh) {
    if (spec_.catch_signals) signals_.emplace();
    decide_on_writer(world_, [&] {
      notes_ = folder_->take();
      if (fresh) std::filesystem::remove(spec_.output_dir / Evaluations::file_name);
      log_.emplace(spec_.output_dir / "metrics.jsonl", spec_.report_to,
                   spec_.output_dir / spec_.logging_dir);
      if (const auto cut = log_->cut_torn_row())
        notes_.push_back("cut a torn last row (" + std::to_string(cut) + " bytes) off " +
                         log_->path().string());
      const TrainerFacts f = trainer_.facts();
      nlohmann::json start = {{"event", "start"},
                              {"plan", plan_name(f.plan)},
                              {"layout", f.plan.name()},
                              {"world", world_.size()},
                              {"device", device_name(f.device)},
                              {"precision", std::string(f.precision)},
                              {"parameters", f.parameter_count},
                              {"steps", spec_.total_steps},
                              {"resume", folder_->resume_from().has_value()}};
      for (auto& [k, v] : spec_.start_details.items()) start[k] = v;
      if (!notes_.empty()) start["folder"] = notes_;
      log_->append(std::move(start));
      if (spec_.hooks.on_take) spec_.hooks.on_take();
      return std::string();
    });
  }

  // 4. Every rank loads the checkpoint (of any plan); the writer supersedes the metrics of
  // the steps after it; resumed() tells the program what was found.
  void resume(const std::filesystem::path& checkpoint) {
    Resumed r;
    r.checkpoint = checkpoint;
    r.metadata = trainer_.load_checkpoint(checkpoint);
    r.changed = changed_keys(r.metadata, keys(), &r.reorder);
    last_checkpoint_ = checkpoint;
    if (log_) log_->resume(step(), {{"checkpoint", checkpoint.string()}, {"changed", r.changed}});
    // The evaluations up to the checkpoint's step: those after it are to be made again.
    decision_ = Evaluations::decode(decide_on_writer(world_, [&] {
      evaluations_.read(spec_.output_dir, step());
      return Evaluations::encode(evaluations_.decision());
    }));
    resumed_ = std::move(r);
  }

  PerAxis<std::uint64_t> sent() const {
    PerAxis<std::uint64_t> s;
    for (const MeshAxis a : mesh_axes) s[a] = trainer_.comm_stats(a).total_bytes_sent();
    return s;
  }

  nlohmann::json train_row(const StepStats& st, const PerAxis<std::uint64_t>& now,
                           nlohmann::json extra) const {
    PerAxis<std::uint64_t> moved;
    for (const MeshAxis a : mesh_axes) moved[a] = now[a] - counted_[a];
    // "step": the update's number; a skipped step made none and is logged under the number
    // of the update it attempted (the last one's + 1), so that a resume from step k drops
    // the skipped rows after k as it drops the updates. "attempt": the row's own number.
    nlohmann::json row = {{"event", "train"},      {"step", st.skipped ? st.step + 1 : st.step},
                          {"attempt", st.attempt}, {"loss", st.loss},
                          {"lr", st.lr},           {"grad_norm", st.grad_norm},
                          {"tokens", st.tokens},   {"targets", st.targets},
                          {"seconds", st.seconds}, {"tokens_per_s", st.tokens_per_s}};
    // What the step's guard did, what it held and what it sent.
    row.update({{"skipped", st.skipped},
                {"skipped_steps", st.skipped_steps},
                {"overflow", st.overflow},
                {"loss_scale", st.loss_scale},
                {"nonfinite_in_a_row", st.nonfinite_in_a_row}});
    row["memory_peak_bytes"] = st.memory.total_peak;
    row["memory_peak_bytes_by_category"] = memory_peaks_json(st.memory.peak);
    row["bytes_sent"] = bytes_json(moved);
    for (auto& [k, v] : extra.items()) row[k] = v;
    return row;
  }

  T& trainer_;
  AnyComm world_;
  RunSpec spec_;
  std::optional<RunFolder> folder_;  // the writer's: held (locked) while the run lives
  std::optional<MetricsLog> log_;    // the writer's
  std::optional<StopSignalsShare> signals_;
  std::optional<Resumed> resumed_;
  std::vector<std::string> notes_;
  std::filesystem::path last_checkpoint_;
  bool stopped_ = false, ended_early_ = false;
  Evaluations evaluations_{spec_.best};  // the writer's
  EvalDecision decision_;                // every rank's copy of the writer's
  StopRequest stop_;
  StopDecision stop_decision_;
  RankReport report_;
  PerAxis<std::uint64_t> counted_{};
  Clock::time_point opened_ = Clock::now();
};

template <class T>
TrainingRun(T&, AnyComm, RunSpec) -> TrainingRun<T>;

}  // namespace seqpar::inline v0

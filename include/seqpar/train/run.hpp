#pragma once
// TrainingRun: what a training program does around AnyTrainer::step, on every rank: the
// resume from a checkpoint, the metrics row of each step, checkpoints when they are due
// (atomically written, then rotated), the stop at a step boundary, the final weights, and
// each rank's memory and bytes moved gathered at the end. The loop stays the program's:
//
//   seqpar::StopSignals signals;  // once per process: SIGTERM, SIGINT stop at a step boundary
//   TrainingRun run(trainer, world, out_dir, {.total_steps = n, .save_steps = 100});
//   if (world.rank() == 0) run.keep_books(folder, log);
//   run.start({{"data.sha256", digest}}, checkpoint);  // every rank agrees, or all refuse
//   if (resuming) run.resume(checkpoint);
//   while (run.running()) run.after_step(trainer.step(next_batch()));
//   run.finish(out_dir / "model.safetensors");
//
// The writer (world rank 0) keeps the books: the RunFolder (its rotation) and the
// MetricsLog. RunKey and changed_keys compare a checkpoint's metadata with the run that resumes
// it, before anything is written (train/run_folder.hpp says in which order).
//
// Where a program adds to the loop: start() checks that every rank runs the same (the
// trainer's model, plan, device, precision and options, the checkpoint resumed, and what the
// program adds: data and tokenizer digests), refusing on every rank naming the ranks and
// values that differ (comm/agreement.hpp); a stop asked for by any rank at a step boundary
// (a SIGTERM or SIGINT that StopSignals caught, or request_stop) makes every rank save a
// checkpoint of that step and stop, the writer logging an "interrupted" event; RunHooks gives
// the metadata a checkpoint records besides the trainer's (the data position).

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "seqpar/comm/agreement.hpp"
#include "seqpar/comm/any_comm.hpp"
#include "seqpar/core/arena.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/train/any_trainer.hpp"
#include "seqpar/train/launch.hpp"
#include "seqpar/train/metrics_log.hpp"
#include "seqpar/train/run_folder.hpp"
#include "seqpar/train/stop.hpp"

namespace seqpar::inline v0 {

/// An entry of a run's checkpoint metadata that a resume compares with the run that resumes
/// it. `order`: a change also changes the examples or their order (a data position of the
/// checkpoint means nothing then).
struct RunKey {
  std::string key, value;
  bool order = false;
};

/// What differs between a checkpoint's metadata and `keys`, one "key: checkpoint 'a', this
/// run 'b'" each; `order` is set when one of them changes the data order.
inline std::vector<std::string> changed_keys(const std::map<std::string, std::string>& meta,
                                             const std::vector<RunKey>& keys, bool* order) {
  std::vector<std::string> out;
  for (const auto& k : keys) {
    const auto it = meta.find(k.key);
    if (it != meta.end() && it->second == k.value) continue;
    out.push_back(k.key + ": checkpoint " +
                  (it == meta.end() ? std::string("(not recorded)") : "'" + it->second + "'") +
                  ", this run '" + k.value + "'");
    if (order) *order = *order || k.order;
  }
  return out;
}

/// Refuses to resume `checkpoint` (its metadata `meta`) with `keys` that differ, listing
/// them, unless `allow` (then returns them: the run goes on with each printed).
inline std::vector<std::string> check_resume_keys(const std::filesystem::path& checkpoint,
                                                  const std::map<std::string, std::string>& meta,
                                                  const std::vector<RunKey>& keys, bool allow,
                                                  std::string_view allow_flag, bool* order) {
  const auto changed = changed_keys(meta, keys, order);
  if (changed.empty() || allow) return changed;
  std::string list;
  for (const auto& c : changed) list += "\n  " + c;
  detail::fail(
      checkpoint.string(), ": this run differs from the one that wrote the checkpoint:", list,
      "\nresume with the same data and options, or pass ", allow_flag, " to continue anyway");
}

/// When a run saves and how long it runs.
struct RunSchedule {
  std::int64_t total_steps = 0;
  /// Steps between checkpoints; 0: only where the program asks (after_step's `save_here`),
  /// at a stop and at the end.
  std::int64_t save_steps = 0;
  std::int64_t save_total_limit = 2;  // the newest checkpoints kept
  std::int64_t stop_after = 0;        // > 0: a checkpoint and a stop after this step
};

/// What a program adds to the run; may be left empty.
struct RunHooks {
  /// The entries a checkpoint records besides the trainer's (the data position, the run's
  /// keys); asked on every rank at each save.
  std::function<std::map<std::string, std::string>()> checkpoint_metadata;
};

/// The bytes a rank's communicators moved in training steps, by axis (data, tensor,
/// pipeline), and the steps they were counted over; saves and loads are not counted.
struct StepBytes {
  std::int64_t steps = 0;
  std::array<std::uint64_t, 3> sent{};
};

/// A rank's report at the end of a run: where it ran, its peak memory by category over the
/// run, and the bytes it moved in training steps.
struct RankReport {
  static constexpr std::size_t device_bytes = 64;  // a device label travels as this many
  std::int64_t rank = 0, pid = 0, total_peak = 0;
  std::array<std::int64_t, memory_kinds> peak{};
  std::string device = "cpu";  // e.g. "cuda:0 NVIDIA H200"
  StepBytes bytes;

  void add(const MemoryStats& m) {
    total_peak = std::max(total_peak, m.total_peak);
    for (std::size_t k = 0; k < peak.size(); ++k) peak[k] = std::max(peak[k], m.peak[k]);
  }
};

/// A step's peak bytes per arena category, by the categories' names.
inline nlohmann::json memory_peaks_json(const MemoryStats& m) {
  nlohmann::json j = nlohmann::json::object();
  for (std::size_t k = 0; k < memory_kinds; ++k) j[memory_name(static_cast<Memory>(k))] = m.peak[k];
  return j;
}

/// Collective: every rank's report, in rank order, on every rank.
inline std::vector<RankReport> gather_rank_reports(AnyComm& world, RankReport mine) {
  constexpr std::size_t label_words = RankReport::device_bytes / 8;
  constexpr std::size_t head = 3 + memory_kinds + 4, fields = head + label_words;
  mine.rank = world.rank();
  mine.pid = ::getpid();
  std::vector<std::int64_t> out(fields), all(fields * static_cast<std::size_t>(world.size()));
  out[0] = mine.rank, out[1] = mine.pid, out[2] = mine.total_peak;
  std::copy(mine.peak.begin(), mine.peak.end(), out.begin() + 3);
  out[3 + memory_kinds] = mine.bytes.steps;
  for (std::size_t a = 0; a < 3; ++a)
    out[4 + memory_kinds + a] = static_cast<std::int64_t>(mine.bytes.sent[a]);
  std::memcpy(out.data() + head, mine.device.data(),
              std::min(mine.device.size(), RankReport::device_bytes));
  world.all_gather(out.data(), all.data(), fields);
  std::vector<RankReport> ranks(static_cast<std::size_t>(world.size()));
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const std::int64_t* f = all.data() + r * fields;
    RankReport& rr = ranks[r];
    rr.rank = f[0], rr.pid = f[1], rr.total_peak = f[2];
    std::copy(f + 3, f + 3 + memory_kinds, rr.peak.begin());
    rr.bytes.steps = f[3 + memory_kinds];
    for (std::size_t a = 0; a < 3; ++a)
      rr.bytes.sent[a] = static_cast<std::uint64_t>(f[4 + memory_kinds + a]);
    const char* label = reinterpret_cast<const char*>(f + head);
    rr.device.assign(label, strnlen(label, RankReport::device_bytes));
  }
  return ranks;
}

/// The "ranks" event of metrics.jsonl: each rank's pid, device, peak memory (in all and by
/// category) and the bytes it sent per training step by axis.
inline nlohmann::json rank_reports_json(const std::vector<RankReport>& ranks) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : ranks) {
    nlohmann::json by = nlohmann::json::object();
    for (std::size_t k = 0; k < r.peak.size(); ++k)
      by[memory_name(static_cast<Memory>(k))] = r.peak[k];
    nlohmann::json bytes = nlohmann::json::object();
    const char* axes[] = {"data", "tensor", "pipeline"};
    for (std::size_t a = 0; a < 3; ++a) bytes[axes[a]] = r.bytes.sent[a];
    list.push_back({{"rank", r.rank},
                    {"pid", r.pid},
                    {"device", r.device},
                    {"peak_bytes", r.total_peak},
                    {"by", by},
                    {"steps", r.bytes.steps},
                    {"bytes_sent", bytes}});
  }
  return {{"event", "ranks"}, {"ranks", list}};
}

/// What the ranks of a run must have alike, as require_agreement takes them: the trainer's
/// model, plan, device and precision and every TrainOptions field.
inline AgreedValues agreed_values(const TrainerFacts& f, const TrainOptions& o) {
  const auto num = [](auto v) {
    std::ostringstream s;
    s.precision(17);
    s << v;
    return s.str();
  };
  const LossScaleOptions& l = o.loss_scale;
  return {{"model", num(f.parameter_count) + " parameters, hidden " + num(f.model.hidden) +
                        ", layers " + num(f.model.layers) + ", heads " + num(f.model.heads) +
                        ", vocabulary " + num(f.model.vocab_size)},
          {"plan", f.plan.name()},
          {"device", std::string(f.device)},
          {"precision", std::string(f.precision)},
          {"options.schedule", "peak " + num(o.schedule.peak) + ", warmup " +
                                   num(o.schedule.warmup) + ", total " + num(o.schedule.total) +
                                   ", decay " + num(static_cast<int>(o.schedule.decay)) +
                                   ", min_ratio " + num(o.schedule.min_ratio) + ", warmup_shape " +
                                   num(static_cast<int>(o.schedule.warmup_shape))},
          {"options.adamw", "betas " + num(o.beta1) + ", " + num(o.beta2) + ", eps " + num(o.eps) +
                                ", weight_decay " + num(o.weight_decay)},
          {"options.max_grad_norm", num(o.max_grad_norm)},
          {"options.micro_batch_rows", num(o.micro_batch_rows)},
          {"options.seed", num(o.seed)},
          {"options.init_std", num(o.init_std)},
          {"options.logits_bytes", num(o.logits_bytes)},
          {"options.recompute",
           num(static_cast<int>(o.recompute)) + " every " + num(o.recompute_every)},
          {"options.attention", num(static_cast<int>(o.attention))},
          {"options.loss_scale",
           std::string(!l.enabled   ? "default"
                       : *l.enabled ? "on"
                                    : "off") +
               ", scale " + num(l.loss_scale) + ", power " + num(l.initial_scale_power) +
               ", window " + num(l.loss_scale_window) + ", hysteresis " + num(l.hysteresis) +
               (l.consecutive_hysteresis ? " consecutive" : "") + ", min " + num(l.min_loss_scale)},
          {"options.max_nonfinite_steps", num(o.max_nonfinite_steps)},
          {"options.offload", num(static_cast<int>(o.offload))}};
}

/// The run around a trainer's steps, on one rank (see the top of this file).
class TrainingRun {
 public:
  /// The run of `trainer` on this rank of `world`, its checkpoints in `dir` (the output
  /// folder: the same on every rank, on a file system every process sees).
  TrainingRun(AnyTrainer& trainer, AnyComm world, std::filesystem::path dir, RunSchedule schedule,
              RunHooks hooks = {})
      : trainer_(trainer),
        world_(std::move(world)),
        schedule_(schedule),
        hooks_(std::move(hooks)),
        checkpoints_{std::move(dir)} {
    SEQPAR_CHECK(schedule_.total_steps > 0, "TrainingRun: total_steps is ", schedule_.total_steps,
                 "; expected at least one step");
    SEQPAR_CHECK(schedule_.save_total_limit > 0, "TrainingRun: save_total_limit is ",
                 schedule_.save_total_limit, "; expected at least one checkpoint kept");
    report_.add(trainer_.memory());
    counted_ = sent();
  }

  /// The writer's books (world rank 0 alone): the folder it rotates, the log it appends to.
  void keep_books(const RunFolder& folder, const MetricsLog& log) {
    folder_ = &folder;
    log_ = &log;
  }

  /// Collective, before the first step: every rank checks that it runs what the others
  /// run: agreed_values(trainer) (model, plan, device, precision, options), the checkpoint it
  /// resumes (`resume_from`, or none) and the program's `values` (data and tokenizer
  /// digests, its own options). When any differs, every rank throws the same Error naming
  /// the ranks and the values (require_agreement). Where the plan itself may differ between
  /// ranks (processes started with their own command lines), a program calls
  /// require_agreement before it makes the trainer too: making one is collective.
  void start(AgreedValues values = {},
             const std::optional<std::filesystem::path>& resume_from = std::nullopt) {
    for (auto& v : agreed_values(trainer_.facts(), trainer_.options()))
      values.push_back(std::move(v));
    values.emplace_back("checkpoint resumed", resume_from ? resume_from->string() : "(none)");
    require_agreement(world_, values);
  }

  /// Asks the run to stop after this step, as a caught SIGTERM or SIGINT does (`sig` names
  /// the reason); every rank stops at the next step boundary.
  void request_stop(int sig = SIGTERM) { stop_.request(sig); }
  /// Why the run stopped at a step boundary (a signal or request_stop, and the rank), or
  /// none (stop_after, or not stopped).
  const StopDecision& stop_decision() const { return stop_decision_; }

  /// Collective: loads `checkpoint` on every rank (a checkpoint of any plan); the writer
  /// supersedes in the metrics the rows after its step (logged before, done again now) and
  /// logs the resume with `details`. Returns the checkpoint's metadata.
  std::map<std::string, std::string> resume(const std::filesystem::path& checkpoint,
                                            nlohmann::json details = nlohmann::json::object()) {
    auto meta = trainer_.load_checkpoint(checkpoint);
    last_checkpoint_ = checkpoint;
    details["checkpoint"] = checkpoint.string();
    if (log_) log_->resume(trainer_.steps_taken(), std::move(details));
    counted_ = sent();
    return meta;
  }

  std::int64_t step() const { return trainer_.steps_taken(); }
  std::int64_t total_steps() const { return schedule_.total_steps; }
  /// Whether another step is to be taken: the run has neither ended nor stopped.
  bool running() const { return !stopped_ && step() < schedule_.total_steps; }
  bool stopped() const { return stopped_; }
  const std::filesystem::path& last_checkpoint() const { return last_checkpoint_; }

  /// What after_step did.
  struct Outcome {
    bool saved = false;    // a checkpoint of this step was written
    bool stopped = false;  // the run stops here (stop_after or a stop request)
  };

  /// Collective, after each step: its row in the metrics (the writer), a checkpoint when one
  /// is due (every save_steps steps, where the program asks with `save_here`, at the last
  /// step, at stop_after, or when a rank asks to stop), then the rotation. A skipped step
  /// (no update) saves nothing.
  Outcome after_step(const StepStats& st, bool save_here = false,
                     nlohmann::json extra = nlohmann::json::object()) {
    const auto now = sent();
    for (std::size_t a = 0; a < 3; ++a) report_.bytes.sent[a] += now[a] - counted_[a];
    ++report_.bytes.steps;
    report_.add(st.memory);
    if (log_) log_->append(train_row(st, now, std::move(extra)));
    Outcome out;
    const std::int64_t s = st.step;
    const bool last = s >= schedule_.total_steps;
    // One all-reduce of one integer: every rank stops after the same step.
    if (!last) stop_decision_ = stop_.agreed(world_);
    out.stopped = static_cast<bool>(stop_decision_) ||
                  (schedule_.stop_after > 0 && s == schedule_.stop_after && !last);
    const bool due = save_here || last || out.stopped ||
                     (schedule_.save_steps > 0 && s % schedule_.save_steps == 0);
    if (due && (!st.skipped || out.stopped)) {
      save();
      out.saved = true;
    }
    if (stop_decision_ && log_)
      log_->append({{"event", "interrupted"},
                    {"step", s},
                    {"signal", signal_name(stop_decision_.signal)},
                    {"rank", stop_decision_.rank},
                    {"checkpoint", last_checkpoint_.string()}});
    stopped_ = out.stopped;
    counted_ = sent();
    return out;
  }

  /// Collective: a checkpoint of this step (with the hook's metadata), atomically written by
  /// world rank 0, then the rotation (the newest save_total_limit kept). Returns its path.
  std::filesystem::path save() {
    std::map<std::string, std::string> meta;
    if (hooks_.checkpoint_metadata) meta = hooks_.checkpoint_metadata();
    const std::filesystem::path path = checkpoints_.path(step());
    trainer_.save_checkpoint(path, meta);
    if (folder_) folder_->rotate(schedule_.save_total_limit);
    last_checkpoint_ = path;
    counted_ = sent();
    return path;
  }

  /// Collective: when the run took its last step, the weights (`weights`, as transformers
  /// loads them) written by world rank 0; true then.
  bool finish(const std::filesystem::path& weights) {
    if (step() < schedule_.total_steps) return false;
    trainer_.save_weights(weights);
    counted_ = sent();
    return true;
  }

  /// This rank's report so far: peak memory, bytes of training steps (the device label is
  /// the program's to set).
  RankReport report() const { return report_; }

 private:
  std::array<std::uint64_t, 3> sent() const {
    return {trainer_.data_stats().total_bytes_sent(), trainer_.tensor_stats().total_bytes_sent(),
            trainer_.pipeline_stats().total_bytes_sent()};
  }

  nlohmann::json train_row(const StepStats& st, const std::array<std::uint64_t, 3>& now,
                           nlohmann::json extra) const {
    nlohmann::json row = {{"event", "train"},
                          {"step", st.step},
                          {"loss", st.loss},
                          {"lr", st.lr},
                          {"grad_norm", st.grad_norm},
                          {"tokens", st.tokens},
                          {"targets", st.targets},
                          {"seconds", st.seconds},
                          {"tokens_per_s", st.tokens_per_s},
                          {"skipped", st.skipped},
                          {"skipped_steps", st.skipped_steps},
                          {"overflow", st.overflow},
                          {"loss_scale", st.loss_scale},
                          {"nonfinite_in_a_row", st.nonfinite_in_a_row},
                          {"memory_peak_bytes", st.memory.total_peak},
                          {"memory_peak_bytes_by_category", memory_peaks_json(st.memory)},
                          {"bytes_sent",
                           {{"data", now[0] - counted_[0]},
                            {"tensor", now[1] - counted_[1]},
                            {"pipeline", now[2] - counted_[2]}}}};
    for (auto& [k, v] : extra.items()) row[k] = v;
    return row;
  }

  AnyTrainer& trainer_;
  AnyComm world_;
  const RunFolder* folder_ = nullptr;
  const MetricsLog* log_ = nullptr;
  RunSchedule schedule_;
  RunHooks hooks_;
  CheckpointDir checkpoints_;
  std::filesystem::path last_checkpoint_;
  bool stopped_ = false;
  StopRequest stop_;
  StopDecision stop_decision_;
  RankReport report_;
  std::array<std::uint64_t, 3> counted_{};
};

}  // namespace seqpar::inline v0

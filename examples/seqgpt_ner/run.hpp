// seqgpt_ner's commands: training under a plan, evaluation and prediction, whatever the model
// and the plan (trainers.hpp's interfaces), compiled once per device (commands.cpp, and the
// CUDA units).
#pragma once

#if defined(_OPENMP)
#include <omp.h>
#endif

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "data.hpp"
#include "device_launch.hpp"
#include "launch.hpp"
#include "models.hpp"
#include "options.hpp"
#include "out_dir.hpp"
#include "plans.hpp"
#include "seqpar/comm/thread_comm.hpp"
#include "seqpar/data/batching.hpp"
#include "seqpar/data/metrics.hpp"
#include "seqpar/data/prompt.hpp"
#include "seqpar/io/bloom_weights.hpp"
#include "seqpar/nn/generate.hpp"
#include "seqpar/train/trainer.hpp"
#include "train_controls.hpp"
#include "trainers.hpp"

namespace ner {

using namespace seqpar;
using Clock = std::chrono::steady_clock;

inline double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

inline std::string duration_text(double s) {
  char buf[32];
  const auto n = static_cast<long long>(s + 0.5);
  if (n >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", n / 3600, n / 60 % 60);
  else
    std::snprintf(buf, sizeof buf, "%lldm%02llds", n / 60, n % 60);
  return buf;
}

inline int cores() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

inline void set_threads(int n) {
#if defined(_OPENMP)
  omp_set_num_threads(std::max(1, n));
#else
  (void)n;
#endif
}

inline std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + v[i];
  return s;
}

// The shortest text that reads back as x (0.005, not 0.0050000000000000001).
inline std::string real_text(double x) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

/// What an evaluation found.
struct EvalResult {
  NerScore score;
  std::int64_t records = 0, prompts = 0, generated_tokens = 0, bad_lines = 0;
  double seconds = 0;
  std::vector<std::string> samples;  // "text -> answer" of the first records
};

/// How eval, predict and the evaluations during training decode: --num-beams and
/// --repetition-penalty, else SeqGPT's own decoding (4 beams, penalty 2.0) for SeqGPT-560M
/// and greedy without a penalty for the tiny model (docs/ner.md has the figures behind it).
inline GenerateOptions decoding(const Options& o, const Tokenizer& tok, std::int64_t max_new,
                                bool seqgpt) {
  GenerateOptions go;
  go.max_new_tokens = max_new;
  go.eos_id = tok.eos_id();
  go.num_beams = o.num_beams > 0 ? o.num_beams : seqgpt ? 4 : 1;
  go.repetition_penalty = o.repetition_penalty > 0 ? o.repetition_penalty : seqgpt ? 2.0 : 1.0;
  return go;
}

/// Generates the answer of every prompt of `ex` (of the first `limit` records; 0: all),
/// reads it back and scores it against the records' mentions.
inline EvalResult evaluate_ner(const GenerateFn& generate, const Tokenizer& tok,
                               const NerDataset& dev, const ExampleSet& ex,
                               const std::vector<std::string>& labels, std::int64_t limit,
                               std::int64_t rows, const GenerateOptions& go) {
  const auto t0 = Clock::now();
  const auto chunks = chunk_labels(labels);
  std::vector<std::int32_t> order;
  for (std::size_t i = 0; i < ex.size(); ++i)
    if (limit <= 0 || ex.record(i) < limit) order.push_back(static_cast<std::int32_t>(i));
  // Longest prompts first: batches of similar length pad little.
  std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    return ex.prompt_length(static_cast<std::size_t>(a)) >
           ex.prompt_length(static_cast<std::size_t>(b));
  });
  EvalResult res;
  std::map<std::int32_t, std::string> answers;  // by record, of the first records: the samples
  for (std::size_t b = 0; b < order.size(); b += static_cast<std::size_t>(rows)) {
    const std::span<const std::int32_t> idx(
        order.data() + b, std::min(order.size() - b, static_cast<std::size_t>(rows)));
    const Batch prompts = collate(ex, idx, tok.pad_id(), true);
    const Generated g = generate(prompts.view(), go);
    for (std::size_t r = 0; r < idx.size(); ++r) {
      const auto e = static_cast<std::size_t>(idx[r]);
      const auto& chunk = chunks[static_cast<std::size_t>(ex.chunk(e))];
      const std::string answer = tok.decode(g.tokens[r], true);
      const ParsedAnswer p = parse_answer(answer, chunk);
      res.score.add(p.mentions,
                    gold_mentions(dev.records[static_cast<std::size_t>(ex.record(e))], chunk));
      res.bad_lines += p.bad_lines + p.unknown_labels;
      res.generated_tokens += static_cast<std::int64_t>(g.tokens[r].size());
      if (ex.record(e) < 3) {
        auto& a = answers[ex.record(e)];
        a += (a.empty() ? "" : " | ") + answer;
      }
    }
    res.prompts += static_cast<std::int64_t>(idx.size());
  }
  std::int32_t last = -1;
  for (auto i : order) last = std::max(last, ex.record(static_cast<std::size_t>(i)));
  res.records = last + 1;
  for (const auto& [rec, a] : answers) {
    std::string one = a;
    for (char& c : one)
      if (c == '\n') c = ';';
    res.samples.push_back(dev.records[static_cast<std::size_t>(rec)].text + "  ->  " + one);
  }
  res.seconds = since(t0);
  return res;
}

inline nlohmann::json eval_json(const EvalResult& r, std::int64_t step, const std::string& split) {
  const PrfCounts& c = r.score.micro();
  nlohmann::json by = nlohmann::json::object();
  for (const auto& [label, l] : r.score.by_label())
    by[label] = {
        {"precision", l.precision()}, {"recall", l.recall()}, {"f1", l.f1()}, {"gold", l.gold}};
  return {{"event", "eval"},
          {"split", split},
          {"step", step},
          {"precision", c.precision()},
          {"recall", c.recall()},
          {"f1", c.f1()},
          {"correct", c.correct},
          {"predicted", c.predicted},
          {"gold", c.gold},
          {"records", r.records},
          {"prompts", r.prompts},
          {"seconds", r.seconds},
          {"unusable_lines", r.bad_lines},
          {"by_label", by}};
}

inline void print_eval(const EvalResult& r, const char* what, bool details) {
  std::printf("%s: F1 %.4f  P %.4f  R %.4f  (%lld records, %lld prompts, %.1f s)\n", what,
              r.score.micro().f1(), r.score.micro().precision(), r.score.micro().recall(),
              static_cast<long long>(r.records), static_cast<long long>(r.prompts), r.seconds);
  if (!details) return;
  for (const auto& [label, c] : r.score.by_label())
    std::printf("  %-14s F1 %.4f  P %.4f  R %.4f  gold %lld\n", label.c_str(), c.f1(),
                c.precision(), c.recall(), static_cast<long long>(c.gold));
  for (const auto& s : r.samples) std::printf("  e.g. %s\n", s.c_str());
}

/// Data, tokenizer and examples of a run, made before any rank starts: by the writer
/// process first (it builds the tokenizer and the example caches in OUT), then by the other
/// processes of a multi-process run, which read what it made (the same files: OUT is on a
/// file system every process sees, as the checkpoints they resume from).
struct Prepared {
  fs::path train_file, dev_file, tokenizer_file;
  std::vector<std::string> labels;
  std::optional<Tokenizer> tok;
  std::string tokenizer_id;
  NerDataset train, dev;
  ExampleSet train_ex, dev_ex;
  std::int64_t max_new_tokens = 0;
};

/// Reads the data and builds (`writer`) or reads the tokenizer and the example caches.
Prepared prepare_training(const Options& o, std::int64_t model_vocab,
                          bool writer = true);  // training_setup.cpp

/// Takes the output folder for a training run (the writer process alone): the lock, the
/// leftovers of a killed save removed, an earlier run's checkpoints refused or (with
/// --overwrite-output-dir) removed; returns the checkpoint a --resume starts from.
std::optional<fs::path> take_output_folder(const Options& o,
                                           std::optional<RunLock>& lock);  // training_setup.cpp

/// Keeps the newest `keep` checkpoints of `dir` (training_setup.cpp).
void rotate_checkpoints(const fs::path& dir, std::int64_t keep);

/// Dev F1 of generation `generate` (a trainer's own model, or a checkpoint loaded by the
/// model's services).
template <Device Dev>
EvalResult evaluate_dev(const GenerateFn& generate, const NerModel<Dev>& model, const Prepared& d,
                        const Options& o, std::int64_t limit) {
  return evaluate_ner(generate, *d.tok, d.dev, d.dev_ex, d.labels, limit, o.eval_rows,
                      decoding(o, *d.tok, d.max_new_tokens, model.facts.seqgpt));
}

/// What a resume compares with the checkpoint it starts from: the entries of the run's
/// checkpoint metadata that change the run. `order` entries also change the examples or
/// their order (the data position means nothing when they differ). The plan is not among
/// them: a checkpoint resumes under any plan.
struct RunKey {
  std::string key, value;
  bool order;
};

/// What differs between a checkpoint's metadata and this run's keys, one line each.
inline std::vector<std::string> changed_keys(const std::map<std::string, std::string>& meta,
                                             const std::vector<RunKey>& keys, bool* order) {
  std::vector<std::string> out;
  for (const auto& k : keys) {
    const auto it = meta.find(k.key);
    if (it != meta.end() && it->second == k.value) continue;
    out.push_back(k.key + ": checkpoint " +
                  (it == meta.end() ? std::string("(not recorded)") : "'" + it->second + "'") +
                  ", this run '" + k.value + "'");
    *order = *order || k.order;
  }
  return out;
}

/// The checkpoint a resume starts from, chosen by the writer process (which sets aside
/// incomplete ones) and told to the others as its step: -1 none, -2 the one
/// checkpoint.safetensors of folders written before checkpoints rotated.
inline std::optional<fs::path> agreed_checkpoint(const Launch& launch, const Checkpoints& c,
                                                 std::optional<fs::path> chosen) {
  if (!launch.processes()) return chosen;
  std::int64_t step = -1;
  if (chosen)
    step = chosen->filename() == "checkpoint.safetensors"
               ? -2
               : detail::parse_field<std::int64_t>(chosen->stem().string().substr(5),
                                                   chosen->string(), "the checkpoint's step");
  AnyComm world = launch.world;
  world.broadcast(&step, 1, 0);  // also: the writer's files are all in place
  if (step == -1) return std::nullopt;
  return step == -2 ? c.dir / "checkpoint.safetensors" : c.path(step);
}

/// Trains `model` under `plan` on device Dev: on threads of this process, or on the
/// processes of a job (`launch`; mpirun, srun) with one rank each. The writer process (world
/// rank 0) owns the output folder: it alone takes the lock, cleans up, writes and prints.
template <Device Dev>
int train_ner(const Options& options, const Launch& launch, const PlanRun<Dev>& plan,
              NerModel<Dev>& model) {
  // --batch is the global batch from here on (micro-batch x accumulation x data ranks).
  const Options o = with_global_batch(options, plan.data_degree, plan.pipeline_degree);
  const int world = plan.world;
  const auto& facts = model.facts;
  const auto t_start = Clock::now();
  // Before anything is written: a job of the wrong size stops on every rank.
  SEQPAR_CHECK(!launch.processes() || launch.world.size() == world,
               world_size_mismatch(o.plan, world, launch));
  const bool writer = launch.writer();
  // The weights must fit the model before anything is allocated for it: the header suffices.
  if (!o.resume && !o.weights.empty()) model.check_weights(o.weights);
  std::optional<RunLock> lock;  // before anything is written into the folder
  std::optional<fs::path> resume_from;
  if (writer) resume_from = take_output_folder(o, lock);
  const Checkpoints checkpoints{o.out_dir};
  // The writer prepares first (it builds the tokenizer and the caches); the others follow
  // once it has told them the checkpoint, reading what it made.
  std::optional<Prepared> prepared;
  if (writer) prepared = prepare_training(o, facts.vocab_size);
  resume_from = agreed_checkpoint(launch, checkpoints, resume_from);
  if (!writer) prepared = prepare_training(o, facts.vocab_size, false);
  Prepared& d = *prepared;
  const Tokenizer& tok = *d.tok;

  BatchingOptions bo;
  bo.rows = o.batch;
  bo.seed = o.seed;
  const std::int64_t per_epoch = static_cast<std::int64_t>(d.train_ex.size()) / o.batch;
  SEQPAR_CHECK(per_epoch > 0, d.train_file.string(), ": ", d.train_ex.size(),
               " examples cannot fill one batch of ", o.batch, " rows");
  const std::int64_t total = o.max_steps > 0 ? o.max_steps : o.epochs * per_epoch;
  TrainOptions to;
  to.seed = o.seed;
  to.max_nonfinite_steps = o.max_nonfinite_steps;
  to.offload = parse_offload(o.offload, "--offload");
  to.recompute = o.recompute;
  to.recompute_every = o.recompute_every;
  to.loss_scale = o.loss_scale;  // fp16 only (--deepspeed): the precision decides whether it scales
  const int data_degree = plan.data_degree;
  const BatchShape shape = set_train_controls(o, total, data_degree, plan.pipeline_degree, to);

  const fs::path model_file = o.out_dir / "model.safetensors";
  if (writer)
    RunInfo{o.model, o.plan, d.labels, d.tokenizer_file, d.max_new_tokens}.write(o.out_dir /
                                                                                 "run.json");
  MetricsLog log(o.out_dir / "metrics.jsonl");  // appended to by the writer's rank 0 alone
  if (writer)
    log.append({{"event", "start"},
                {"command", "train"},
                {"plan", o.plan},
                {"model", o.model},
                {"world", world},
                {"launch", launch.processes() ? launch.launcher : "threads"},
                {"steps", total},
                {"batch", o.batch},
                {"lr", o.lr},
                {"seed", o.seed},
                {"resume", o.resume},
                {"train_examples", d.train_ex.size()},
                {"labels", d.labels},
                {"parameters", facts.parameter_count}});
  // The ranks on this node share its cores.
  const int node_ranks = launch.processes() ? launch.node_processes : world;
  const int threads =
      o.threads > 0 ? static_cast<int>(o.threads) : std::max(1, cores() / node_ranks);
  std::printf("model %s: %lld parameters (hidden %lld, %lld layers, %lld heads, vocab %lld)\n",
              o.model.c_str(), static_cast<long long>(facts.parameter_count),
              static_cast<long long>(facts.hidden), static_cast<long long>(facts.layers),
              static_cast<long long>(facts.heads), static_cast<long long>(facts.vocab_size));
  std::printf(
      "plan %s: %d rank(s) as %s (%s) on %s in %s, %d OpenMP thread(s) each; %lld steps of "
      "%lld rows (%lld per epoch), lr %.2g, warmup %lld\n",
      o.plan.c_str(), world, launch.how().c_str(),
      rank_comm_name(rank_comm(Dev::name, launch.processes())), Dev::name, o.precision.c_str(),
      threads, static_cast<long long>(total), static_cast<long long>(o.batch),
      static_cast<long long>(per_epoch), o.lr, static_cast<long long>(to.schedule.warmup));
  print_train_controls(o, shape, data_degree);

  const std::string labels_key = joined(d.labels);
  // What a resume must find unchanged (or be told, with --allow-changed-options).
  const std::vector<RunKey> run_keys{
      {"ner.data", seqpar::file_hash(d.train_file), true},
      {"ner.tokenizer", d.tokenizer_id, true},
      {"ner.labels", labels_key, true},
      {"ner.batch", std::to_string(o.batch), true},
      {"ner.seed", std::to_string(o.seed), true},
      {"ner.max_chars", std::to_string(o.max_chars), true},
      {"ner.max_tokens", std::to_string(o.max_tokens), true},
      {"ner.lr", real_text(o.lr), false},
      {"ner.warmup_steps", std::to_string(to.schedule.warmup), false},
      {"ner.total_steps", std::to_string(total), false},
      {"ner.weight_decay", real_text(o.weight_decay), false},
      {"ner.max_grad_norm", real_text(o.max_grad_norm), false},
      {"ner.truncation", o.truncation, true},
      {"ner.optimizer", optimizer_key(o), false}};
  const auto metadata = [&](const DataPosition& pos) {
    // Device and precision, like the plan, are recorded and may change on a resume.
    std::map<std::string, std::string> m{{"ner.plan", o.plan},
                                         {"ner.model", o.model},
                                         {"ner.device", o.device},
                                         {"ner.precision", o.precision}};
    for (const auto& k : run_keys) m[k.key] = k.value;
    pos.to_metadata(m, bo);
    return m;
  };
  EvalResult final_eval;
  bool completed = false;  // the last step was taken and the weights saved

  try {
    run_world<Dev>(launch, world, o.plan, [&](AnyComm& comm) {
      set_threads(threads);
      const bool rank0 = comm.rank() == 0;
      const std::unique_ptr<RankTrainer<Dev>> trainer = plan.make(comm, to);
      RankTrainer<Dev>& t = *trainer;
      RankMemory peaks;  // this rank's, over the run
      peaks.device = device_label<Dev>();
      peaks.add(t.memory());
      BatchStream stream(d.train_ex, bo, tok.pad_id());
      fs::path last_checkpoint;
      if (resume_from) {
        const std::string file = resume_from->string();
        const auto meta = t.load_checkpoint(*resume_from);
        last_checkpoint = *resume_from;
        bool order = false;
        const auto changed = changed_keys(meta, run_keys, &order);
        if (!changed.empty() && !o.allow_changed_options) {
          std::string list;
          for (const auto& c : changed) list += "\n  " + c;
          seqpar::detail::fail(file,
                               ": this run differs from the one that wrote the checkpoint:", list,
                               "\nresume with the same data and options, or pass "
                               "--allow-changed-options to continue anyway");
        }
        if (order) {
          // The data order of this run is another: a position in the old one means nothing.
          // Start at the checkpoint's epoch.
          const auto e = meta.find("data.epoch");
          const std::int64_t epoch = e == meta.end() ? 0
                                                     : seqpar::detail::parse_field<std::int64_t>(
                                                           e->second, file, "metadata data.epoch");
          stream.seek({std::max<std::int64_t>(epoch, 0), 0});
        } else {
          stream.seek(DataPosition::from_metadata(meta, bo, file));
        }
        if (rank0) {
          for (const auto& c : changed) std::printf("continuing with a changed %s\n", c.c_str());
          std::printf(
              "resumed from %s at step %lld (epoch %lld, batch %lld); steps after %lld logged "
              "before are redone\n",
              file.c_str(), static_cast<long long>(t.steps_taken()),
              static_cast<long long>(stream.position().epoch),
              static_cast<long long>(stream.position().batch),
              static_cast<long long>(t.steps_taken()));
          // Readers of metrics.jsonl drop the train events above this step logged before it.
          log.append({{"event", "resume"},
                      {"step", t.steps_taken()},
                      {"checkpoint", file},
                      {"changed", changed}});
        }
      } else if (!o.weights.empty()) {
        model.read_weights(o.weights, [&](const TensorLookup& lookup, const std::string& file) {
          t.load_weights(lookup, file);
        });
        if (rank0) std::printf("weights from %s\n", o.weights.string().c_str());
      }
      const auto evaluate = [&](std::int64_t step, std::int64_t limit, bool details) {
        // The checkpoint just written holds the whole model whatever the plan; rank 0
        // generates from it while the other ranks wait.
        comm.barrier();
        if (rank0) {
          // One rank holding the whole model generates from it; else rank 0 loads the
          // checkpoint into a whole model of its own (made once, kept for the next).
          GenerateFn gen = t.own_model();
          if (!gen) gen = model.load(last_checkpoint);
          const EvalResult r = evaluate_dev(gen, model, d, o, limit);
          log.append(eval_json(r, step, "dev"));
          print_eval(r, ("step " + std::to_string(step) + " dev").c_str(), details);
          std::fflush(stdout);
          if (details) final_eval = r;
        }
        comm.barrier();
      };

      std::int64_t step = t.steps_taken();
      const auto t0 = Clock::now();
      const std::int64_t first = step;
      double eval_s = 0;  // kept out of the ETA
      double window_s = 0, window_tokens = 0, loss_sum = 0;
      std::int64_t window_steps = 0;
      while (step < total) {
        const Batch b = stream.next();
        const StepStats st = t.step(b);
        step = st.step;
        peaks.add(st.memory);
        if (rank0) {
          log.append({{"event", "train"},
                      {"step", step},
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
                      {"memory_peak_bytes_by_category", memory_peaks_json(st.memory)}});
          if (st.overflow) {
            // Never folded into a window either: the scaler answered it (DeepSpeed's rules).
            std::printf(
                "step %lld skipped: the gradients overflowed at loss scale %g (now %g; %lld "
                "skipped in all); no update made\n",
                static_cast<long long>(step + 1), st.loss_scale, t.loss_scale(),
                static_cast<long long>(st.skipped_steps));
            std::fflush(stdout);
          } else if (st.skipped) {
            // Never folded into a window: a skipped step is always said.
            std::printf(
                "step %lld skipped: loss %g, grad norm %g not finite (%lld in a row, at "
                "most %lld; %lld skipped in all); no update made\n",
                static_cast<long long>(step + 1), st.loss, st.grad_norm,
                static_cast<long long>(st.nonfinite_in_a_row),
                static_cast<long long>(o.max_nonfinite_steps),
                static_cast<long long>(st.skipped_steps));
            std::fflush(stdout);
          } else {
            window_s += st.seconds;
            window_tokens += static_cast<double>(st.tokens);
            loss_sum += st.loss;
            ++window_steps;
          }
          if (!st.skipped && !o.quiet &&
              (step % o.log_every == 0 || step == first + 1 || step == total)) {
            const double elapsed = since(t0) - eval_s;
            const double eta =
                elapsed / static_cast<double>(step - first) * static_cast<double>(total - step);
            const double epoch = static_cast<double>(step) / static_cast<double>(per_epoch);
            std::printf(
                "step %lld/%lld  epoch %.2f  loss %.4f  lr %.2e  grad %.2f  %.0f tok/s  ETA %s  "
                "mem "
                "%.1f MiB%s\n",
                static_cast<long long>(step), static_cast<long long>(total), epoch,
                loss_sum / static_cast<double>(window_steps), st.lr, st.grad_norm,
                window_tokens / window_s, duration_text(eta).c_str(),
                static_cast<double>(st.memory.total_peak) / (1 << 20),
                st.skipped_steps > 0
                    ? ("  (" + std::to_string(st.skipped_steps) + " skipped)").c_str()
                    : "");
            std::fflush(stdout);
            window_s = window_tokens = loss_sum = 0;
            window_steps = 0;
          }
        }
        // A skipped step took no optimizer step: nothing to save or evaluate again.
        if (st.skipped) continue;
        const bool epoch_end = stream.position().batch == 0;
        const bool last = step == total;
        const bool stop = o.stop_after > 0 && step == o.stop_after && !last;
        const bool eval =
            !o.no_eval && (last || (o.eval_every > 0 ? step % o.eval_every == 0 : epoch_end));
        const bool save = o.save_every > 0 ? step % o.save_every == 0 : epoch_end;
        if (save || eval || stop || last) {
          last_checkpoint = checkpoints.path(step);
          t.save_checkpoint(last_checkpoint, metadata(stream.position()));
          if (rank0) rotate_checkpoints(o.out_dir, o.save_total_limit);
        }
        if (eval) {
          const auto e0 = Clock::now();
          evaluate(step, last ? 0 : o.eval_limit < 0 ? 100 : o.eval_limit, last);
          eval_s += since(e0);
        }
        if (stop) {
          if (rank0)
            std::printf("stopped after step %lld; continue with --resume\n",
                        static_cast<long long>(step));
          break;
        }
      }
      if (step == total) {
        t.save_weights(model_file);
        if (comm.rank() == 0) completed = true;  // the one rank that writes it
      }
      // Every rank's peaks, one line each from rank 0 (a per-process view, as nvidia-smi's).
      const auto memory = gather_memory(comm, peaks);
      if (rank0) {
        print_memory(memory);
        log.append(memory_json(memory));
      }
    });
  } catch (const std::exception& e) {
    try {  // the failure may be the metrics file's own
      if (writer) log.append({{"event", "error"}, {"message", e.what()}});
    } catch (const std::exception&) {
    }
    throw;
  }
  if (completed) {
    const fs::path hf = o.export_hf.empty() ? o.out_dir / "hf" : o.export_hf;
    model.write_hf_dir(hf, model_file, d.tokenizer_file,
                       decoding(o, *d.tok, d.max_new_tokens, facts.seqgpt), o.max_tokens);
    std::printf("model directory %s (transformers: AutoModelForCausalLM.from_pretrained)\n",
                hf.string().c_str());
  }
  if (final_eval.prompts > 0) {
    std::printf("dev F1 %.4f (precision %.4f, recall %.4f) after %s; weights in %s\n",
                final_eval.score.micro().f1(), final_eval.score.micro().precision(),
                final_eval.score.micro().recall(), duration_text(since(t_start)).c_str(),
                model_file.string().c_str());
  }
  if (writer) log.append({{"event", "end"}, {"seconds", since(t_start)}});
  return 0;
}

/// The weights, tokenizer and labels eval and predict use: the options', else the run's.
struct Trained {
  fs::path weights, tokenizer;
  std::vector<std::string> labels;
  std::int64_t max_new_tokens = 0;
};

inline Trained trained(const Options& o) {
  const auto info = RunInfo::read(o.out_dir / "run.json");
  Trained t;
  t.weights = !o.weights.empty() ? o.weights : o.out_dir / "model.safetensors";
  if (o.weights.empty() && !fs::exists(t.weights)) {
    const auto newest = Checkpoints{o.out_dir}.newest_complete();
    t.weights = newest ? *newest : o.out_dir / "checkpoint.safetensors";
  }
  SEQPAR_CHECK(fs::exists(t.weights), t.weights.string(),
               ": no weights; train first or pass --weights");
  t.tokenizer = !o.tokenizer.empty() ? o.tokenizer
                : info               ? info->tokenizer
                                     : o.out_dir / "tokenizer.json";
  t.labels = !o.labels.empty() ? o.labels : info ? info->labels : std::vector<std::string>{};
  SEQPAR_CHECK(!t.labels.empty(), "no label set: pass --labels a,b,c (or train into --out first)");
  t.max_new_tokens = o.max_new_tokens > 0               ? o.max_new_tokens
                     : info && info->max_new_tokens > 0 ? info->max_new_tokens
                                                        : 128;
  return t;
}

template <Device Dev>
int eval_ner(const Options& o, NerModel<Dev>& model) {
  const Trained tr = trained(o);
  const Tokenizer tok = load_tokenizer(tr.tokenizer, model.facts.vocab_size);
  const fs::path dev_file = find_split(o.data_dir, "dev");
  ReadOptions ro;
  ro.labels = tr.labels;
  ro.max_chars = o.max_chars;
  std::printf("data\n");
  const NerDataset dev = read_split(dev_file, ro);
  print_report(dev.report);
  ExampleReport rep;
  fs::create_directories(o.out_dir);
  const ExampleSet ex =
      cached_examples(o, "dev", dev_file, dev, tr.labels, tok, file_hash(tr.tokenizer), rep);
  set_threads(o.threads > 0 ? static_cast<int>(o.threads) : 1);
  const GenerateFn generate = model.load(tr.weights);
  std::printf("weights %s\n", tr.weights.string().c_str());
  const EvalResult r =
      evaluate_ner(generate, tok, dev, ex, tr.labels, std::max<std::int64_t>(o.eval_limit, 0),
                   o.eval_rows, decoding(o, tok, tr.max_new_tokens, model.facts.seqgpt));
  print_eval(r, "dev", true);
  MetricsLog(o.out_dir / "metrics.jsonl").append(eval_json(r, 0, "dev"));
  return 0;
}

template <Device Dev>
int predict_ner(const Options& o, NerModel<Dev>& model) {
  const Trained tr = trained(o);
  const Tokenizer tok = load_tokenizer(tr.tokenizer, model.facts.vocab_size);
  const auto texts = predict_texts(o);
  const auto chunks = chunk_labels(tr.labels);
  set_threads(o.threads > 0 ? static_cast<int>(o.threads) : 1);
  const GenerateFn generate = model.load(tr.weights);
  std::vector<std::vector<std::int32_t>> prompts;
  for (const auto& t : texts)
    for (const auto& c : chunks)
      prompts.push_back(cut_prompt(o, tok.encode(seqgpt_prompt(t, Task::extraction, c))));
  std::vector<std::string> answers(prompts.size());
  const GenerateOptions go = decoding(o, tok, tr.max_new_tokens, model.facts.seqgpt);
  for (std::size_t b = 0; b < prompts.size(); b += static_cast<std::size_t>(o.eval_rows)) {
    const std::size_t n = std::min(prompts.size() - b, static_cast<std::size_t>(o.eval_rows));
    const Batch batch = left_pad(std::span(prompts).subspan(b, n), tok.pad_id());
    const Generated g = generate(batch.view(), go);
    for (std::size_t r = 0; r < n; ++r) answers[b + r] = tok.decode(g.tokens[r], true);
  }
  for (std::size_t i = 0; i < texts.size(); ++i) {
    nlohmann::json entities = nlohmann::json::array();
    std::string answer;
    for (std::size_t c = 0; c < chunks.size(); ++c) {
      const std::string& a = answers[i * chunks.size() + c];
      answer += (c ? "\n" : "") + a;
      for (const auto& m : parse_answer(a, chunks[c]).mentions)
        entities.push_back({{"label", m.label}, {"text", m.text}});
    }
    std::printf("%s\n",
                nlohmann::json{{"text", texts[i]}, {"entities", entities}, {"answer", answer}}
                    .dump()
                    .c_str());
  }
  return 0;
}

/// Runs the command of `o` with model M on device Dev, training in precision Prec under the
/// plan called o.plan of the families Families visits (CpuFamilies, or CudaFamilies:
/// device_launch.hpp). Evaluation and prediction run on one process: under a launcher, on
/// world rank 0 alone.
template <BloomModel M, Device Dev, Precision Prec, class Families>
int run_model(const Options& o, const Launch& launch) {
  if (o.command != "train" && !launch.writer()) return 0;
  const std::unique_ptr<NerModel<Dev>> model = make_ner_model<M, Dev>();
  if (o.command == "eval") return eval_ner(o, *model);
  if (o.command == "predict") return predict_ner(o, *model);
  std::optional<PlanRun<Dev>> plan;
  Families::each([&](auto family) {
    if (!plan) plan = family_plan<M, decltype(family), Dev, Prec>(o.plan);
  });
  SEQPAR_CHECK(plan.has_value(), "--plan '", o.plan, "' is not one of: ", plan_list());
  return train_ner(o, launch, *plan, *model);
}

}  // namespace ner

// seqgpt_ner train (train.hpp): the checks before anything is read or written, the data,
// the output folder, and the loop of each rank around AnyTrainer::step.
#include "train.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <thread>

#include "devices.hpp"
#include "seqpar/comm/agreement.hpp"
#include "seqpar/data/prompt.hpp"
#include "seqpar/data/token_cache.hpp"
#include "seqpar/plan/registry.hpp"

namespace ner {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string duration_text(double s) {
  char buf[32];
  const auto n = static_cast<long long>(s + 0.5);
  if (n >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", n / 3600, n / 60 % 60);
  else
    std::snprintf(buf, sizeof buf, "%lldm%02llds", n / 60, n % 60);
  return buf;
}

// The shortest text that reads back as x (0.005, not 0.0050000000000000001).
std::string real_text(double x) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

// The entries a resume compares with the checkpoint before the output folder is taken: the
// inputs and options that change the examples, their order or the optimizer.
std::vector<seqpar::RunKey> input_keys(const Options& o, const NerData& d,
                                       const TokenizerChoice& tok, std::int64_t batch) {
  const auto& a = o.train;
  return {{"ner.data", d.train_hash, true},
          {"ner.tokenizer", tok.id, true},
          {"ner.labels", joined(d.labels), true},
          {"ner.batch", std::to_string(batch), true},
          {"ner.seed", std::to_string(a.seed), true},
          {"ner.max_chars", std::to_string(o.max_chars), true},
          {"ner.max_tokens", std::to_string(o.max_length), true},
          {"ner.truncation", o.truncation, true},
          {"ner.lr", real_text(a.learning_rate), false},
          {"ner.weight_decay", real_text(a.weight_decay), false},
          {"ner.max_grad_norm", real_text(a.max_grad_norm), false},
          {"ner.optimizer", seqpar::optimizer_key(a), false}};
}

// What every process of a job must have been given alike (each parses its own command line:
// mpirun -np 4 A : -np 4 B): the layout, model, device and precision, the run's length and
// output, the checkpoint asked for, and every input key (data and tokenizer digests, batch,
// seed, ...). Refused before the folder is looked at and before any trainer is made.
seqpar::AgreedValues launch_values(const Options& o, const Launched& run,
                                   const std::vector<seqpar::RunKey>& keys) {
  seqpar::AgreedValues v{
      {"plan", seqpar::plan_name(run.layout)},
      {"model", o.model},
      {"device", o.device},
      {"precision", o.train.precision},
      {"max_steps", std::to_string(o.train.max_steps)},
      {"num_train_epochs", real_text(o.train.num_train_epochs)},
      {"output_dir", o.out_dir.string()},
      {"resume_from_checkpoint",
       o.resume ? (o.resume_from.empty() ? "newest" : o.resume_from.string()) : "(none)"},
      {"weights", o.weights.string()}};
  for (const auto& k : keys) v.emplace_back(k.key, k.value);
  return v;
}

void print_reports(const std::vector<seqpar::RankReport>& ranks) {
  const auto mib = [](std::int64_t b) { return static_cast<double>(b) / (1 << 20); };
  std::printf("peak memory per rank (MiB)\n");
  for (const auto& r : ranks) {
    std::printf("  rank %lld  pid %lld  %s  %9.1f:", static_cast<long long>(r.rank),
                static_cast<long long>(r.pid), r.device.c_str(), mib(r.total_peak));
    for (std::size_t k = 0; k < r.peak.size(); ++k)
      if (r.peak[k] > 0)
        std::printf("  %s %.1f", seqpar::memory_name(static_cast<seqpar::Memory>(k)),
                    mib(r.peak[k]));
    std::printf("\n");
  }
}

}  // namespace

Launched check_launch(const Options& o, const seqpar::RankLaunch& launch) {
  Launched r;
  r.model = &model_info(o.model);
  r.layout = seqpar::resolve_plan(o.train.plan, {launch.world_size(), launch.origin()},
                                  r.model->config, seqpar::StandardPlans::layouts());
  const auto precisions = compiled_precisions(o.device);
  SEQPAR_CHECK(!precisions.empty(), "--device ", o.device,
               ": this seqgpt_ner was built without CUDA; build it with the CUDA toolkit (cmake "
               "--preset cuda, or -DSEQPAR_WITH_CUDA=ON) or run with --device cpu");
  if (std::find(precisions.begin(), precisions.end(), o.train.precision) == precisions.end()) {
    std::string have;
    for (const auto p : precisions) have += (have.empty() ? "" : ", ") + std::string(p);
    seqpar::detail::fail(
        "precision ", o.train.precision,
        o.deepspeed.empty() ? std::string() : " (from " + o.deepspeed.string() + " or --precision)",
        " is not built for --device ", o.device, " in this seqgpt_ner; it has ", have,
        o.device == "cpu" ? " (16 bits train with --device cuda)" : "");
  }
  seqpar::check_loss_scale_arguments(o.train);
  r.batch = seqpar::batch_shape(o.train, r.layout.data, r.layout.pipeline);
  return r;
}

std::unique_ptr<Training> prepare_training(const Options& options, const seqpar::RankLaunch& launch,
                                           const Launched& run) {
  auto tp = std::make_unique<Training>();
  Training& t = *tp;
  t.o = options;
  t.launch = launch;
  t.run = run;
  const Options& o = t.o;
  const bool writer = launch.writer();
  t.services = model_services(o.model, o.device);
  // The weights must fit the model before anything is allocated for it: the header suffices.
  if (!o.resume && !o.weights.empty()) t.services->check_weights(o.weights);
  t.data = read_ner_data(o);
  const std::int64_t vocab = run.model->config.vocab_size;
  t.tokenizer_choice = choose_tokenizer(o, t.data, vocab);
  // A sentence gives one example per label chunk at most: fewer cannot fill a batch.
  const auto chunks = static_cast<std::int64_t>(seqpar::chunk_labels(t.data.labels).size());
  SEQPAR_CHECK(static_cast<std::int64_t>(t.data.train.records.size()) * chunks >= run.batch.rows,
               t.data.train_file.string(), ": ", t.data.train.records.size(), " sentences (",
               chunks, " prompt(s) each) cannot fill one batch of ", run.batch.rows, " rows");
  t.keys = input_keys(o, t.data, t.tokenizer_choice, run.batch.rows);
  // The run's length, when it is known before the examples are made (--max_steps, or the
  // count of a cache made from these inputs): a resume then compares it before the folder is
  // taken too.
  const auto length_keys = [&](std::int64_t examples) {
    const std::int64_t total = seqpar::total_steps(o.train, examples / run.batch.rows);
    const auto warmup = seqpar::lr_schedule(o.train, total).warmup;
    return std::vector<seqpar::RunKey>{{"ner.warmup_steps", std::to_string(warmup), false},
                                       {"ner.total_steps", std::to_string(total), false}};
  };
  std::vector<seqpar::RunKey> early = t.keys;
  const auto counted =
      cached_example_count(o, "train", t.data.train_file, t.data.labels, t.tokenizer_choice.id);
  if (o.train.max_steps > 0 || counted)
    for (auto& k : length_keys(counted.value_or(run.batch.rows))) early.push_back(k);

  // Processes started with their own command lines must agree before anything is decided.
  seqpar::AnyComm processes = launch.processes;
  if (launch.under_launcher() && processes.size() > 1) {
    try {
      seqpar::require_agreement(processes, launch_values(o, run, early));
    } catch (const seqpar::Error& e) {
      throw seqpar::Refusal(e.what());  // every process alike: rank 0 says it
    }
  }

  // The writer decides: the folder looked at, a resume's checkpoint compared with this run,
  // and only then the folder taken and written (tokenizer, caches). The other processes
  // follow with the checkpoint it chose, reading what it wrote.
  const std::string resume = seqpar::decide_on_writer(processes, [&]() -> std::string {
    seqpar::RunFolderOptions fo;
    fo.lock_name = "seqgpt_ner.lock";
    fo.resume = o.resume;
    fo.resume_from = o.resume_from;
    fo.overwrite = o.overwrite_output_dir;
    fo.own_files = {"tokenizer.json", "cache/*.tokens.safetensors"};
    t.folder.emplace(o.out_dir, fo);
    if (t.folder->resume_from())
      seqpar::check_resume_keys(*t.folder->resume_from(), t.folder->resume_metadata(), early,
                                o.allow_changed_options, "--allow_changed_options", nullptr);
    for (const auto& note : t.folder->take()) std::printf("%s\n", note.c_str());
    place_tokenizer(t.tokenizer_choice);
    t.log.emplace(o.out_dir / "metrics.jsonl");
    return t.folder->resume_from() ? t.folder->resume_from()->string() : std::string();
  });
  if (!resume.empty()) t.resume_from = resume;

  // The writer builds the caches before the others read them.
  const auto examples = [&] {
    t.tokenizer.emplace(load_tokenizer(t.tokenizer_choice.file, vocab));
    std::printf("  tokenizer %s: %zu ids\n", t.tokenizer_choice.file.string().c_str(),
                t.tokenizer->vocab_size());
    seqpar::ExampleReport tr, dr;
    t.train_ex = cached_examples(o, "train", t.data.train_file, t.data.train, t.data.labels,
                                 *t.tokenizer, t.tokenizer_choice.id, tr);
    t.dev_ex = cached_examples(o, "dev", t.data.dev_file, t.data.dev, t.data.labels, *t.tokenizer,
                               t.tokenizer_choice.id, dr);
    t.max_new_tokens = o.max_new_tokens > 0 ? o.max_new_tokens : tr.max_answer_tokens + 16;
  };
  if (writer) examples();
  seqpar::decide_on_writer(processes, [] { return std::string(); });  // the caches are there
  if (!writer) examples();

  t.per_epoch = static_cast<std::int64_t>(t.train_ex.size()) / run.batch.rows;
  SEQPAR_CHECK(t.per_epoch > 0, t.data.train_file.string(), ": ", t.train_ex.size(),
               " examples cannot fill one batch of ", run.batch.rows, " rows");
  t.total = seqpar::total_steps(o.train, t.per_epoch);
  t.options = seqpar::train_options(o.train, t.total, run.batch);
  for (auto& k : length_keys(static_cast<std::int64_t>(t.train_ex.size()))) t.keys.push_back(k);
  t.batching.rows = run.batch.rows;
  t.batching.seed = o.train.seed;
  if (t.resume_from) {
    // Every key again, the run's length with them (when a cache had to be made it was known
    // only now; the inputs agreed, so what was written is what the folder held).
    try {  // every process reads the same file: all refuse alike
      const auto meta = seqpar::CheckpointDir::open_metadata(*t.resume_from);
      t.changed = seqpar::check_resume_keys(*t.resume_from, meta, t.keys, o.allow_changed_options,
                                            "--allow_changed_options", &t.reorder);
    } catch (const seqpar::Error& e) {
      throw seqpar::Refusal(e.what());
    }
  }
  // The ranks on a node share its cores.
  const int node_ranks = launch.under_launcher() ? launch.node_processes : launch.threads;
  t.threads = o.threads > 0
                  ? static_cast<int>(o.threads)
                  : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / node_ranks);
  if (writer) {
    RunInfo{o.model,       seqpar::plan_name(run.layout),
            t.data.labels, t.tokenizer_choice.file,
            o.data_dir,    t.max_new_tokens}
        .write(o.out_dir / "run.json");
    t.log->append({{"event", "start"},
                   {"command", "train"},
                   {"plan", seqpar::plan_name(run.layout)},
                   {"layout", run.layout.name()},
                   {"model", o.model},
                   {"world", run.layout.world_size()},
                   {"launch", launch.under_launcher() ? launch.launcher : "threads"},
                   {"steps", t.total},
                   {"batch", run.batch.rows},
                   {"lr", o.train.learning_rate},
                   {"seed", o.train.seed},
                   {"resume", t.resume_from.has_value()},
                   {"train_examples", t.train_ex.size()},
                   {"labels", t.data.labels},
                   {"parameters", run.model->parameter_count}});
    const auto& m = run.model->config;
    std::printf("model %s: %lld parameters (hidden %lld, %lld layers, %lld heads, vocab %lld)\n",
                o.model.c_str(), static_cast<long long>(run.model->parameter_count),
                static_cast<long long>(m.hidden), static_cast<long long>(m.layers),
                static_cast<long long>(m.heads), static_cast<long long>(m.vocab_size));
    std::printf(
        "plan %s (%s; %s): %d rank(s) as %s (%s) on %s in %s, %d OpenMP thread(s) each; %lld "
        "steps of %lld rows (%lld per epoch), lr %.2g, warmup %lld\n",
        seqpar::plan_name(run.layout).c_str(), run.layout.name().c_str(),
        seqpar::plan_flags(run.layout).c_str(), run.layout.world_size(), launch.how().c_str(),
        o.device == "cuda" ? (launch.under_launcher() ? "NcclComm" : "CudaThreadComm")
                           : (launch.under_launcher() ? "MpiComm" : "ThreadComm"),
        o.device.c_str(), o.train.precision.c_str(), t.threads, static_cast<long long>(t.total),
        static_cast<long long>(run.batch.rows), static_cast<long long>(t.per_epoch),
        o.train.learning_rate, static_cast<long long>(t.options.schedule.warmup));
    std::printf(
        "  batch %lld rows = micro-batch %lld x accumulation %lld x %d data rank(s); lr %s, %s "
        "warmup from %g; AdamW betas %g, %g, eps %g; offload %s\n",
        static_cast<long long>(run.batch.rows), static_cast<long long>(run.batch.micro_rows),
        static_cast<long long>(run.batch.accumulation), run.layout.data,
        o.train.lr_scheduler_type.c_str(), o.train.warmup_type.c_str(), o.train.warmup_min_lr,
        o.train.adam_beta1, o.train.adam_beta2, o.train.adam_epsilon, o.train.offload.c_str());
    std::fflush(stdout);
  }
  return tp;
}

namespace {

// The progress lines of rank 0: a skipped step always, else one line every --logging_steps
// steps with the means since the last line (evaluations kept out of the ETA).
class Progress {
 public:
  Progress(const Training& t, std::int64_t first) : t_(t), first_(first) {}

  void step(const seqpar::StepStats& st, double loss_scale_now) {
    const Options& o = t_.o;
    const long long s = static_cast<long long>(st.step);
    if (st.overflow) {
      std::printf(
          "step %lld skipped: the gradients overflowed at loss scale %g (now %g; %lld skipped "
          "in all); no update made\n",
          s + 1, st.loss_scale, loss_scale_now, static_cast<long long>(st.skipped_steps));
    } else if (st.skipped) {
      std::printf(
          "step %lld skipped: loss %g, grad norm %g not finite (%lld in a row, at most %lld; "
          "%lld skipped in all); no update made\n",
          s + 1, st.loss, st.grad_norm, static_cast<long long>(st.nonfinite_in_a_row),
          static_cast<long long>(o.train.max_nonfinite_steps),
          static_cast<long long>(st.skipped_steps));
    } else {
      seconds_ += st.seconds;
      tokens_ += static_cast<double>(st.tokens);
      loss_ += st.loss;
      ++steps_;
      if (!o.quiet &&
          (st.step % o.train.logging_steps == 0 || st.step == first_ + 1 || st.step == t_.total)) {
        const double eta = (since(t0_) - paused_) / static_cast<double>(st.step - first_) *
                           static_cast<double>(t_.total - st.step);
        std::printf(
            "step %lld/%lld  epoch %.2f  loss %.4f  lr %.2e  grad %.2f  %.0f tok/s  ETA %s  mem "
            "%.1f MiB%s\n",
            s, static_cast<long long>(t_.total),
            static_cast<double>(st.step) / static_cast<double>(t_.per_epoch),
            loss_ / static_cast<double>(steps_), st.lr, st.grad_norm, tokens_ / seconds_,
            duration_text(eta).c_str(), static_cast<double>(st.memory.total_peak) / (1 << 20),
            st.skipped_steps > 0 ? ("  (" + std::to_string(st.skipped_steps) + " skipped)").c_str()
                                 : "");
        seconds_ = tokens_ = loss_ = 0;
        steps_ = 0;
      }
    }
    std::fflush(stdout);
  }
  /// Time spent outside the steps (evaluations): kept out of the ETA.
  void paused(double seconds) { paused_ += seconds; }

 private:
  const Training& t_;
  std::int64_t first_;
  Clock::time_point t0_ = Clock::now();
  double paused_ = 0, seconds_ = 0, tokens_ = 0, loss_ = 0;
  std::int64_t steps_ = 0;
};

// The start of a rank's run: the checkpoint resumed (its data position, or the beginning of
// its epoch when the data order changed), or the weights to fine-tune loaded.
void begin(Training& t, seqpar::TrainingRun& run, seqpar::AnyTrainer& trainer,
           seqpar::BatchStream& stream, bool rank0) {
  const Options& o = t.o;
  if (!t.resume_from) {
    if (o.weights.empty()) return;
    trainer.load_weights(o.weights);
    if (rank0) std::printf("weights from %s\n", o.weights.string().c_str());
    return;
  }
  const std::string file = t.resume_from->string();
  const auto meta = run.resume(*t.resume_from, {{"changed", t.changed}});
  if (t.reorder) {
    // The data order of this run is another: a position in the old one means nothing.
    const auto e = meta.find("data.epoch");
    const std::int64_t epoch = e == meta.end() ? 0
                                               : seqpar::detail::parse_field<std::int64_t>(
                                                     e->second, file, "metadata data.epoch");
    stream.seek({std::max<std::int64_t>(epoch, 0), 0});
  } else {
    stream.seek(seqpar::DataPosition::from_metadata(meta, t.batching, file));
  }
  if (!rank0) return;
  for (const auto& c : t.changed) std::printf("continuing with a changed %s\n", c.c_str());
  std::printf("resumed from %s at step %lld (epoch %lld, batch %lld)\n", file.c_str(),
              static_cast<long long>(run.step()), static_cast<long long>(stream.position().epoch),
              static_cast<long long>(stream.position().batch));
}

// Dev F1 of the checkpoint just written (it holds the whole model whatever the plan): rank 0
// generates from it while the other ranks wait. Returns the seconds it took.
double evaluate(Training& t, seqpar::AnyComm& world, const seqpar::TrainingRun& run,
                std::int64_t step) {
  const Options& o = t.o;
  const auto t0 = Clock::now();
  const bool last = step == t.total;
  world.barrier();
  if (world.rank() == 0) {
    const EvalResult r = evaluate_ner(
        t.services->load(run.last_checkpoint()), *t.tokenizer, t.data.dev, t.dev_ex, t.data.labels,
        last               ? 0
        : o.eval_limit < 0 ? 100
                           : o.eval_limit,
        o.eval_rows, decoding(o, *t.tokenizer, t.max_new_tokens, t.run.model->seqgpt));
    t.log->append(eval_json(r, step, "dev"));
    print_eval(r, "step " + std::to_string(step) + " dev", last);
    if (last) t.final_eval = r;
  }
  world.barrier();
  return since(t0);
}

}  // namespace

void TrainRank::operator()(seqpar::AnyComm& world) const {
  const Options& o = t.o;
  const bool rank0 = world.rank() == 0;
  set_threads(t.threads);
  seqpar::AnyTrainer trainer =
      t.services->make_trainer(t.run.layout, o.train.precision, world, t.options);
  seqpar::BatchStream stream(t.train_ex, t.batching, t.tokenizer->pad_id());
  seqpar::RunHooks hooks;
  hooks.checkpoint_metadata = [&] {
    std::map<std::string, std::string> m{{"ner.plan", seqpar::plan_name(t.run.layout)},
                                         {"ner.model", o.model},
                                         {"ner.device", o.device},
                                         {"ner.precision", o.train.precision}};
    for (const auto& k : t.keys) m[k.key] = k.value;
    stream.position().to_metadata(m, t.batching);
    return m;
  };
  seqpar::TrainingRun run(trainer, world, o.out_dir,
                          {t.total, o.train.save_steps, o.train.save_total_limit, o.stop_after},
                          hooks);
  if (rank0 && t.folder) run.keep_books(*t.folder, *t.log);
  // Every rank runs what the others run (the trainer's options, the checkpoint, the inputs).
  seqpar::AgreedValues values;
  for (const auto& k : t.keys) values.emplace_back(k.key, k.value);
  run.start(values, t.resume_from);
  begin(t, run, trainer, stream, rank0);
  Progress progress(t, run.step());
  while (run.running()) {
    const seqpar::StepStats st = trainer.step(stream.next());
    // A checkpoint at each epoch's end (unless --save_steps) and before each evaluation.
    const bool epoch_end = stream.position().batch == 0;
    const bool eval =
        !st.skipped && !o.no_eval &&
        (st.step == t.total || (o.eval_steps > 0 ? st.step % o.eval_steps == 0 : epoch_end));
    run.after_step(st, eval || (o.train.save_steps == 0 && epoch_end));
    if (rank0) progress.step(st, trainer.loss_scale());
    if (eval) progress.paused(evaluate(t, world, run, st.step));
  }
  if (run.stopped() && rank0) {
    const seqpar::StopDecision& why = run.stop_decision();
    std::printf(
        "stopped after step %lld%s; checkpoint %s; continue with the same command and "
        "--resume_from_checkpoint (the newest checkpoint) or --resume_from_checkpoint "
        "%s\n",
        static_cast<long long>(run.step()), why ? (" by " + why.describe()).c_str() : "",
        run.last_checkpoint().c_str(), run.last_checkpoint().c_str());
    t.stop_signal = why.signal;
  }
  const bool completed = run.finish(o.out_dir / "model.safetensors");
  seqpar::RankReport mine = run.report();
  mine.device = device_label(o.device);
  auto reports = seqpar::gather_rank_reports(world, mine);
  if (rank0) {
    t.completed = completed;
    t.reports = std::move(reports);
  }
}

void log_failure(Training& t, const std::string& message) {
  try {  // the failure may be the metrics file's own
    if (t.log) t.log->append({{"event", "error"}, {"message", message}});
  } catch (const std::exception&) {
  }
}

int finish_training(Training& t) {
  const Options& o = t.o;
  if (!t.launch.writer()) return 0;
  print_reports(t.reports);
  t.log->append(seqpar::rank_reports_json(t.reports));
  if (t.completed) {
    const fs::path hf = o.export_hf.empty() ? o.out_dir / "hf" : o.export_hf;
    t.services->write_hf_dir(
        hf, o.out_dir / "model.safetensors", t.tokenizer_choice.file, special_tokens(*t.tokenizer),
        decoding(o, *t.tokenizer, t.max_new_tokens, t.run.model->seqgpt), o.max_length);
    std::printf("model directory %s (transformers: AutoModelForCausalLM.from_pretrained)\n",
                hf.string().c_str());
  }
  if (t.final_eval.prompts > 0)
    std::printf("dev F1 %.4f (precision %.4f, recall %.4f) after %s; weights in %s\n",
                t.final_eval.score.micro().f1(), t.final_eval.score.micro().precision(),
                t.final_eval.score.micro().recall(), duration_text(since(t.started)).c_str(),
                (o.out_dir / "model.safetensors").string().c_str());
  t.log->append({{"event", "end"}, {"seconds", since(t.started)}});
  // Stopped by a signal (with its checkpoint): the exit code a shell gives a process the
  // signal ended, so that a job script sees the run did not finish.
  return t.stop_signal ? 128 + t.stop_signal : 0;
}

}  // namespace ner

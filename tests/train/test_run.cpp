// The run around the step (train/run.hpp, run_folder.hpp, metrics_log.hpp, launch.hpp,
// hf_model_dir.hpp): one run per output folder (the lock names its pid and host; another
// host's lock is never taken over), nothing written before every check has passed,
// checkpoints rotated and resumed (newest complete or named), metrics holding each step once
// after a resume, a stop asked for by one rank ending every rank at the same step with a
// checkpoint, the bytes of a step equal to the ring formula, decisions of rank 0 followed by
// every rank, the GPU binding of a launch, and the Hugging Face model directory both ways.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "../support/errors.hpp"
#include "../support/fields.hpp"
#include "../support/files.hpp"
#include "../support/plans.hpp"
#include "../support/tfevents.hpp"
#include "seqpar/config/units.hpp"
#include "seqpar/io/safetensors.hpp"
#include "seqpar/train/any_trainer.hpp"
#include "seqpar/train/hf_model_dir.hpp"
#include "seqpar/train/launch.hpp"
#include "seqpar/train/metrics_log.hpp"
#include "seqpar/train/plan_trainers.hpp"
#include "seqpar/train/run.hpp"
#include "seqpar/train/run_folder.hpp"

using namespace seqpar;
using test::Small;

namespace run_test {

namespace fs = std::filesystem;
using Plans = PlanSet<PlanFamily<Degrees<1>, Degrees<1>>>;

using test::error_of;

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::vector<nlohmann::json> events(const fs::path& metrics, const std::string& kind) {
  std::vector<nlohmann::json> out;
  std::ifstream f(metrics);
  for (std::string line; std::getline(f, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["event"] == kind) out.push_back(j);
  }
  return out;
}

RunSpec resuming(const fs::path& out, bool resume = true) {
  return {.output_dir = out, .resume = resume};
}

std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    names.push_back(e.path().lexically_relative(dir).string() + " " +
                    (e.is_regular_file() ? std::to_string(fs::file_size(e.path())) : "/"));
  std::sort(names.begin(), names.end());
  return names;
}

TEST_CASE("the output lock names pid and host; a live run or another host's is never taken") {
  test::TempDir dir;
  const fs::path lock = dir / "run.lock";
  {
    OutputLock held(lock);
    CHECK(read_text(lock) == std::to_string(::getpid()) + " " + host_name() + "\n");
    const auto h = OutputLock::holder(lock);
    REQUIRE(h.has_value());
    CHECK(h->alive);
    CHECK(h->here);
    CHECK(error_of([&] { OutputLock again(lock); })
              .find("another run (pid " + std::to_string(::getpid()) + " on " + host_name() +
                    ") is using this output folder") != std::string::npos);
  }
  CHECK(!fs::exists(lock));  // released
  // A lock of a process of this host that is gone is taken over, saying so.
  dir.write("run.lock", "2147483647 " + host_name() + "\n");
  std::vector<std::string> notes;
  {
    OutputLock taken(lock, &notes);
    REQUIRE(notes.size() == 1);
    CHECK(notes[0].find("taking over the stale lock") != std::string::npos);
  }
  // A lock written before hosts were recorded is this host's: pid 1 always lives.
  dir.write("run.lock", "1\n");
  CHECK(error_of([&] { OutputLock again(lock); }).find("another run (pid 1) is using") !=
        std::string::npos);
  // Another node's lock: its process cannot be probed from here; never taken over, even for
  // a pid that does not exist here.
  dir.write("run.lock", "2147483647 node-b\n");
  const std::string other = error_of([&] { OutputLock again(lock); });
  CHECK(other.find("is held by pid 2147483647 on node-b, not this host (" + host_name() + ")") !=
        std::string::npos);
  CHECK(other.find("remove the lock once that run has ended") != std::string::npos);
  CHECK(read_text(lock) == "2147483647 node-b\n");
}

TEST_CASE("a run folder is looked at without a write; refusals leave it as it was") {
  test::TempDir dir;
  const fs::path out = dir / "out";
  // A fresh folder: nothing made until take().
  {
    RunFolder f(resuming(out, false));
    CHECK(!fs::exists(out));
    CHECK(!f.resume_from().has_value());
    f.take();
    CHECK(fs::exists(out / "seqpar.lock"));
  }
  CHECK(!fs::exists(out / "seqpar.lock"));
  // A resume with nothing to resume, and a fresh run over an earlier run's checkpoints.
  CHECK(error_of([&] {
          RunFolder{resuming(out)};
        }).find("no complete checkpoint step-N.safetensors to resume from") != std::string::npos);
  test::write_bytes(out / "step-3.safetensors", {});
  const auto before = [&] {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(out)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }();
  CHECK(error_of([&] { RunFolder{resuming(out, false)}; })
            .find("holds checkpoints of an earlier run (step-3.safetensors); RunSpec::resume "
                  "continues that run, RunSpec::overwrite_output_dir deletes them") !=
        std::string::npos);
  // step-3 does not open: a resume has nothing complete, and says why.
  CHECK(error_of([&] { RunFolder{resuming(out)}; }).find("step-3.safetensors") !=
        std::string::npos);
  std::vector<std::string> after;
  for (const auto& e : fs::directory_iterator(out)) after.push_back(e.path().filename());
  std::sort(after.begin(), after.end());
  CHECK(before == after);
  // With overwrite, take() removes them and the temporaries of our files only.
  test::write_bytes(out / ".step-8.safetensors.tmp.1a2b3c", {});
  test::write_bytes(out / ".model.safetensors.tmp.ff", {});
  test::write_bytes(out / ".run.json.tmp.9", {});
  test::write_bytes(out / ".notes.txt.tmp.1", {});
  test::write_bytes(out / "mine.json.tmp.keep", {});
  fs::create_directories(out / "cache");
  test::write_bytes(out / "cache" / ".train.tokens.safetensors.tmp.0f", {});
  RunFolder f({.output_dir = out,
               .overwrite_output_dir = true,
               .own_files = {"cache/*.tokens.safetensors"}});
  const auto notes = f.take();
  CHECK(notes.size() == 5);  // four temporaries, one checkpoint
  CHECK(!fs::exists(out / "step-3.safetensors"));
  CHECK(!fs::exists(out / ".step-8.safetensors.tmp.1a2b3c"));
  CHECK(!fs::exists(out / "cache" / ".train.tokens.safetensors.tmp.0f"));
  CHECK(fs::exists(out / ".notes.txt.tmp.1"));
  CHECK(fs::exists(out / "mine.json.tmp.keep"));
}

TEST_CASE("metrics after a resume hold each step once; the history of attempts stays") {
  test::TempDir dir;
  const MetricsLog log(dir / "metrics.jsonl");
  log.append({{"event", "start"}});
  for (int s = 1; s <= 5; ++s) log.append({{"event", "train"}, {"step", s}});
  log.append({{"event", "eval"}, {"step", 4}});
  log.append({{"event", "error"}, {"message", "killed"}});
  log.resume(3, {{"checkpoint", "step-3.safetensors"}});
  log.append({{"event", "train"}, {"step", 4}});
  std::vector<std::int64_t> steps;
  for (const auto& e : events(log.path(), "train")) steps.push_back(e["step"]);
  CHECK(steps == std::vector<std::int64_t>{1, 2, 3, 4});
  CHECK(events(log.path(), "eval").empty());
  CHECK(events(log.path(), "start").size() == 1);
  CHECK(events(log.path(), "error").size() == 1);
  const auto resumes = events(log.path(), "resume");
  REQUIRE(resumes.size() == 1);
  CHECK(resumes[0]["step"] == 3);
  CHECK(resumes[0]["checkpoint"] == "step-3.safetensors");
  CHECK(resumes[0].contains("time"));
  fs::create_directories(dir / "folder.jsonl");
  CHECK(error_of([&] {
          MetricsLog(dir / "folder.jsonl").append({{"event", "x"}});
        }).find("folder.jsonl: cannot be opened for appending metrics") != std::string::npos);
}

// The scalars of one event: tag -> value.
std::map<std::string, float> scalars_of(const test::ReadEvent& e) {
  return {e.values.begin(), e.values.end()};
}

TEST_CASE("metrics rows fan out to TensorBoard: the numbers of train and eval rows") {
  test::TempDir dir;
  const std::vector<Reporter> tensorboard{Reporter::tensorboard};
  MetricsLog(dir / "plain.jsonl", {}, dir / "runs").append({{"event", "train"}, {"step", 1}});
  CHECK(!fs::exists(dir / "runs"));  // no reporter asked for, no folder
  {
    const MetricsLog log(dir / "metrics.jsonl", tensorboard, dir / "runs");
    log.append({{"event", "start"}, {"world", 2}});
    log.append({{"event", "train"},
                {"step", 1},
                {"loss", 2.5},
                {"lr", 1e-3},
                {"skipped", false},
                {"note", "text"},
                {"list", {1, 2}},
                {"bytes_sent", {{"data", 4096}, {"tensor", 0}}}});
    log.append({{"event", "eval"},
                {"step", 1},
                {"split", "dev"},
                {"accuracy", 0.75},
                {"by_label", {{"地点", {{"f1", 0.5}}}}}});
    log.append({{"event", "train"}, {"step", 2}, {"loss", 2.0}, {"loss_scale", 1e300}});
    log.append({{"event", "end"}, {"step", 2}, {"seconds", 9.5}});
  }
  const auto first = test::tfevents_files(dir / "runs");
  REQUIRE(first.size() == 1);
  const auto r = test::read_tfevents(first[0]);
  REQUIRE(r.error.empty());
  REQUIRE(r.events.size() == 5);  // the version, the session start, three rows
  CHECK(r.events[0].file_version == std::optional<std::string>("brain.Event:2"));
  CHECK(r.events[1].session_status == std::optional<std::uint64_t>(1));
  CHECK(r.events[1].step == 1);
  using Scalars = std::map<std::string, float>;
  CHECK(scalars_of(r.events[2]) == Scalars{{"train/loss", 2.5f},
                                           {"train/lr", 1e-3f},
                                           {"train/bytes_sent/data", 4096.0f},
                                           {"train/bytes_sent/tensor", 0.0f}});
  CHECK(scalars_of(r.events[3]) ==
        Scalars{{"eval/accuracy", 0.75f}, {"eval/by_label/地点/f1", 0.5f}});
  // A number beyond float's range is an infinity.
  CHECK(
      scalars_of(r.events[4]) ==
      Scalars{{"train/loss", 2.0f}, {"train/loss_scale", std::numeric_limits<float>::infinity()}});
  // Each at its row's step and time, as metrics.jsonl has them.
  const auto trains = events(dir / "metrics.jsonl", "train");
  const auto evals = events(dir / "metrics.jsonl", "eval");
  REQUIRE(trains.size() == 2);
  REQUIRE(evals.size() == 1);
  for (const auto& [e, row] :
       {std::pair{&r.events[2], &trains[0]}, std::pair{&r.events[3], &evals[0]},
        std::pair{&r.events[4], &trains[1]}}) {
    CHECK(e->step == (*row)["step"].get<std::int64_t>());
    CHECK(e->wall_time == (*row)["time"].get<double>());
  }
  // A resumed attempt: a new file after the first, its session starting at its first step,
  // so that TensorBoard drops the first attempt's step 2.
  {
    const MetricsLog again(dir / "metrics.jsonl", tensorboard, dir / "runs");
    again.resume(1);
    again.append({{"event", "train"}, {"step", 2}, {"loss", 1.5}});
  }
  const auto both = test::tfevents_files(dir / "runs");
  REQUIRE(both.size() == 2);
  CHECK(both[0] == first[0]);
  const auto second = test::read_tfevents(both[1]);
  REQUIRE(second.error.empty());
  REQUIRE(second.events.size() == 3);
  CHECK(second.events[1].session_status == std::optional<std::uint64_t>(1));
  CHECK(second.events[1].step == 2);
  CHECK(second.events[2].step == 2);
  CHECK(scalars_of(second.events[2]) == Scalars{{"train/loss", 1.5f}});
}

TEST_CASE("a torn last metrics row is cut back to the last whole row, and the cut counted") {
  test::TempDir dir;
  const MetricsLog log(dir / "metrics.jsonl");
  CHECK(log.cut_torn_row() == 0);  // no file
  const std::string whole = "{\"event\":\"start\"}\n{\"event\":\"train\",\"step\":1}\n";
  // torn rows shorter and longer than the block the cut reads backwards
  for (const std::size_t pad : {std::size_t{3}, std::size_t{9000}}) {
    const std::string row = "{\"event\":\"train\",\"loss\":\"" + std::string(pad, 'x');
    const std::size_t torn = row.size();
    CAPTURE(torn);
    {
      std::ofstream f(log.path(), std::ios::trunc | std::ios::binary);
      f << whole << row;
    }
    CHECK(fs::file_size(log.path()) == whole.size() + torn);
    CHECK(log.cut_torn_row() == torn);
    CHECK(read_text(log.path()) == whole);
    CHECK(log.cut_torn_row() == 0);  // whole rows are left alone
  }
  const std::string alone = "{\"event\":";  // a file of one torn row
  {
    std::ofstream f(log.path(), std::ios::trunc | std::ios::binary);
    f << alone;
  }
  CHECK(log.cut_torn_row() == alone.size());
  CHECK(fs::file_size(log.path()) == 0);
}

// Replicated over two thread ranks, typed (Trainer<Small, Replicated<2>>) or erased
// (AnyTrainer); `stop_at` (> 0) asks rank 1 alone to stop there. Returns rank 0's losses and
// the run's result.
struct Trained {
  std::vector<double> losses;
  RunResult result;
  std::optional<Resumed> resumed;
};
template <class Make>
Trained train_with(Make make, RunSpec spec, std::int64_t stop_at) {
  Trained t;
  std::mutex m;
  spec.hooks.checkpoint_metadata = [] {
    return std::map<std::string, std::string>{{"my", "entry"}};
  };
  run_ranks(2, [&](ThreadComm& comm) {
    auto trainer = make(AnyComm(comm));
    TrainingRun run(trainer, AnyComm(comm), spec);
    std::vector<double> losses;
    while (run.running()) {
      const StepStats st = trainer.step(test::plan_batch(static_cast<int>(run.step())));
      losses.push_back(st.loss);
      if (comm.rank() == 1 && st.step == stop_at) run.request_stop(SIGINT);
      run.after_step(st);
    }
    RunResult r = run.finish();
    std::lock_guard lock(m);
    if (comm.rank() == 0) t = {losses, r, run.resumed()};
  });
  return t;
}
Trained train(RunSpec spec, bool typed = false, std::int64_t stop_at = 0) {
  if (typed)
    return train_with(
        [](AnyComm world) { return Trainer<Small, Replicated<2>>(world, test::plan_options()); },
        std::move(spec), stop_at);
  return train_with(
      [](AnyComm world) {
        return make_trainer<Small, Cpu, Precisions<Fp32>, Plans>({2, 1, 1, 0, false}, "fp32", world,
                                                                 test::plan_options());
      },
      std::move(spec), stop_at);
}

TEST_CASE("a run: rotated checkpoints, a resume that continues it, a stop, the weights") {
  test::TempDir dir;
  const fs::path out = dir / "out";
  const Trained straight = train({.output_dir = dir / "straight", .total_steps = 6});
  CHECK(straight.result.completed);
  CHECK(straight.result.weights == dir / "straight" / "model.safetensors");
  CHECK(fs::exists(dir / "straight" / "model.safetensors"));
  // Stopped after step 3 (stop_after) by the typed trainer, resumed by the erased one: the
  // losses of the uninterrupted run.
  const Trained first = train({.output_dir = out,
                               .total_steps = 6,
                               .save_steps = 2,
                               .stop_after = 3,
                               .report_to = {Reporter::tensorboard}},
                              true);
  CHECK(first.losses.size() == 3);
  CHECK(!first.result.completed);
  CHECK(!fs::exists(out / "model.safetensors"));
  CHECK(fs::exists(out / "step-2.safetensors"));
  CHECK(fs::exists(out / "step-3.safetensors"));
  const Trained second = train({.output_dir = out,
                                .total_steps = 6,
                                .save_steps = 2,
                                .save_total_limit = 2,
                                .resume = true,
                                .report_to = {Reporter::tensorboard}});
  REQUIRE(second.losses.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(first.losses[i] == straight.losses[i]);
    CHECK(second.losses[i] == straight.losses[3 + i]);
  }
  CHECK(second.result.completed);
  REQUIRE(second.resumed.has_value());
  CHECK(second.resumed->checkpoint == out / "step-3.safetensors");
  CHECK(second.resumed->metadata.at("my") == "entry");
  CHECK(second.resumed->changed.empty());
  CHECK(CheckpointDir{out}.steps() == std::vector<std::int64_t>{6, 4});  // rotated to 2
  std::vector<std::int64_t> steps;
  for (const auto& e : events(out / "metrics.jsonl", "train")) steps.push_back(e["step"]);
  CHECK(steps == std::vector<std::int64_t>{1, 2, 3, 4, 5, 6});
  // TensorBoard: an event file an attempt in out/runs, each attempt's losses at its steps.
  const auto attempts = test::tfevents_files(out / "runs");
  REQUIRE(attempts.size() == 2);
  for (std::size_t a = 0; a < 2; ++a) {
    const auto r = test::read_tfevents(attempts[a]);
    REQUIRE(r.error.empty());
    REQUIRE(r.events.size() == 5);  // the version, the session start, three steps
    CHECK(r.events[1].session_status == std::optional<std::uint64_t>(1));
    CHECK(r.events[1].step == static_cast<std::int64_t>(3 * a + 1));
    for (std::size_t i = 0; i < 3; ++i) {
      CHECK(r.events[2 + i].step == static_cast<std::int64_t>(3 * a + i + 1));
      CHECK(scalars_of(r.events[2 + i]).at("train/loss") ==
            static_cast<float>((a == 0 ? first : second).losses[i]));
    }
  }
  CHECK(test::tfevents_files(dir / "straight" / "runs").empty());  // report_to empty
  // A stop asked for by rank 1 alone: both ranks stop after step 2, with its checkpoint.
  const Trained stopped =
      train({.output_dir = dir / "stop", .total_steps = 6, .save_steps = 5}, true, 2);
  CHECK(stopped.losses.size() == 2);
  CHECK(stopped.result.stop.signal == SIGINT);
  CHECK(stopped.result.stop.rank == 1);
  CHECK(CheckpointDir{dir / "stop"}.steps() == std::vector<std::int64_t>{2});
  const auto interrupted = events(dir / "stop" / "metrics.jsonl", "interrupted");
  REQUIRE(interrupted.size() == 1);
  CHECK(interrupted[0]["step"] == 2);
  CHECK(interrupted[0]["signal"] == "SIGINT");
  CHECK(interrupted[0]["rank"] == 1);
  CHECK(interrupted[0]["checkpoint"] == (dir / "stop" / "step-2.safetensors").string());
  CHECK(events(out / "metrics.jsonl", "interrupted").empty());  // stop_after is no signal
  // Each rank's report: two ranks of this process, the bytes of the steps alone.
  const auto& reports = straight.result.ranks;
  REQUIRE(reports.size() == 2);
  CHECK(reports[1].rank == 1);
  CHECK(reports[0].pid == ::getpid());
  CHECK(reports[0].total_peak > 0);
  CHECK(reports[0].build_peak > 0);  // building the model is reported apart from the steps
  CHECK(reports[0].device == "cpu");
  CHECK(reports[0].bytes.steps == 6);
  // Replicated over D = 2: each unit's gradients all-reduced (its buffer padded to a
  // multiple of D: 2 (D - 1) ceil(padded / D) x 4 bytes sent), and the loss sum (one
  // double) all-reduced, every step; nothing of the checkpoints' gathers counted.
  std::uint64_t per_step = 2 * 1 * 8;
  for (const auto& u : bloom_units<Small>(1, 0)) per_step += 2 * 1 * ((u.numel + 1) / 2) * 4;
  CHECK(reports[0].bytes.sent[MeshAxis::data] == 6 * per_step);
  CHECK(reports[1].bytes.sent[MeshAxis::data] == 6 * per_step);
  CHECK(reports[0].bytes.sent[MeshAxis::tensor] == 0);
  const auto logged = events(dir / "straight" / "metrics.jsonl", "ranks");
  REQUIRE(logged.size() == 1);
  CHECK(logged[0]["ranks"][1]["bytes_sent"]["data"] == 6 * per_step);
  CHECK(events(dir / "straight" / "metrics.jsonl", "end").size() == 1);
  CHECK(events(dir / "straight" / "metrics.jsonl", "start")[0]["plan"] == "dp2");
}

TEST_CASE("a resume compares the checkpoint's keys with the run's, before anything is written") {
  const std::map<std::string, std::string> meta{{"data", "abc"}, {"lr", "0.1"}, {"seed", "5"}};
  const std::vector<RunKey> same{{"data", "abc", true}, {"lr", "0.1"}};
  bool order = false;
  CHECK(check_resume_keys("ck", meta, same, false, &order).empty());
  const std::vector<RunKey> other{{"data", "xyz", true}, {"lr", "0.2"}, {"batch", "8", true}};
  CHECK(error_of([&] { check_resume_keys("ck", meta, other, false, &order); }) ==
        "ck: this run differs from the one that wrote the checkpoint:\n"
        "  data: checkpoint 'abc', this run 'xyz'\n"
        "  lr: checkpoint '0.1', this run '0.2'\n"
        "  batch: checkpoint (not recorded), this run '8'\n"
        "resume with the same data and options, or set RunSpec::allow_changed to continue "
        "anyway");
  order = false;
  CHECK(check_resume_keys("ck", meta, other, true, &order).size() == 3);
  CHECK(order);
}

TEST_CASE("rank 0 decides, every rank follows; texts cross the world") {
  run_ranks(3, [](ThreadComm& comm) {
    AnyComm world(comm);
    std::string text = world.rank() == 2 ? "from rank two, longer than a word" : "";
    broadcast_text(world, text, 2);
    CHECK(text == "from rank two, longer than a word");
    const auto all =
        all_gather_text(world, std::string(static_cast<std::size_t>(world.rank()), 'x'));
    CHECK(all == std::vector<std::string>{"", "x", "xx"});
    CHECK(decide_on_writer(world, [] { return std::string("step-4.safetensors"); }) ==
          "step-4.safetensors");
    // A refusal by rank 0 is thrown on every rank alike.
    CHECK_THROWS_WITH_AS(
        decide_on_writer(world, []() -> std::string { throw Error("out: refused"); }),
        "out: refused", Error);
  });
}

TEST_CASE("GPUs of a launch: a GPU each, whether the launcher shows all or binds one") {
  // 2 nodes x 4 processes; each sees the node's 4 GPUs and takes the one of its local rank.
  std::vector<ProcessGpu> all;
  for (int r = 0; r < 8; ++r)
    all.push_back({r, r < 4 ? "a" : "b", 4, 4, "GPU-" + std::to_string(r % 4)});
  CHECK(gpu_binding_problem(all, "mpirun").empty());
  // Slurm's --gpus-per-task=1 (or --gpu-bind): each process sees one GPU, its own.
  std::vector<ProcessGpu> bound;
  for (int r = 0; r < 4; ++r) bound.push_back({r, "a", 4, 1, "GPU-" + std::to_string(r)});
  CHECK(gpu_binding_problem(bound, "srun").empty());
  // Four processes on a node of two GPUs: ranks 0 and 2 would share one.
  std::vector<ProcessGpu> two;
  for (int r = 0; r < 4; ++r) two.push_back({r, "a", 4, 2, "GPU-" + std::to_string(r % 2)});
  const std::string why = gpu_binding_problem(two, "mpirun");
  CHECK(why.find("ranks 0 and 2 would share GPU GPU-0 on node a (4 processes there, each seeing 2 "
                 "GPUs)") != std::string::npos);
  CHECK(why.find("have the launcher bind one GPU to each") != std::string::npos);
  two[3].visible_gpus = 0;
  CHECK(gpu_binding_problem(two, "srun").find("rank 3 (node a) sees no CUDA GPU") !=
        std::string::npos);
}

TEST_CASE("a Hugging Face model directory: written from a checkpoint, read and checked") {
  test::TempDir dir;
  run_ranks(1, [&](ThreadComm& comm) {
    AnyTrainer t = make_trainer<Small, Cpu, Precisions<Fp32>, Plans>(
        {1, 1, 1, 0, false}, "fp32", AnyComm(comm), test::plan_options());
    t.step(test::plan_batch(0));
    t.save_checkpoint(dir / "step-1.safetensors");
  });
  dir.write("tokenizer.json", "{}");
  HfSpecialTokens special;
  special.eos = {"</s>", 2};
  special.pad = {"<pad>", 3};
  GenerateOptions g;
  g.num_beams = 4;
  g.max_new_tokens = 32;
  write_hf_model_dir<Small>(dir / "hf", dir / "step-1.safetensors", dir / "tokenizer.json", special,
                            g, 128);
  const SafetensorsFile weights(dir / "hf" / "model.safetensors");
  CHECK(weights.find("transformer.ln_f.weight") != nullptr);
  for (const auto& e : weights.entries()) CHECK_MESSAGE(!e.name.starts_with("optimizer."), e.name);
  const auto config = nlohmann::json::parse(read_text(dir / "hf" / "config.json"));
  CHECK(config["n_layer"] == Small::layers);
  CHECK(config["eos_token_id"] == 2);
  CHECK(!config.contains("bos_token_id"));
  CHECK(nlohmann::json::parse(read_text(dir / "hf" / "generation_config.json"))["num_beams"] == 4);
  // Read back and checked against the model; another model's is refused, naming the fields.
  const HfModelDir hf = HfModelDir::open(dir / "hf");
  CHECK(hf.weights == dir / "hf" / "model.safetensors");
  CHECK(hf.tokenizer == dir / "hf" / "tokenizer.json");
  CHECK_NOTHROW(hf.check(Small::config, "small"));
  CHECK(error_of([&] { hf.check(SeqGPT560M::config, "seqgpt560m"); })
            .find("config.json: not the model seqgpt560m: vocab_size 200 (the model's 250880), "
                  "hidden_size 32 (the model's 1024)") != std::string::npos);
  fs::remove(dir / "hf" / "model.safetensors");
  dir.write("hf/model.safetensors.index.json", "{}");
  CHECK(error_of([&] { HfModelDir::open(dir / "hf"); }).find("the weights are sharded") !=
        std::string::npos);
  CHECK_THROWS_WITH_AS(HfModelDir::open(dir / "none"), doctest::Contains("none: no such folder"),
                       MissingFile);
  dir.write("plain", "x");
  CHECK(error_of([&] { HfModelDir::open(dir / "plain"); }).find("not a folder") !=
        std::string::npos);
}

// start(): every rank checks that the others run what it runs; a difference in the program's
// values, in the trainer's options or in the checkpoint resumed is refused on every rank,
// naming the ranks and the values.
bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_CASE("a run's ranks agree on what they run, or every rank refuses") {
  test::TempDir dir;
  const auto refusals = [&](auto differ) {
    std::vector<std::string> messages(2);
    run_ranks(2, [&](ThreadComm& comm) {
      TrainOptions o = test::plan_options();
      RunSpec spec{
          .output_dir = dir / "out", .total_steps = 1, .agreed = {{"data.sha256", "ab12"}}};
      differ(comm.rank(), o, spec);
      Trainer<Small, Replicated<2>> trainer(AnyComm(comm), o);
      try {
        TrainingRun run(trainer, AnyComm(comm), spec);
      } catch (const Error& e) {
        messages[static_cast<std::size_t>(comm.rank())] = e.what();
      }
    });
    CHECK(messages[0] == messages[1]);
    return messages[0];
  };
  CHECK(refusals([](int, TrainOptions&, RunSpec&) {}).empty());
  fs::remove_all(dir / "out");
  const std::string data = refusals([](int r, TrainOptions&, RunSpec& s) {
    if (r == 1) s.agreed[0].second = "cd34";
  });
  CHECK(contains(data, "ranks disagree on what must be equal on all 2 of them"));
  CHECK(contains(data, "data.sha256: rank 0 'ab12'; rank 1 'cd34'"));
  const std::string seed = refusals(
      [](int r, TrainOptions& o, RunSpec&) { o.seed = 7 + static_cast<std::uint64_t>(r); });
  CHECK(contains(seed, "options.seed: rank 0 '7'; rank 1 '8'"));
  CHECK(!contains(seed, "data.sha256"));
  // What decides which collectives run: the schedule of saves and stops.
  const std::string saves =
      refusals([](int r, TrainOptions&, RunSpec& s) { s.save_steps = 2 + r; });
  CHECK(contains(saves, "RunSpec::save_steps: rank 0 '2'; rank 1 '3'"));
  CHECK(!fs::exists(dir / "out"));  // refused before the folder was taken
  // Bad input is refused on every rank before anything is written, naming field and value.
  const std::string steps = refusals([](int, TrainOptions&, RunSpec& s) { s.total_steps = 0; });
  CHECK(steps == "RunSpec::total_steps is 0; expected at least one step");
  const std::string kept =
      refusals([](int r, TrainOptions&, RunSpec& s) { s.save_total_limit = r; });
  CHECK(kept == "rank 0: RunSpec::save_total_limit is 0; expected at least one checkpoint kept");
  const std::string missing = refusals([&](int, TrainOptions&, RunSpec& s) {
    s.resume = true;
    s.resume_from = dir / "nowhere" / "step-9.safetensors";
  });
  CHECK(contains(missing, "RunSpec::resume_from " + (dir / "nowhere").string()));
  CHECK(contains(missing, "does not exist"));
  dir.write("a_file", "abc");
  const std::string file =
      refusals([&](int, TrainOptions&, RunSpec& s) { s.output_dir = dir / "a_file"; });
  CHECK(contains(file, "RunSpec::output_dir " + (dir / "a_file").string() + " is a file"));
  CHECK(!fs::exists(dir / "out"));
  CHECK(fs::file_size(dir / "a_file") == 3);
}

TEST_CASE("a resume whose model or options differ is refused before a byte is written") {
  test::TempDir dir;
  const fs::path out = dir / "out";
  train({.output_dir = out, .total_steps = 4, .save_steps = 2, .stop_after = 2});
  const auto before = listing(out);
  const std::string metrics = read_text(out / "metrics.jsonl");
  // Another peak learning rate: a key of the run's own (options.schedule.peak).
  std::vector<std::string> messages(2);
  run_ranks(2, [&](ThreadComm& comm) {
    TrainOptions o = test::plan_options();
    o.schedule.peak *= 2;
    Trainer<Small, Replicated<2>> trainer(AnyComm(comm), o);
    try {
      TrainingRun run(trainer, AnyComm(comm),
                      {.output_dir = out, .total_steps = 4, .resume = true});
    } catch (const Error& e) {
      messages[static_cast<std::size_t>(comm.rank())] = e.what();
    }
  });
  CHECK(messages[0] == messages[1]);
  CHECK(contains(messages[0], "this run differs from the one that wrote the checkpoint"));
  CHECK(contains(messages[0], "options.schedule.peak: checkpoint '"));
  CHECK(contains(messages[0], "RunSpec::allow_changed"));
  CHECK(listing(out) == before);
  CHECK(read_text(out / "metrics.jsonl") == metrics);
  // Another model: refused the same way, naming it.
  using Other = Bloom<BloomConfig{.vocab_size = Small::vocab_size,
                                  .hidden = Small::hidden,
                                  .layers = Small::layers + 1,
                                  .heads = Small::heads}>;
  std::string model;
  run_ranks(1, [&](ThreadComm& comm) {
    Trainer<Other, Replicated<1>> trainer(AnyComm(comm), test::plan_options());
    model = error_of([&] {
      TrainingRun run(trainer, AnyComm(comm),
                      {.output_dir = out, .total_steps = 4, .resume = true});
    });
  });
  CHECK(contains(model, "model: checkpoint '"));
  CHECK(listing(out) == before);
  // ... and before it is built, from its shape alone (what a program checks first).
  const RunSpec resume{.output_dir = out, .total_steps = 4, .resume = true};
  const TrainerFacts other{
      Other::config, Other::parameter_count, {1, 1, 1, 0, false}, DeviceKind::cpu, "fp32"};
  ThreadComm one;
  CHECK(error_of([&] { refuse_run(one, resume, run_keys(other, test::plan_options(), resume)); }) ==
        model);
  const TrainerFacts same{
      Small::config, Small::parameter_count, {1, 1, 1, 0, false}, DeviceKind::cpu, "fp32"};
  CHECK(refuse_run(one, resume, run_keys(same, test::plan_options(), resume)) ==
        (out / "step-2.safetensors").string());
  CHECK(listing(out) == before);
  // Allowed: the run goes on, the change reported to the program and in the metrics.
  run_ranks(2, [&](ThreadComm& comm) {
    TrainOptions o = test::plan_options();
    o.schedule.peak *= 2;
    Trainer<Small, Replicated<2>> trainer(AnyComm(comm), o);
    TrainingRun run(trainer, AnyComm(comm),
                    {.output_dir = out, .total_steps = 4, .resume = true, .allow_changed = true});
    REQUIRE(run.resumed().has_value());
    CHECK(run.resumed()->changed.size() == 1);
    CHECK(contains(run.resumed()->changed[0], "options.schedule.peak"));
    CHECK(!run.resumed()->reorder);
    CHECK(run.step() == 2);
  });
  const auto resumes = events(out / "metrics.jsonl", "resume");
  REQUIRE(resumes.size() == 1);
  CHECK(resumes[0]["changed"].size() == 1);
}

TEST_CASE("every agreed RunSpec field reaches the ranks' agreement, by its name") {
  // Each changed alone changes its own value and no other (a field left out of
  // run_spec_fields stops the build); the program's keys and values are agreed one by one.
  const RunSpec s{.output_dir = "out",
                  .total_steps = 4,
                  .keys = {{"data.sha256", "ab12"}},
                  .agreed = {{"labels", "name"}}};
  CHECK(test::agreed_fields_missing(s, run_spec_fields, spec_values, "RunSpec::").empty());
  const auto v = spec_values(s);
  CHECK(std::count(v.begin(), v.end(),
                   std::pair<std::string, std::string>{"data.sha256", "ab12"}) == 1);
  CHECK(std::count(v.begin(), v.end(), std::pair<std::string, std::string>{"labels", "name"}) == 1);
}

TEST_CASE("every TrainOptions field is agreed on, and those that change results are keys") {
  const TrainOptions o;
  TrainerFacts f{
      Small::config, Small::parameter_count, {1, 1, 1, 0, false}, DeviceKind::cpu, "fp32"};
  const auto agreed = agreed_values(f, o);
  std::size_t fields = 0;
  visit_options(o, [&](std::string_view, const auto&, OptionRole) { ++fields; });
  CHECK(agreed.size() == 4 + fields);
  const auto keys = trainer_keys(f, o);
  const auto has = [&](const std::string& k) {
    return std::any_of(keys.begin(), keys.end(), [&](const RunKey& x) { return x.key == k; });
  };
  CHECK(has("model"));
  CHECK(has("options.schedule.peak"));
  CHECK(has("options.seed"));
  CHECK(!has("options.micro_batch_rows"));  // a layout may change on resume
  CHECK(!has("options.offload"));
}

}  // namespace run_test

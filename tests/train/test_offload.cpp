// Offload (TrainOptions::offload): the optimizer state, and for ZeRO-3 the parameter
// shards, in host memory give every rank the bits of the run without offload (losses,
// gradient norms, evaluations, logits, final weights), under every data-axis policy and
// with tensor and pipeline axes beside it, with gradient accumulation, loss scaling and
// clipping, over communicators that defer their collectives; each unit's gradients start
// down to the host during the backward, before the next unit's backward (a log of the
// model's hooks shows it); the arena shows where the bytes went; and an offloaded run
// resumes from its checkpoint as if it had never stopped. 16-bit models too (bf16, fp16).
#include <doctest/doctest.h>

#include <unistd.h>
#include <filesystem>

#include "../support/files.hpp"
#include "../support/plans.hpp"

using namespace seqpar;
using test::Small;

namespace {

TrainOptions with_offload(Offload off) {
  auto o = test::plan_options();
  o.offload = off;
  return o;
}

template <class Plan, class Prec = Fp32>
void check_same_bits(Offload off, TrainOptions base = test::plan_options()) {
  constexpr int n = PlanTraits<Plan>::world_size;
  base.offload = Offload::none;
  const auto plain = test::run_plan_threads<Plan, Prec>(n, 3, base);
  base.offload = off;
  const auto offloaded = test::run_plan_threads<Plan, Prec>(n, 3, base);
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    const auto i = static_cast<std::size_t>(r);
    CHECK(offloaded[i].losses == plain[i].losses);
    CHECK(offloaded[i].norms == plain[i].norms);
    CHECK(offloaded[i].evals == plain[i].evals);
    CHECK(offloaded[i].logits == plain[i].logits);
    CHECK(offloaded[i].weights == plain[i].weights);
  }
}

// This rank's optimizer range of every unit it holds, in elements: the padded unit, or
// one shard of it under ZeRO.
template <class TrainerT>
std::int64_t range_elements(TrainerT& t, int zero_stage, int data_degree) {
  std::int64_t n = 0;
  for (std::size_t u = 0; u < t.model().units().size(); ++u)
    if (t.model().holds(u)) n += t.model().padded_numel(u) / (zero_stage > 0 ? data_degree : 1);
  return n;
}

// The model's hooks of a trainer, logged and passed on to its data axis: for each use that
// writes gradients (a unit's backward) and each unit whose gradients are complete, the
// downloads the data axis had started by then.
template <class TrainerT>
struct HookLog final : UnitHooks {
  struct Entry {
    bool backward;  // a backward's acquire, else a grads_ready
    std::size_t unit;
    std::int64_t downloads;
  };
  explicit HookLog(TrainerT& t) : trainer(&t) { t.model().set_hooks(this); }
  ~HookLog() override { trainer->model().set_hooks(&trainer->data_axis()); }
  void acquire(std::size_t u, UnitUse use) override {
    if (writes_grads(use)) log.push_back({true, u, trainer->data_axis().downloads_started()});
    trainer->data_axis().acquire(u, use);
  }
  void release(std::size_t u) override { trainer->data_axis().release(u); }
  void grads_ready(std::size_t u) override {
    trainer->data_axis().grads_ready(u);
    log.push_back({false, u, trainer->data_axis().downloads_started()});
  }
  TrainerT* trainer;
  std::vector<Entry> log;
};

// One offloaded step of 4 micro-batches a rank, its hooks logged: in the first three no
// download starts; in the last, each unit's download has started before the backward of
// the next unit begins (behind `lag` units on a communicator that runs its collectives
// only when joined: the data axis joins a reduction at the next unit's), and every
// held unit's has started by the optimizer step.
template <class Plan, class MakeComm>
void check_downloads_interleave(MakeComm make, std::int64_t lag) {
  constexpr int n = PlanTraits<Plan>::world_size;
  std::mutex m;
  run_ranks(n, [&](ThreadComm& world) {
    auto comm = make(world);
    auto o = with_offload(Offload::optimizer);
    o.micro_batch_rows = 1;
    using TrainerT = Trainer<Small, Plan>;
    TrainerT t(comm, o);
    t.step(test::plan_batch(0));
    const std::int64_t before = t.data_axis().downloads_started();
    std::vector<typename HookLog<TrainerT>::Entry> log;
    {
      HookLog<TrainerT> hooks(t);
      t.step(test::plan_batch(1));
      log = hooks.log;
    }
    std::int64_t held = 0;
    for (std::size_t u = 0; u < t.model().units().size(); ++u) held += t.model().holds(u);
    std::lock_guard lock(m);
    CAPTURE(world.rank());
    // the backward uses of the last micro-batch: the log's last `held + 1` backward entries
    // (the head's use of the tied table, then every unit's own backward)
    std::vector<std::size_t> backward_at;
    for (std::size_t i = 0; i < log.size(); ++i)
      if (log[i].backward) backward_at.push_back(i);
    REQUIRE(backward_at.size() == 4 * static_cast<std::size_t>(held + 1));
    const std::size_t last_begin =
        backward_at[backward_at.size() - static_cast<std::size_t>(held) - 1];
    for (std::size_t i = 0; i < last_begin; ++i) CHECK(log[i].downloads == before);
    std::int64_t ready = 0;  // units complete in the last micro-batch so far
    for (std::size_t i = last_begin; i < log.size(); ++i) {
      CAPTURE(i);
      CAPTURE(log[i].unit);
      if (!log[i].backward) {
        ++ready;
        continue;
      }
      CHECK(log[i].downloads - before == std::max<std::int64_t>(0, ready - lag));
    }
    CHECK(ready == held);
    CHECK(t.data_axis().downloads_started() - before == held);
  });
}

}  // namespace

TEST_CASE_TEMPLATE_DEFINE("offloading the optimizer changes no bit", Plan, offload_plans) {
  check_same_bits<Plan>(Offload::optimizer);
}
TEST_CASE_TEMPLATE_INVOKE(offload_plans, Replicated<2>, Sharded<Zero1, 2>, Sharded<Zero2, 2>,
                          Sharded<Zero3, 2>, Hybrid<TP2, Sharded<Zero3, 2>>,
                          Hybrid<PP2, Sharded<Zero2, 2>>);

TEST_CASE_TEMPLATE(
    "offloading changes no bit with 4 micro-batches a rank, a static loss scale and clipping "
    "(the gradients scaled on the host)",
    Plan, Replicated<2>, Sharded<Zero1, 2>, Sharded<Zero2, 2>, Sharded<Zero3, 2>,
    Hybrid<PP2, Replicated<2>>) {
  auto o = test::plan_options();
  o.micro_batch_rows = 1;
  o.max_grad_norm = 0.05;  // every step clips
  o.loss_scale.enabled = true;
  o.loss_scale.loss_scale = 1024;
  check_same_bits<Plan>(Offload::optimizer, o);
}

TEST_CASE_TEMPLATE(
    "offloaded over communicators whose collectives run when joined: the downloads follow "
    "each reduction's join and change no bit",
    Plan, Replicated<2>, Sharded<Zero1, 2>, Sharded<Zero2, 2>) {
  using Deferred = test::DeferredComm<ThreadComm>;
  const auto o = with_offload(Offload::optimizer);
  const auto plain = test::run_plan_threads<Plan>(2, 3, o);
  const auto deferred = test::run_plan_over<Plan>(
      2, 3, o, [](ThreadComm& c) { return Deferred(c); }, [](int, Deferred&) {});
  for (std::size_t i = 0; i < 2; ++i) CHECK(deferred[i] == plain[i]);
}

TEST_CASE_TEMPLATE(
    "each unit's gradients start down to the host before the next unit's backward, in the "
    "last micro-batch only",
    Plan, Replicated<2>, Sharded<Zero1, 2>, Sharded<Zero2, 2>, Sharded<Zero3, 2>) {
  check_downloads_interleave<Plan>([](ThreadComm& c) { return c; }, 0);
}

TEST_CASE_TEMPLATE(
    "over a communicator that runs collectives when joined, a unit's download starts at the "
    "next unit's reduction",
    Plan, Replicated<2>, Sharded<Zero1, 2>, Sharded<Zero2, 2>) {
  check_downloads_interleave<Plan>([](ThreadComm& c) { return test::DeferredComm<ThreadComm>(c); },
                                   1);
}

TEST_CASE_TEMPLATE("offloading ZeRO-3's parameters too changes no bit", Plan, Sharded<Zero3, 2>,
                   Hybrid<TP2, Sharded<Zero3, 2>>) {
  check_same_bits<Plan>(Offload::optimizer_and_params);
}

// A 16-bit model's gradients come down and its weights go up at 2 bytes, widened and
// narrowed on the host as the device converts (optim/host_convert.hpp): on Cpu the bits of
// the device's own mixed AdamW. bf16 with the parameters offloaded too; fp16 with its
// dynamic loss scale (its factor divided out in the host AdamW) and 4 micro-batches.
TEST_CASE("offloading a 16-bit model changes no bit: bf16 and fp16, ZeRO-3 over 2 ranks") {
  SUBCASE("bf16, optimizer") { check_same_bits<Sharded<Zero3, 2>, Bf16Mixed>(Offload::optimizer); }
  SUBCASE("bf16, optimizer and parameters") {
    check_same_bits<Sharded<Zero3, 2>, Bf16Mixed>(Offload::optimizer_and_params);
  }
  SUBCASE("fp16, optimizer, loss scaled, 4 micro-batches") {
    auto o = test::plan_options();
    o.micro_batch_rows = 1;
    check_same_bits<Sharded<Zero3, 2>, Fp16Mixed>(Offload::optimizer, o);
  }
}

TEST_CASE(
    "offloaded ZeRO-3 over communicators whose collectives run when joined: the gathers "
    "ahead upload their shards and change no bit") {
  using Deferred = test::DeferredComm<ThreadComm>;
  auto o = with_offload(Offload::optimizer_and_params);
  o.micro_batch_rows = 2;
  const auto plain = test::run_plan_threads<Sharded<Zero3, 2>>(2, 3, o);
  const auto deferred = test::run_plan_over<Sharded<Zero3, 2>>(
      2, 3, o, [](ThreadComm& c) { return Deferred(c); }, [](int, Deferred&) {});
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(deferred[i] == plain[i]);
    CHECK(deferred[i].data_gathers == plain[i].data_gathers);
  }
}

TEST_CASE_TEMPLATE(
    "the arena: no optimizer state on the device, 12 bytes a parameter of the "
    "range on the host (fp32 master, m, v)",
    Plan, Replicated<2>, Sharded<Zero2, 2>, Sharded<Zero3, 2>) {
  constexpr int n = PlanTraits<Plan>::world_size, zero = PlanTraits<Plan>::zero_stage;
  std::mutex m;
  run_ranks(n, [&](ThreadComm& comm) {
    Trainer<Small, Plan> plain(comm, with_offload(Offload::none));
    Trainer<Small, Plan> off(comm, with_offload(Offload::optimizer));
    plain.step(test::plan_batch(0));
    off.step(test::plan_batch(0));
    const auto range = range_elements(off, zero, n);
    const auto a = plain.memory(), b = off.memory();
    std::lock_guard lock(m);
    CHECK(a.current_of(Memory::optimizer) ==
          8 * range);  // fp32: m and v; the weights are the master
    CHECK(a.current_of(Memory::host_optimizer) == 0);
    CHECK(b.current_of(Memory::optimizer) == 0);
    CHECK(b.peak_of(Memory::optimizer) == 0);
    CHECK(b.current_of(Memory::host_optimizer) == 12 * range);
    // During the update a unit's gradients are on the host too, one unit at a time.
    CHECK(b.peak_of(Memory::host_optimizer) > 12 * range);
    CHECK(b.current_of(Memory::parameters) == a.current_of(Memory::parameters));
    CHECK(b.current_of(Memory::gradients) == a.current_of(Memory::gradients));
  });
}

TEST_CASE(
    "ZeRO-3 with its parameters offloaded: no parameter shard on the device, and no more "
    "device buffers than the units in flight and one uploaded shard") {
  std::mutex m;
  run_ranks(2, [&](ThreadComm& comm) {
    Trainer<Small, Sharded<Zero3, 2>> dev(comm, with_offload(Offload::none));
    Trainer<Small, Sharded<Zero3, 2>> off(comm, with_offload(Offload::optimizer_and_params));
    dev.step(test::plan_batch(0));
    off.step(test::plan_batch(0));
    std::int64_t shard = 0, largest = 0;
    for (std::size_t u = 0; u < off.model().units().size(); ++u) {
      shard += off.model().padded_numel(u) / 2;
      largest = std::max(largest, off.model().padded_numel(u) / 2);
    }
    const auto a = dev.memory(), b = off.memory();
    std::lock_guard lock(m);
    CHECK(a.current_of(Memory::parameters) == 4 * shard);
    CHECK(b.current_of(Memory::parameters) == 0);
    CHECK(b.peak_of(Memory::parameters) == 0);
    CHECK(b.current_of(Memory::host_parameters) == 4 * shard);
    CHECK(b.current_of(Memory::host_optimizer) == 12 * shard);
    // The gathered units are the same; an uploaded shard lives only while its gather runs.
    CHECK(b.peak_of(Memory::buffers) <= a.peak_of(Memory::buffers) + 4 * largest);
    // One arena counts both here: beyond the run without offload, the master weights (4
    // bytes a parameter of the shard) and, through the step, the shard's gradients on
    // their way to the host (4 more).
    CHECK(b.total_peak < a.total_peak + 8 * shard + 4 * largest);
  });
}

TEST_CASE("parameter offload is refused where parameters are not sharded, naming the policy") {
  CHECK_THROWS_WITH_AS(
      run_ranks(2,
                [](ThreadComm& c) {
                  Trainer<Small, Sharded<Zero2, 2>> t(c,
                                                      with_offload(Offload::optimizer_and_params));
                }),
      doctest::Contains("Offload::optimizer_and_params offloads parameter shards, which only "
                        "Sharded<Zero3, N> keeps"),
      Error);
  CHECK(parse_offload("optimizer+params") == Offload::optimizer_and_params);
  CHECK_THROWS_WITH_AS(parse_offload("cpu", "--offload"),
                       doctest::Contains("--offload: 'cpu' is not an offload"), Error);
}

TEST_CASE(
    "an offloaded run resumes from its checkpoint bit for bit; the file resumes without "
    "offload and under another plan too") {
  constexpr int kSteps = test::kPlanSteps, kSplit = 2;
  using Z3 = Sharded<Zero3, 2>;
  const auto o = with_offload(Offload::optimizer_and_params);
  const auto whole = test::run_plan_threads<Z3>(2, kSteps, o);
  const auto path = test::temp_path("offload_resume.safetensors");
  run_ranks(2, [&](ThreadComm& comm) {
    Trainer<Small, Z3> t(comm, o);
    for (int s = 0; s < kSplit; ++s) t.step(test::plan_batch(s));
    t.save_checkpoint(path, {});
  });
  std::mutex m;
  run_ranks(2, [&](ThreadComm& comm) {
    auto resumed_o = o;
    resumed_o.seed = 777;  // the checkpoint, not the seed, decides the state
    Trainer<Small, Z3> t(comm, resumed_o);
    t.load_checkpoint(path);
    std::vector<double> losses;
    for (int s = kSplit; s < kSteps; ++s) losses.push_back(t.step(test::plan_batch(s)).loss);
    std::map<std::string, std::vector<float>> weights;
    t.for_each_param(
        [&](const ParamSpec& p, float* v, float*) { weights[p.name].assign(v, v + p.numel()); });
    std::lock_guard lock(m);
    const auto& want = whole[static_cast<std::size_t>(comm.rank())];
    for (int s = kSplit; s < kSteps; ++s) CHECK(losses[s - kSplit] == want.losses[s]);
    CHECK(weights == want.weights);
  });
  // The same file without offload, under Replicated<2>: Replicated<1>'s run within the
  // tolerance of any change of plan.
  const auto& ref = test::reference();
  run_ranks(2, [&](ThreadComm& comm) {
    Trainer<Small, Replicated<2>> t(comm, test::plan_options());
    t.load_checkpoint(path);
    std::vector<double> losses;
    for (int s = kSplit; s < kSteps; ++s) losses.push_back(t.step(test::plan_batch(s)).loss);
    const double werr = test::max_weight_error(t, ref);
    std::lock_guard lock(m);
    for (int s = kSplit; s < kSteps; ++s)
      CHECK(losses[s - kSplit] == doctest::Approx(ref.losses[s]).epsilon(1e-5));
    CHECK(werr < 1e-4);
  });
  std::filesystem::remove(path);
}

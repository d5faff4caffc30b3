#pragma once
// Running a plan on N ThreadComm ranks and comparing it with Replicated<1>, or with itself
// over communicators whose async collectives run only when joined.

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "deferred_comm.hpp"
#include "golden.hpp"
#include "seqpar/backend/cpu/ops.hpp"
#include "seqpar/comm/thread_comm.hpp"
#include "seqpar/core/rng.hpp"
#include "seqpar/train/trainer.hpp"
#include "weights.hpp"

namespace seqpar::test {

using Small = Bloom<BloomConfig{.vocab_size = 200, .hidden = 32, .layers = 4, .heads = 4}>;

/// Global batch `step` of a fixed sequence (`stream` names it): `rows` rows of 12 tokens,
/// some left padding and ignored labels (so ranks see different numbers of targets).
inline Batch plan_batch(int step, std::int64_t rows = 8, std::string_view stream = "plan-batch") {
  Batch b(rows, 12);
  const CounterRng rng(static_cast<std::uint64_t>(step), stream);
  for (std::size_t i = 0; i < b.input_ids.size(); ++i) {
    b.input_ids[i] = static_cast<std::int32_t>(4 + rng.bits(i) % 196);
    b.labels[i] = rng.bits(i, 1) % 7 == 0 ? ignore_index : b.input_ids[i];
  }
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t t = 0; t < r % 4; ++t) {
      const auto i = static_cast<std::size_t>(r * 12 + t);
      b.attention_mask[i] = 0;
      b.labels[i] = ignore_index;
      b.input_ids[i] = 3;
    }
  return b;
}

inline TrainOptions plan_options() {
  TrainOptions o;
  o.schedule.peak = 3e-3;
  o.weight_decay = 0.1;
  o.schedule.warmup = 2;
  o.schedule.total = 10;
  o.max_grad_norm = 0.5;  // active: the norm starts near 2
  o.micro_batch_rows = 2;
  o.seed = 5;
  return o;
}

/// Losses of each step and the final full weights by name.
struct RunResult {
  std::vector<double> losses, norms;
  std::map<std::string, std::vector<float>> weights;
};

inline RunResult reference_run(int steps) {
  Trainer<Small, Replicated<1>> t(plan_options());
  RunResult r;
  for (int s = 0; s < steps; ++s) {
    const auto st = t.step(plan_batch(s));
    r.losses.push_back(st.loss);
    r.norms.push_back(st.grad_norm);
  }
  r.weights = weights_by_name(t);
  return r;
}

/// A rank's weights against the same blocks of the full reference, as relative L2 errors:
/// of the worst tensor, of the worst matrix, and of all the rank's tensors together.
struct WeightError {
  double worst_tensor = 0, worst_matrix = 0, all = 0;
};
template <class TrainerT>
WeightError weight_error(TrainerT& t, const RunResult& ref) {
  WeightError e;
  double num = 0, den = 0;
  t.for_each_param([&](const ParamSpec& p, auto* v, auto*) {
    const auto& full = ref.weights.at(p.name);
    std::vector<float> want(static_cast<std::size_t>(p.numel())), got(v, v + p.numel());
    for (std::int64_t r = 0; r < p.local_rows; ++r)
      for (std::int64_t c = 0; c < p.local_cols; ++c) {
        const std::int64_t fr = p.row0 + r, fc = p.col0 + c;
        want[static_cast<std::size_t>(r * p.local_cols + c)] =
            fr < static_cast<std::int64_t>(full.size() / static_cast<std::size_t>(p.cols))
                ? full[static_cast<std::size_t>(fr * p.cols + fc)]
                : 0.0f;
      }
    const double err = rel_norm_err(got, want);
    e.worst_tensor = std::max(e.worst_tensor, err);
    if (!p.vector) e.worst_matrix = std::max(e.worst_matrix, err);
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double d = static_cast<double>(got[i]) - static_cast<double>(want[i]);
      num += d * d;
      den += static_cast<double>(want[i]) * static_cast<double>(want[i]);
    }
  });
  e.all = std::sqrt(num / std::max(den, 1e-300));
  return e;
}
/// The worst tensor's error (weight_error).
template <class TrainerT>
double max_weight_error(TrainerT& t, const RunResult& ref) {
  return weight_error(t, ref).worst_tensor;
}

/// Runs `steps` steps of plan Plan in precision Prec on n ThreadComm ranks; fn(rank,
/// trainer, losses, norms) checks.
template <class Plan, class Prec = Fp32, class Check>
void run_plan(int n, int steps, Check&& check) {
  run_ranks(n, [&](ThreadComm& comm) {
    Trainer<Small, Plan, Cpu, Prec> t(comm, plan_options());
    std::vector<double> losses, norms;
    for (int s = 0; s < steps; ++s) {
      const auto st = t.step(plan_batch(s));
      losses.push_back(st.loss);
      norms.push_back(st.grad_norm);
    }
    check(comm.rank(), t, losses, norms);
  });
}

/// One rank's losses, gradient norms, evaluation losses, final logits and local weights
/// (16-bit ones widened: exactly), and the all-gathers its data axis made.
struct RankRun {
  std::vector<double> losses, norms, evals;
  std::vector<float> logits;
  std::map<std::string, std::vector<float>> weights;
  std::int64_t data_gathers = 0;
  bool operator==(const RankRun&) const = default;
};

/// Runs `steps` steps of Plan in precision Prec with options o on n ThreadComm ranks, each
/// trainer over comm_of(rank's ThreadComm), with an evaluation after each step; then the
/// logits of batch 0 and the weights are read, and after(rank, communicator) runs.
template <class Plan, class Prec = Fp32, class CommOf, class After>
std::vector<RankRun> run_plan_over(int n, int steps, const TrainOptions& o, CommOf&& comm_of,
                                   After&& after) {
  std::vector<RankRun> runs(static_cast<std::size_t>(n));
  run_ranks(n, [&](ThreadComm& thread_comm) {
    auto comm = comm_of(thread_comm);
    Trainer<Small, Plan, Cpu, Prec> t(comm, o);
    RankRun& r = runs[static_cast<std::size_t>(thread_comm.rank())];
    for (int s = 0; s < steps; ++s) {
      const auto st = t.step(plan_batch(s));
      r.losses.push_back(st.loss);
      r.norms.push_back(st.grad_norm);
      r.evals.push_back(t.evaluate(plan_batch(100 + s)));
    }
    const auto logits = t.logits(plan_batch(0));
    r.logits.assign(logits.begin(), logits.end());
    r.data_gathers = static_cast<std::int64_t>(t.data_stats()[CollectiveKind::all_gather].calls);
    t.for_each_param(
        [&](const ParamSpec& p, auto* v, auto*) { r.weights[p.name].assign(v, v + p.numel()); });
    after(thread_comm.rank(), comm);
  });
  return runs;
}

/// The five-step Replicated<1> run every plan is compared with (computed once).
inline constexpr int kPlanSteps = 5;
inline const RunResult& reference() {
  static const RunResult r = reference_run(kPlanSteps);
  return r;
}

/// How far a plan's run in precision Prec may be from the fp32 Replicated<1> run after
/// kPlanSteps AdamW steps, relative. Fp32: sums in another order (per rank, then across
/// ranks); per tensor, since AdamW's m / sqrt(v) turns rounding noise into full steps where
/// a gradient is zero in exact arithmetic (the key bias: softmax ignores a per-row constant).
/// 16-bit storage: the bf16 bounds of the GPU backend's checks (||out - ref|| / ||ref|| at
/// most 1e-2) on the weights, every matrix and all of a rank's tensors together (the small
/// bias and layernorm vectors alone differ by up to 15 %: the same noise, now bf16's, in
/// their steps); the loss, a mean over all tokens, within 1e-3.
template <class Prec>
struct PlanTolerance {
  static constexpr bool fp32 = Prec::dtype == DType::f32;
  static constexpr double loss = fp32 ? 1e-5 : 1e-3, norm = fp32 ? 1e-5 : 1e-2;
  static void check_weights(const WeightError& e) {
    if constexpr (fp32) {
      CHECK(e.worst_tensor < 1e-4);
    } else {
      CHECK(e.worst_matrix < 1e-2);
      CHECK(e.all < 1e-2);
    }
  }
};

/// Runs Plan in precision Prec on n ranks and checks every rank's losses, gradient norms
/// and final weights against the fp32 Replicated<1> run, within PlanTolerance<Prec>.
template <class Plan, class Prec = Fp32>
void check_equivalent(int n) {
  using Tol = PlanTolerance<Prec>;
  const auto& ref = reference();
  std::mutex m;
  run_plan<Plan, Prec>(
      n, kPlanSteps,
      [&](int rank, auto& t, const std::vector<double>& losses, const std::vector<double>& norms) {
        const WeightError werr = weight_error(t, ref);
        std::lock_guard lock(m);
        CAPTURE(rank);
        CAPTURE(n);
        for (int s = 0; s < kPlanSteps; ++s) {
          CHECK(losses[static_cast<std::size_t>(s)] ==
                doctest::Approx(ref.losses[static_cast<std::size_t>(s)]).epsilon(Tol::loss));
          CHECK(norms[static_cast<std::size_t>(s)] ==
                doctest::Approx(ref.norms[static_cast<std::size_t>(s)]).epsilon(Tol::norm));
        }
        Tol::check_weights(werr);
      });
}

/// run_plan_over on plain ThreadComm ranks.
template <class Plan, class Prec = Fp32>
std::vector<RankRun> run_plan_threads(int n, int steps, const TrainOptions& o) {
  return run_plan_over<Plan, Prec>(
      n, steps, o, [](ThreadComm& c) { return c; }, [](int, ThreadComm&) {});
}

/// Runs Plan for three steps of two micro-batches per rank over ThreadComm ranks and over
/// DeferredComm ranks (async collectives run only when joined, as on NCCL's stream): every
/// rank's losses, gradient norms, evaluations, logits and final weights must agree bit for
/// bit (the same sums in the same order). Returns the async calls the ranks made.
template <class Plan>
typename DeferredComm<ThreadComm>::Counts check_over_deferred_comm() {
  using Deferred = DeferredComm<ThreadComm>;
  const int n = PlanTraits<Plan>::world_size;
  auto o = plan_options();
  o.micro_batch_rows = 8 / (2 * PlanTraits<Plan>::data_degree);
  const auto plain = run_plan_threads<Plan>(n, 3, o);
  std::vector<typename Deferred::Counts> counts(static_cast<std::size_t>(n));
  const auto deferred = run_plan_over<Plan>(
      n, 3, o, [](ThreadComm& c) { return Deferred(c); },
      [&](int rank, Deferred& c) { counts[static_cast<std::size_t>(rank)] = c.counts(); });
  typename Deferred::Counts total;
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    const auto i = static_cast<std::size_t>(r);
    CHECK(deferred[i].losses == plain[i].losses);
    CHECK(deferred[i].norms == plain[i].norms);
    CHECK(deferred[i].evals == plain[i].evals);
    CHECK(deferred[i].logits == plain[i].logits);
    CHECK(deferred[i].weights == plain[i].weights);
    // Every gather made ahead was used: it took the place of one made when needed.
    CHECK(deferred[i].data_gathers == plain[i].data_gathers);
    total.all_reduce += counts[i].all_reduce;
    total.reduce_scatter += counts[i].reduce_scatter;
    total.all_gather += counts[i].all_gather;
  }
  return total;
}

}  // namespace seqpar::test

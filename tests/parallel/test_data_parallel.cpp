// Every data-parallel variant gives the losses and final weights of Replicated<1> on the
// same global batches, in fp32 and in bf16 (Bf16Mixed, against the fp32 run); per-rank
// memory and bytes moved match the ZeRO and ring figures.
#include <doctest/doctest.h>

#include <chrono>

#include "../comm/comm_test_util.hpp"
#include "../support/plans.hpp"

using namespace seqpar;
using test::DeferredComm;
using test::Small;

using test::check_equivalent;

TEST_CASE_TEMPLATE_DEFINE("data-parallel plan equals Replicated<1>", Plan, data_parallel_plans) {
  check_equivalent<Plan>(PlanTraits<Plan>::world_size);
}
TEST_CASE_TEMPLATE_INVOKE(data_parallel_plans, Replicated<2>, Replicated<4>, Replicated<8>,
                          Sharded<Zero1, 2>, Sharded<Zero1, 4>, Sharded<Zero1, 8>,
                          Sharded<Zero2, 2>, Sharded<Zero2, 4>, Sharded<Zero2, 8>,
                          Sharded<Zero3, 2>, Sharded<Zero3, 4>, Sharded<Zero3, 8>);

// The same plans in bf16: one trainer per data policy, its dynamic degree taking 2, 4 and
// 8 ranks (the steps of Replicated<2>, <4> and <8>, ...: one instantiation, not three).
TEST_CASE_TEMPLATE("data-parallel plans in bf16 equal the fp32 Replicated<1> within bf16's bounds",
                   Plan, Replicated<>, Sharded<Zero1>, Sharded<Zero2>, Sharded<Zero3>) {
  for (int n : {2, 4, 8}) check_equivalent<Plan, Bf16Mixed>(n);
}

// ZeRO-2/3 keep a unit's reduction in flight, and ZeRO-3 gathers the next unit ahead,
// only where the async collectives really run behind the caller: here they run when joined.
TEST_CASE_TEMPLATE(
    "data-parallel plans whose async collectives run only when joined match ThreadComm exactly",
    Plan, Replicated<2>, Sharded<Zero1, 2>, Sharded<Zero2, 4>, Sharded<Zero3, 4>) {
  DeferredComm<ThreadComm>::Counts calls;
  // A rank-dependent order of collectives would hang: past the limit the program stops.
  comm_test::timed_within(std::chrono::seconds(120),
                          [&] { calls = test::check_over_deferred_comm<Plan>(); });
  constexpr int zero = PlanTraits<Plan>::zero_stage;
  CHECK((calls.all_reduce > 0) == (zero == 0));
  CHECK((calls.reduce_scatter > 0) == (zero > 0));
  CHECK((calls.all_gather > 0) == (zero == 3));
}

TEST_CASE("a dynamic degree takes the communicator's size") {
  static_assert(Trainer<Small, Sharded<Zero3>>::world_size == 0);
  check_equivalent<Sharded<Zero3>>(4);
  check_equivalent<Replicated<>>(2);
}

TEST_CASE("a static degree that differs from the communicator is a clear error") {
  CHECK_THROWS_WITH_AS(
      run_ranks(2, [](ThreadComm& c) { Trainer<Small, Replicated<4>> t(c, test::plan_options()); }),
      doctest::Contains(
          "the plan needs 4 ranks (data 4 x tensor 1 x pipeline 1) but the communicator has 2"),
      Error);
}

namespace {
// Per-rank bytes of parameters, gradients and optimizer state (fp32 AdamW: 4 + 4 + 8 per
// parameter), by ZeRO stage, for Psi parameters over N ranks.
struct Expected {
  double params, grads, optim;
};
Expected zero_formula(int stage, double psi, int n) {
  switch (stage) {
    case 0: return {4 * psi, 4 * psi, 8 * psi};
    case 1: return {4 * psi, 4 * psi, 8 * psi / n};
    case 2: return {4 * psi, 4 * psi / n, 8 * psi / n};
    default: return {4 * psi / n, 4 * psi / n, 8 * psi / n};
  }
}

template <class Plan>
void check_memory_and_bytes(double comm_factor) {
  constexpr int n = PlanTraits<Plan>::world_size;
  double psi = 0;
  for (const auto& u : bloom_units<Small>()) psi += static_cast<double>(u.numel);
  const auto want = zero_formula(PlanTraits<Plan>::zero_stage, psi, n);
  std::mutex m;
  run_ranks(n, [&](ThreadComm& comm) {
    auto o = test::plan_options();
    o.micro_batch_rows = 0;  // one micro-batch: ZeRO-2/3 reduce once per step
    Trainer<Small, Plan> t(comm, o);
    t.step(test::plan_batch(0));
    auto& stats = t.data_stats();
    stats.reset();
    const auto st = t.step(test::plan_batch(1));
    std::lock_guard lock(m);
    CAPTURE(comm.rank());
    CHECK(static_cast<double>(st.memory.peak_of(Memory::parameters)) ==
          doctest::Approx(want.params).epsilon(0.05));
    CHECK(static_cast<double>(st.memory.peak_of(Memory::gradients)) ==
          doctest::Approx(want.grads).epsilon(0.05));
    CHECK(static_cast<double>(st.memory.peak_of(Memory::optimizer)) ==
          doctest::Approx(want.optim).epsilon(0.05));
    // Ring figures: an all-reduce of S bytes moves 2 (N-1)/N S per rank.
    const double ring = comm_factor * 2.0 * (n - 1) / n * 4 * psi;
    CHECK(static_cast<double>(stats.total_bytes_sent()) == doctest::Approx(ring).epsilon(0.02));
    CHECK(static_cast<double>(stats.total_bytes_received()) == doctest::Approx(ring).epsilon(0.02));
  });
}
}  // namespace

TEST_CASE("per-rank memory matches the ZeRO formulas; bytes moved match the ring figures") {
  SUBCASE("Replicated") { check_memory_and_bytes<Replicated<4>>(1.0); }
  SUBCASE("Zero1 moves what Replicated moves") { check_memory_and_bytes<Sharded<Zero1, 4>>(1.0); }
  SUBCASE("Zero2 moves what Replicated moves") { check_memory_and_bytes<Sharded<Zero2, 4>>(1.0); }
  SUBCASE("Zero3 moves 1.5x") { check_memory_and_bytes<Sharded<Zero3, 4>>(1.5); }
  SUBCASE("eight ranks") { check_memory_and_bytes<Sharded<Zero3, 8>>(1.5); }
}

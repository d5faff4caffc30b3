// Plans under mpirun -np 4 (MpiComm, one process per rank) against Replicated<1>
// computed in every process. Exits non-zero on any mismatch.
#include <cstdio>
#include <string>

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>  // the support headers use REQUIRE

#include "../support/plans.hpp"
#include "seqpar/comm/mpi_comm.hpp"

using namespace seqpar;

namespace {
constexpr int kSteps = test::kPlanSteps;

template <class Plan>
int check(MpiComm& world, const test::RunResult& ref, const char* name) {
  Trainer<test::Small, Plan> t(world, test::plan_options());
  int failures = 0;
  for (int s = 0; s < kSteps; ++s) {
    const auto st = t.step(test::plan_batch(s));
    if (std::abs(st.loss - ref.losses[static_cast<std::size_t>(s)]) >
        1e-5 * ref.losses[static_cast<std::size_t>(s)]) {
      std::fprintf(stderr, "rank %d %s step %d: loss %.8f, Replicated<1> %.8f\n", world.rank(),
                   name, s, st.loss, ref.losses[static_cast<std::size_t>(s)]);
      ++failures;
    }
  }
  const double werr = test::max_weight_error(t, ref);
  if (werr > 1e-4) {
    std::fprintf(stderr, "rank %d %s: final weights differ by %.3g (relative)\n", world.rank(),
                 name, werr);
    ++failures;
  }
  std::int64_t all = failures;
  world.all_reduce(&all, 1, ReduceOp::sum);
  if (world.rank() == 0) std::printf("%-40s %s\n", name, all == 0 ? "ok" : "FAILED");
  return static_cast<int>(all);
}
}  // namespace

int main(int argc, char** argv) {
  return mpi_main(argc, argv, [](MpiComm& world) {
    SEQPAR_CHECK(world.size() == 4, "test_parallel_mpi needs 4 ranks, got ", world.size());
    const auto ref = test::reference_run(kSteps);
    int failed = 0, total = 0;
    const auto run = [&](int f) { failed += f != 0, ++total; };
    run(check<Replicated<4>>(world, ref, "Replicated<4>"));
    run(check<Sharded<Zero1, 4>>(world, ref, "Sharded<Zero1, 4>"));
    run(check<Sharded<Zero2, 4>>(world, ref, "Sharded<Zero2, 4>"));
    run(check<Sharded<Zero3>>(world, ref, "Sharded<Zero3> (dynamic)"));
    run(check<Hybrid<TP2, DP2>>(world, ref, "Hybrid<TP2, DP2>"));
    run(check<Hybrid<TP2, PP2>>(world, ref, "Hybrid<TP2, PP2>"));
    run(check<Hybrid<PP2, Sharded<Zero3, 2>>>(world, ref, "Hybrid<PP2, Sharded<Zero3, 2>>"));
    run(check<PP4>(world, ref, "PP4"));
    if (world.rank() == 0) std::printf("%d passed, %d failed\n", total - failed, failed);
    if (failed)
      throw Error(std::to_string(failed) + " plan(s) differ from Replicated<1> under mpirun");
  });
}

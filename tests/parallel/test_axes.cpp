// The axes one at a time: the pipeline axis's layer split, its saved units and norm
// weights; the mesh's world-rank formula against the coordinates every rank derives; the
// ZeRO-3 gathers made ahead along the stack's unit order.
#include <doctest/doctest.h>

#include <chrono>
#include <cstddef>
#include <mutex>
#include <set>
#include <vector>

#include "../comm/comm_test_util.hpp"
#include "../support/plans.hpp"

using namespace seqpar;
using test::Small;

TEST_CASE("StageLayers: the units a stage holds and the order it uses them in") {
  constexpr std::int64_t L = 4;
  const StageLayers whole{0, L, true, true}, first{0, 2, true, false}, middle{1, 3, false, false},
      last{2, 4, false, true};
  // Units: 0 the embedding (its table is the head's too), 1..4 the blocks, 5 ln_f.
  CHECK(whole.unit_order(L) == std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 0});
  CHECK(first.unit_order(L) == std::vector<std::size_t>{0, 1, 2});
  CHECK(middle.unit_order(L) == std::vector<std::size_t>{2, 3});
  CHECK(last.unit_order(L) == std::vector<std::size_t>{3, 4, 5, 0});
  for (std::size_t u = 0; u <= 5; ++u) CHECK(whole.holds(u, L));
  CHECK(first.holds(0, L));
  CHECK(!first.holds(3, L));
  CHECK(!first.holds(5, L));
  CHECK(!middle.holds(0, L));
  CHECK(middle.holds(2, L));
  CHECK(!middle.holds(4, L));
  CHECK(last.holds(0, L));  // the tied table's copy
  CHECK(last.holds(5, L));
  CHECK(!last.holds(2, L));
}

TEST_CASE("PipelineAxis: layers per stage, the units each stage saves, the tied copy's weight") {
  std::mutex m;
  run_ranks(4, [&](ThreadComm& comm) {
    const PipelineAxis pipe(8, AnyComm(comm));
    const std::lock_guard lock(m);
    const int p = comm.rank();
    CAPTURE(p);
    CHECK(pipe.stages() == 4);
    CHECK(pipe.stage() == p);
    const StageLayers mine = pipe.layers();
    CHECK(mine.first == 2 * p);
    CHECK(mine.last == 2 * p + 2);
    CHECK(mine.embedding == (p == 0));
    CHECK(mine.head == (p == 3));
    CHECK(pipe.tied_copy() == (p == 3));
    CHECK(pipe.norm_weight(0) == (p == 3 ? 0.0 : 1.0));
    CHECK(pipe.norm_weight(9) == 1.0);
    // Every unit of the model is saved by exactly one stage; the tied table by the first.
    for (std::size_t u = 0; u <= 9; ++u) {
      int senders = 0;
      for (int s = 0; s < 4; ++s) senders += pipe.sends(s, u) ? 1 : 0;
      CHECK(senders == 1);
    }
    CHECK(pipe.sends(0, 0));
    CHECK(!pipe.sends(3, 0));
    CHECK(pipe.sends(3, 9));
  });
  const PipelineAxis one(8, AnyComm());
  CHECK(one.stages() == 1);
  CHECK(!one.tied_copy());
  CHECK(one.sends(0, 0));
  CHECK(one.layers().count() == 8);
  CHECK_THROWS_WITH(run_ranks(3, [](ThreadComm& comm) { PipelineAxis(8, AnyComm(comm)); }),
                    doctest::Contains("3 stages do not divide the model's 8 layers"));
}

TEST_CASE("Mesh::world_rank gives back every rank's world rank from its coordinates") {
  std::mutex m;
  std::set<int> seen;
  run_ranks(8, [&](ThreadComm& comm) {
    const Mesh mesh = Mesh::make<Hybrid<TP2, PP2, DP2>>(AnyComm(comm));
    const std::lock_guard lock(m);
    CHECK(mesh.world_rank(mesh.pipeline_rank, mesh.data_rank, mesh.tensor_rank) == comm.rank());
    seen.insert(mesh.world_rank(mesh.pipeline_rank, mesh.data_rank, mesh.tensor_rank));
    // Tensor innermost, pipeline outermost.
    CHECK(mesh.world_rank(1, 0, 0) == 4);
    CHECK(mesh.world_rank(0, 1, 0) == 2);
    CHECK(mesh.world_rank(0, 0, 1) == 1);
  });
  CHECK(seen.size() == 8);
}

// On a communicator whose collectives run behind the caller, ZeRO-3 gathers each unit the
// stage uses next while the current one computes, following the stack's unit order
// forward, then backward from the head. One step of one micro-batch on Small (4 blocks,
// units 0..5) uses, in order: 0 1 2 3 4 5 (forward), 0 (head), 5 4 3 2 1 0 (backward).
// Only the first is gathered when needed; 0 is kept from the head to the embedding's
// backward, so the gathers made ahead are 1..5, 0, then 5, 4, 3, 2, 1: eleven.
TEST_CASE("ZeRO-3 gathers ahead every unit of a step but the first, in the stack's unit order") {
  using Deferred = test::DeferredComm<ThreadComm>;
  std::mutex m;
  comm_test::timed_within(std::chrono::seconds(120), [&] {
    run_ranks(2, [&](ThreadComm& thread_comm) {
      Deferred comm(thread_comm);
      auto o = test::plan_options();
      o.micro_batch_rows = 4;  // the whole local batch: one micro-batch
      Trainer<Small, Sharded<Zero3, 2>> t(comm, o);
      t.step(test::plan_batch(0));
      const auto ahead = comm.counts().all_gather;
      const auto all = t.data_stats()[CollectiveKind::all_gather].calls;
      const std::lock_guard lock(m);
      CAPTURE(thread_comm.rank());
      CHECK(ahead == 11);
      CHECK(all == 12);  // and one gathered when needed: unit 0 for the first forward
    });
  });
}

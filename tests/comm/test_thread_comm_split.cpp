#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "comm_test_util.hpp"
#include "seqpar/comm/thread_comm.hpp"

using namespace seqpar;
using comm_test::value;
using comm_test::values;

// World ranks of a 2 x 4 grid: rank = row * 4 + col.
TEST_CASE("ThreadComm split into the rows and columns of a 2x4 grid runs collectives per group") {
  struct Seen {
    int row_rank = -1, row_size = -1, col_rank = -1, col_size = -1;
    std::vector<float> row_sum, col_gather;
    std::vector<std::int64_t> row_bcast;
    CommStats world_stats, row_stats;
  };
  std::vector<Seen> seen(8);
  run_ranks(8, [&](ThreadComm& world) {
    const int row = world.rank() / 4, col = world.rank() % 4;
    ThreadComm rows = world.split(row, col);
    ThreadComm cols = world.split(col, row);
    Seen& s = seen[world.rank()];
    s.row_rank = rows.rank();
    s.row_size = rows.size();
    s.col_rank = cols.rank();
    s.col_size = cols.size();
    CHECK(rows.world_rank() == world.rank());

    s.row_sum = values<float>(world.rank(), 10, 4);
    rows.all_reduce(s.row_sum.data(), 10, ReduceOp::sum);
    std::vector<float> mine = values<float>(world.rank(), 3, 5);
    s.col_gather.assign(6, 0.0f);
    cols.all_gather(mine.data(), s.col_gather.data(), 3);
    std::int64_t b = world.rank() * 1000;
    rows.broadcast(&b, 1, 2);
    s.row_bcast = {b};
    // point-to-point inside a column: the top row sends down
    if (cols.rank() == 0) {
      cols.send(mine.data(), 3, 1, 9);
    } else {
      std::vector<float> got(3);
      cols.recv(got.data(), 3, 0, 9);
      CHECK(got == values<float>(world.rank() - 4, 3, 5));
    }
    world.barrier();
    s.world_stats = world.stats();
    s.row_stats = rows.stats();
  });
  for (int w = 0; w < 8; ++w) {
    CAPTURE(w);
    const int row = w / 4, col = w % 4;
    const Seen& s = seen[w];
    CHECK(s.row_rank == col);
    CHECK(s.row_size == 4);
    CHECK(s.col_rank == row);
    CHECK(s.col_size == 2);
    for (std::size_t i = 0; i < 10; ++i) {
      float acc = value<float>(row * 4, i, 4);
      for (int c = 1; c < 4; ++c) acc += value<float>(row * 4 + c, i, 4);
      CHECK(s.row_sum[i] == acc);
    }
    for (int r = 0; r < 2; ++r)
      for (std::size_t i = 0; i < 3; ++i)
        CHECK(s.col_gather[r * 3 + i] == value<float>(r * 4 + col, i, 5));
    CHECK(s.row_bcast[0] == (row * 4 + 2) * 1000);
    // each communicator counts only its own calls
    CHECK(s.world_stats.total_calls() == 1);
    CHECK(s.world_stats[CollectiveKind::barrier].calls == 1);
    CHECK(s.row_stats[CollectiveKind::all_reduce].calls == 1);
    CHECK(s.row_stats[CollectiveKind::all_reduce].bytes_sent == 2 * 3 * 3 * 4);  // ceil(10/4) = 3
    CHECK(s.row_stats[CollectiveKind::all_gather].calls == 0);
  }
}

TEST_CASE("ThreadComm split orders a group by key, then by old rank, and nests") {
  std::vector<int> by_key(6), ties(6), nested(6), nested_size(6);
  run_ranks(6, [&](ThreadComm& world) {
    // one group, keys reversed: new rank = 5 - old rank
    ThreadComm rev = world.split(0, -world.rank());
    by_key[world.rank()] = rev.rank();
    // equal keys: old rank decides; colors 0 (even) and 1 (odd)
    ThreadComm parity = world.split(world.rank() % 2, 0);
    ties[world.rank()] = parity.rank();
    // split again inside the reversed group: two halves of rev's ranks
    ThreadComm half = rev.split(rev.rank() / 3, rev.rank());
    nested[world.rank()] = half.rank();
    nested_size[world.rank()] = half.size();
    std::int64_t x = half.world_rank();
    half.all_reduce(&x, 1, ReduceOp::max);
    CHECK(x == (rev.rank() < 3 ? 5 : 2));  // rev ranks 0..2 are world ranks 5..3
  });
  CHECK(by_key == std::vector<int>{5, 4, 3, 2, 1, 0});
  CHECK(ties == std::vector<int>{0, 0, 1, 1, 2, 2});
  CHECK(nested == std::vector<int>{2, 1, 0, 2, 1, 0});
  CHECK(nested_size == std::vector<int>{3, 3, 3, 3, 3, 3});
}

TEST_CASE("ThreadComm split into singletons and concurrent collectives in sibling groups") {
  run_ranks(4, [](ThreadComm& world) {
    ThreadComm alone = world.split(world.rank(), 0);
    CHECK(alone.size() == 1);
    CHECK(alone.rank() == 0);
    double v = world.rank();
    alone.all_reduce(&v, 1, ReduceOp::sum);
    CHECK(v == world.rank());
    ThreadComm pair = world.split(world.rank() / 2, 0);
    for (int step = 0; step < 200; ++step) {
      std::int64_t s = world.rank() + step;
      pair.all_reduce(&s, 1, ReduceOp::sum);
      const int base = world.rank() / 2 * 2;
      CHECK(s == base + base + 1 + 2 * step);
    }
  });
}

TEST_CASE("ThreadComm split rejects a negative color") {
  CHECK_THROWS_WITH_AS(run_ranks(2, [](ThreadComm& c) { c.split(-1, 0); }),
                       doctest::Contains("colors must be >= 0"), Error);
}

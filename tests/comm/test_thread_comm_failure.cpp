#include <doctest/doctest.h>

#include <chrono>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm_test_util.hpp"
#include "seqpar/comm/thread_comm.hpp"

using namespace seqpar;
using namespace std::chrono_literals;

namespace {

using comm_test::Outcome;

// Not derived from seqpar::Error or std::runtime_error, so it cannot be mistaken for the
// Errors the other ranks see.
struct Boom : std::exception {
  const char* what() const noexcept override { return "boom: bad batch"; }
};

// Runs n ranks; after some successful collectives, `failing` throws Boom after a short delay
// while the others run `wait`. Returns the wall time of run_ranks and what it threw.
template <class Wait>
double run_failing(int n, int failing, Outcome& outcome, std::exception_ptr& thrown, Wait wait) {
  return comm_test::timed_within(10s, [&] {
    try {
      run_ranks(n, [&](ThreadComm& c) {
        try {
          for (int i = 0; i < 20; ++i) {
            float v[3] = {1, 2, 3};
            c.all_reduce(v, 3, ReduceOp::sum);
          }
          if (c.rank() == failing) {
            std::this_thread::sleep_for(100ms);
            throw Boom();
          }
          wait(c);
        } catch (const std::exception& e) {
          outcome.set(c.rank(), e.what());
          throw;
        }
      });
    } catch (...) {
      thrown = std::current_exception();
    }
  });
}

void check_original(const std::exception_ptr& thrown) {
  REQUIRE(thrown);
  bool is_boom = false;
  try {
    std::rethrow_exception(thrown);
  } catch (const Boom&) {
    is_boom = true;
  } catch (...) {
  }
  CHECK(is_boom);
}

}  // namespace

TEST_CASE("a rank that throws releases the ranks waiting in all_reduce, recv and barrier") {
  struct Case {
    const char* name;
    void (*wait)(ThreadComm&);
  };
  const Case cases[] = {
      {"all_reduce",
       [](ThreadComm& c) {
         std::vector<float> v(1000, 1.0f);
         c.all_reduce(v.data(), v.size(), ReduceOp::sum);
       }},
      {"recv",
       [](ThreadComm& c) {
         double x;
         c.recv(&x, 1, 2, 0);  // rank 2 is the one that fails
       }},
      {"barrier", [](ThreadComm& c) { c.barrier(); }},
  };
  for (const Case& k : cases) {
    for (int n : {3, 4, 8}) {
      const std::string name = k.name;
      CAPTURE(name);
      CAPTURE(n);
      Outcome outcome(n);
      std::exception_ptr thrown;
      const double seconds = run_failing(n, 2, outcome, thrown, k.wait);
      MESSAGE(name, " n=", n, ": run_ranks returned after ", seconds, " s");
      CHECK(seconds < 2.0);
      check_original(thrown);
      for (int r = 0; r < n; ++r) {
        CAPTURE(r);
        CHECK(outcome.messages[r] ==
              (r == 2 ? "boom: bad batch" : "rank 2 failed: boom: bad batch"));
      }
    }
  }
}

TEST_CASE("a rank that fails releases ranks of other sub-communicators and later callers") {
  Outcome outcome(8);
  std::exception_ptr thrown;
  const double seconds = comm_test::timed_within(10s, [&] {
    try {
      run_ranks(8, [&](ThreadComm& world) {
        ThreadComm rows = world.split(world.rank() / 4, 0);  // ranks 0-3 and 4-7
        try {
          if (world.rank() == 5) {
            std::this_thread::sleep_for(100ms);
            throw Boom();
          }
          if (world.rank() == 0) {
            // enters only after the failure: must not block, must not succeed
            std::this_thread::sleep_for(500ms);
            std::int64_t x = 1;
            world.broadcast(&x, 1, 0);
          } else if (world.rank() < 4) {
            float x = 1;
            rows.all_reduce(&x, 1, ReduceOp::max);  // waits for rank 0, which is asleep
          } else {
            std::vector<double> v(16);
            rows.all_gather(v.data() + 4 * rows.rank(), v.data(), 4);  // waits for rank 5
          }
        } catch (const std::exception& e) {
          outcome.set(world.rank(), e.what());
          throw;
        }
      });
    } catch (...) {
      thrown = std::current_exception();
    }
  });
  MESSAGE("sub-communicators: run_ranks returned after ", seconds, " s");
  CHECK(seconds < 2.0);
  check_original(thrown);
  for (int r = 0; r < 8; ++r) {
    CAPTURE(r);
    if (r != 5) CHECK(outcome.messages[r] == "rank 5 failed: boom: bad batch");
  }
}

TEST_CASE("run_ranks rethrows the first failure even when it is not a std::exception") {
  std::exception_ptr thrown;
  Outcome outcome(3);
  comm_test::timed_within(10s, [&] {
    try {
      run_ranks(3, [&](ThreadComm& c) {
        if (c.rank() == 0) throw 42;
        try {
          c.barrier();
        } catch (const Error& e) {
          outcome.set(c.rank(), e.what());
          throw;
        }
      });
    } catch (...) {
      thrown = std::current_exception();
    }
  });
  int value = 0;
  try {
    std::rethrow_exception(thrown);
  } catch (int v) {
    value = v;
  } catch (...) {
  }
  CHECK(value == 42);
  CHECK(outcome.messages[1] == "rank 0 failed: unknown exception");
}

TEST_CASE("ThreadComm names the ranks of mismatched collectives") {
  SUBCASE("different n") {
    CHECK_THROWS_WITH_AS(run_ranks(4,
                                   [](ThreadComm& c) {
                                     std::vector<float> v(8);
                                     c.all_reduce(v.data(), c.rank() == 1 ? 5 : 4, ReduceOp::sum);
                                   }),
                         doctest::Contains("ThreadComm: mismatched collectives in a 4-rank group: "
                                           "rank 0, rank 2, rank 3 called all_reduce<F32>(n=4, "
                                           "sum); rank 1 called all_reduce<F32>(n=5, sum) (its "
                                           "collective #1)\nrank 0's last call, oldest first:\n"
                                           "  world #1 all_reduce<F32>(n=4, sum)\nrank 1's last"),
                         Error);
  }
  SUBCASE("different kinds, ops, types and roots") {
    CHECK_THROWS_WITH_AS(run_ranks(2,
                                   [](ThreadComm& c) {
                                     double v[2] = {};
                                     if (c.rank() == 0)
                                       c.barrier();
                                     else
                                       c.all_reduce(v, 2, ReduceOp::max);
                                   }),
                         doctest::Contains("rank 0 called barrier; rank 1 called "
                                           "all_reduce<F64>(n=2, max)"),
                         Error);
    CHECK_THROWS_WITH_AS(run_ranks(2,
                                   [](ThreadComm& c) {
                                     float v[2] = {};
                                     c.broadcast(v, 2, c.rank());
                                   }),
                         doctest::Contains("rank 1 called broadcast<F32>(n=2, root=1)"), Error);
  }
  SUBCASE("in a sub-communicator, with world ranks") {
    CHECK_THROWS_WITH_AS(run_ranks(4,
                                   [](ThreadComm& c) {
                                     ThreadComm g = c.split(c.rank() % 2, 0);
                                     std::int64_t v[3] = {};
                                     g.all_reduce(v, c.rank() == 3 ? 3 : 2, ReduceOp::sum);
                                   }),
                         doctest::Contains("rank 1 (world rank 3) called all_reduce<I64>(n=3"),
                         Error);
  }
}

TEST_CASE("ThreadComm fails instead of hanging when a rank returns without its part") {
  const double seconds = comm_test::timed_within(10s, [] {
    CHECK_THROWS_WITH_AS(run_ranks(3,
                                   [](ThreadComm& c) {
                                     if (c.rank() != 1) c.barrier();
                                   }),
                         doctest::Contains("rank 1 returned from its function while rank"), Error);
    CHECK_THROWS_WITH_AS(run_ranks(2,
                                   [](ThreadComm& c) {
                                     float x;
                                     if (c.rank() == 0) c.recv(&x, 1, 1, 4);
                                   }),
                         doctest::Contains("ThreadComm: rank 1 returned from its function without "
                                           "sending the message (tag 4) that rank 0 waits for\n"
                                           "rank 0's last call, oldest first:\n  world "
                                           "recv<F32>(n=1, from rank 1, tag 4)\nrank 1 made no "
                                           "communicator call"),
                         Error);
  });
  CHECK(seconds < 2.0);
}

TEST_CASE("ThreadComm rejects bad peers, tags, roots and message sizes") {
  CHECK_THROWS_WITH_AS(run_ranks(2,
                                 [](ThreadComm& c) {
                                   float x = 0;
                                   c.send(&x, 1, c.rank(), 0);
                                 }),
                       doctest::Contains("a peer must be another rank of this 2-rank communicator"),
                       Error);
  CHECK_THROWS_WITH_AS(run_ranks(2,
                                 [](ThreadComm& c) {
                                   float x = 0;
                                   c.send(&x, 1, 2, 0);
                                 }),
                       doctest::Contains("names peer 2"), Error);
  CHECK_THROWS_WITH_AS(run_ranks(2,
                                 [](ThreadComm& c) {
                                   float x = 0;
                                   c.send(&x, 1, 1 - c.rank(), -1);
                                 }),
                       doctest::Contains("tag -1 is outside [0, 32767]"), Error);
  CHECK_THROWS_WITH_AS(run_ranks(3,
                                 [](ThreadComm& c) {
                                   float x = 0;
                                   c.broadcast(&x, 1, 3);
                                 }),
                       doctest::Contains("root 3 is out of range for a 3-rank communicator"),
                       Error);
  CHECK_THROWS_WITH_AS(
      run_ranks(2,
                [](ThreadComm& c) {
                  float x[4] = {};
                  if (c.rank() == 0)
                    c.send(x, 4, 1, 0);
                  else
                    c.recv(x, 3, 0, 0);
                }),
      "ThreadComm: rank 1 receives 3 F32 from rank 0 (tag 0) but that rank sent 4 F32", Error);
  CHECK_THROWS_WITH_AS(run_ranks(2,
                                 [](ThreadComm& c) {
                                   float x[4] = {};
                                   c.reduce_scatter(x, x + 1, 2, ReduceOp::sum);
                                 }),
                       doctest::Contains("overlaps its input other than at block"), Error);
  CHECK_THROWS_WITH_AS(run_ranks(0, [](ThreadComm&) {}),
                       "ThreadComm: a world needs at least one rank, got 0", Error);
}

// Fingerprints and histories under ThreadComm: ranks that call different collectives are
// named with their calls' numbers and each rank's last calls, so the place where they parted
// is printed; a timeout shows what the rank that did not come was doing; AnyComm forwards
// to the same checks. SEQPAR_COMM_CHECKS turns the histories off.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "comm_test_util.hpp"
#include "seqpar/comm/any_comm.hpp"
#include "seqpar/comm/fingerprint.hpp"
#include "seqpar/comm/thread_comm.hpp"

using namespace seqpar;
using namespace std::chrono_literals;

namespace {

// What run_ranks threw (the first failure), or "<nothing>".
template <class F>
std::string thrown_by(int n, F&& fn, CommSeconds timeout = comm_timeout()) {
  std::string what = "<nothing>";
  comm_test::timed_within(20s, [&] {
    try {
      run_ranks(n, fn, timeout);
    } catch (const std::exception& e) {
      what = e.what();
    }
  });
  return what;
}

}  // namespace

TEST_CASE("a mismatch prints every rank's last calls, where they parted last") {
  const std::string m = thrown_by(3, [](ThreadComm& c) {
    float x[4] = {};
    for (int i = 0; i < 3; ++i) c.all_reduce(x, 2, ReduceOp::sum);
    c.barrier();
    if (c.rank() == 2)
      c.broadcast(x, 4, 0);
    else
      c.all_reduce(x, 4, ReduceOp::max);
  });
  CAPTURE(m);
  CHECK(
      m.starts_with("ThreadComm: mismatched collectives in a 3-rank group: rank 0, rank 1 "
                    "called all_reduce<F32>(n=4, max); rank 2 called broadcast<F32>(n=4, "
                    "root=0) (its collective #5)\n"));
  for (int r = 0; r < 3; ++r) {
    const std::string head = "rank " + std::to_string(r) + "'s last 5 calls, oldest first:\n";
    const auto at = m.find(head);
    REQUIRE(at != std::string::npos);
    const std::string last =
        r == 2 ? "  world #5 broadcast<F32>(n=4, root=0)" : "  world #5 all_reduce<F32>(n=4, max)";
    CHECK(m.substr(at + head.size())
              .starts_with(
                  "  world #1 all_reduce<F32>(n=2, sum)\n  world #2 all_reduce<F32>(n=2, sum)\n"
                  "  world #3 all_reduce<F32>(n=2, sum)\n  world #4 barrier\n" +
                  last));
  }
}

TEST_CASE("a timeout shows the last calls of the rank that did not come") {
  // Ranks 0 and 1 wait in a barrier of the world; rank 2 waits for a message of rank 0's
  // in a split group: each waits for the other. The history of rank 2 says where it is.
  const std::string m = thrown_by(
      3,
      [](ThreadComm& c) {
        ThreadComm pair = c.split(c.rank() == 1 ? 1 : 0, 0);  // world ranks {0, 2} and {1}
        float x = 0;
        if (c.rank() == 2)
          pair.recv(&x, 1, 0, 5);
        else
          c.barrier();
      },
      CommSeconds(0.5));
  CAPTURE(m);
  // Both waits time out; whichever ends the run shows both ranks' last calls.
  CHECK((m.find("rank 2 did not come to barrier within 0.5 s") != std::string::npos ||
         m.find("did not send within 0.5 s the message (tag 5)") != std::string::npos));
  CHECK(m.find("last 2 calls, oldest first:\n  world #1 split\n  world ranks {0, 2} "
               "recv<F32>(n=1, from rank 0, tag 5)") != std::string::npos);
  CHECK(m.find("last 2 calls, oldest first:\n  world #1 split\n  world #2 barrier") !=
        std::string::npos);
}

TEST_CASE("a mismatch in a split group names the group and the world ranks") {
  const std::string m = thrown_by(4, [](ThreadComm& c) {
    ThreadComm column = c.split(c.rank() % 2, c.rank());
    std::int64_t v[3] = {};
    column.all_gather(v, v + 1, c.rank() == 3 ? 1 : 0);
  });
  CAPTURE(m);
  CHECK(m.find("rank 0 (world rank 1) called all_gather<I64>(n=0); rank 1 (world rank 3) called "
               "all_gather<I64>(n=1) (its collective #1)") != std::string::npos);
  CHECK(m.find("  world ranks {1, 3} #1 all_gather<I64>(n=1)") != std::string::npos);
}

TEST_CASE("AnyComm forwards to the communicator's checks") {
  const std::string m = thrown_by(2, [](ThreadComm& c) {
    AnyComm any(c);
    double v[3] = {};
    any.all_reduce(v, c.rank() == 0 ? 3 : 2, ReduceOp::sum);
  });
  CHECK(
      m.find("rank 0 called all_reduce<F64>(n=3, sum); rank 1 called all_reduce<F64>(n=2, sum)") !=
      std::string::npos);
}

TEST_CASE("the history keeps the last calls of many") {
  CommHistory h;
  const auto world = std::make_shared<const std::string>("world");
  for (std::uint64_t i = 1; i <= 40; ++i)
    h.record(world, {CommOp::barrier, DType::f32, 0, 0, ReduceOp::sum, i});
  const std::string d = h.describe("rank 7");
  CHECK(d.starts_with("rank 7's last 16 calls of 40, oldest first:\n  world #25 barrier\n"));
  CHECK(d.ends_with("  world #40 barrier\n"));
  CHECK(CommHistory().describe("rank 1") == "rank 1 made no communicator call\n");
}

TEST_CASE("SEQPAR_COMM_CHECKS=0 leaves the histories out; other values are refused") {
  const auto run = [] {
    return thrown_by(2, [](ThreadComm& c) {
      float x[2] = {};
      c.all_reduce(x, c.rank() + 1, ReduceOp::sum);
    });
  };
  ::setenv("SEQPAR_COMM_CHECKS", "0", 1);
  const std::string off = run();
  ::setenv("SEQPAR_COMM_CHECKS", "yes", 1);
  CHECK_THROWS_WITH_AS(comm_checks(),
                       "SEQPAR_COMM_CHECKS is 'yes'; expected 1 (check every "
                       "collective's fingerprint) or 0 (do not)",
                       Error);
  ::unsetenv("SEQPAR_COMM_CHECKS");
  CHECK(comm_checks());
  const std::string on = run();
  CHECK(off ==
        "ThreadComm: mismatched collectives in a 2-rank group: rank 0 called "
        "all_reduce<F32>(n=1, sum); rank 1 called all_reduce<F32>(n=2, sum) (its "
        "collective #1)");
  CHECK(on.starts_with(off + "\nrank 0's last call"));
}

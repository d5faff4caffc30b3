// A rank that does not come to a collective (or does not send what a peer receives) ends
// the run after the timeout: every rank fails, the message names the call and the rank
// that did not come, and the waiting ranks sleep on a condition variable meanwhile.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
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

// Process CPU time in seconds (all threads).
double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

// 4 ranks with a 0.5 s timeout: after a few good all_reduces rank 3 sleeps `late` and then
// calls `call` too, while the others call `call` at once.
template <class Call>
std::string run_late(std::chrono::milliseconds late, Outcome& outcome, double& wall, double& cpu,
                     Call call) {
  std::string thrown = "<nothing>";
  const double cpu0 = cpu_seconds();
  wall = comm_test::timed_within(20s, [&] {
    try {
      run_ranks(
          4,
          [&](ThreadComm& c) {
            try {
              for (int i = 0; i < 5; ++i) {
                float v[2] = {1, 2};
                c.all_reduce(v, 2, ReduceOp::sum);
              }
              if (c.rank() == 3) std::this_thread::sleep_for(late);
              call(c);
            } catch (const std::exception& e) {
              outcome.set(c.rank(), e.what());
              throw;
            }
          },
          CommSeconds(0.5));
    } catch (const std::exception& e) {
      thrown = e.what();
    }
  });
  cpu = cpu_seconds() - cpu0;
  return thrown;
}

}  // namespace

TEST_CASE(
    "a rank that does not come to all_reduce, barrier or recv ends every rank after the timeout") {
  struct Case {
    const char* name;
    void (*call)(ThreadComm&);
    const char* expect;
  };
  const Case cases[] = {
      {"all_reduce",
       [](ThreadComm& c) {
         float v = 1;
         c.all_reduce(&v, 1, ReduceOp::max);
       },
       "ThreadComm: rank 3 did not come to all_reduce within 0.5 s"},
      {"barrier", [](ThreadComm& c) { c.barrier(); },
       "ThreadComm: rank 3 did not come to barrier within 0.5 s"},
      {"recv",
       [](ThreadComm& c) {
         float v = 0;
         // ranks 1 and 2 return: a collective of theirs would time out as well, first or not
         if (c.rank() == 0) c.recv(&v, 1, 3, 7);
         if (c.rank() == 3) c.send(&v, 1, 0, 7);
       },
       "ThreadComm: rank 3 did not send within 0.5 s the message (tag 7) that rank 0 waits for in "
       "recv"},
  };
  for (const Case& k : cases) {
    const std::string name = k.name;
    CAPTURE(name);
    Outcome outcome(4);
    double wall = 0, cpu = 0;
    const std::string thrown = run_late(1200ms, outcome, wall, cpu, k.call);
    CAPTURE(thrown);
    CHECK(thrown.find(k.expect) != std::string::npos);
    // every rank failed, the late one at its own call, naming the same cause
    for (int r = 0; r < 4; ++r) {
      if (name == "recv" && (r == 1 || r == 2)) continue;  // returned before the failure
      CAPTURE(r);
      CAPTURE(outcome.messages[r]);
      CHECK(outcome.messages[r].find(k.expect) != std::string::npos);
    }
    CHECK(wall > 1.1);  // run_ranks joins the late rank, which fails at its call
    CHECK(wall < 6);
    // three ranks waited ~1 s each: sleeping, not spinning (a spinning wait costs ~3.6 s)
    CHECK(cpu < 1.0);
  }
}

TEST_CASE("a rank that comes before the timeout is waited for") {
  Outcome outcome(4);
  double wall = 0, cpu = 0;
  const std::string thrown =
      run_late(200ms, outcome, wall, cpu, [](ThreadComm& c) { c.barrier(); });
  CHECK(thrown == "<nothing>");
  for (int r = 0; r < 4; ++r) CHECK(outcome.messages[r] == "<returned>");
}

TEST_CASE("the timeout comes from SEQPAR_COMM_TIMEOUT_S, and a bad value is refused naming it") {
  ::setenv("SEQPAR_COMM_TIMEOUT_S", "1.5", 1);
  CHECK(comm_timeout().count() == 1.5);
  CHECK(ThreadComm::make_world(2)[1].timeout().count() == 1.5);
  for (const char* bad : {"0", "-3", "abc", "1e3", "inf", "nan", "5s"}) {
    CAPTURE(bad);
    ::setenv("SEQPAR_COMM_TIMEOUT_S", bad, 1);
    CHECK_THROWS_WITH_AS(comm_timeout(), doctest::Contains("SEQPAR_COMM_TIMEOUT_S is '"), Error);
  }
  ::setenv("SEQPAR_COMM_TIMEOUT_S", "99999999999999999999", 1);  // past steady_clock's range
  run_ranks(2, [](ThreadComm& c) { c.barrier(); });              // waits (briefly), no overflow
  ::unsetenv("SEQPAR_COMM_TIMEOUT_S");
  CHECK(comm_timeout().count() == default_comm_timeout_s);
  auto w = ThreadComm::make_world(3);
  w[0].set_timeout(CommSeconds(2));
  CHECK(w[2].timeout().count() == 2);  // the whole world shares it
  CHECK_THROWS_WITH_AS(w[0].set_timeout(CommSeconds(0)),
                       "ThreadComm: the timeout must be above 0 s, got 0", Error);
}

// Stopping between steps: SIGTERM or SIGINT asks to stop, a second one ends the process at
// once, and the ranks agree on the step after which they all stop, whichever of them was
// asked; the checkpoint saved there resumes the run bit for bit.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <vector>

#include "../support/files.hpp"
#include "../support/plans.hpp"
#include "seqpar/train/stop.hpp"

using namespace seqpar;
using test::Small;

namespace {

// Runs `body` in a child process; returns its wait status.
template <class Body>
int in_child(Body body) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    body();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

bool exited_with(int status, int code) { return WIFEXITED(status) && WEXITSTATUS(status) == code; }
bool killed_by(int status, int sig) { return WIFSIGNALED(status) && WTERMSIG(status) == sig; }

}  // namespace

TEST_CASE("StopSignals: the first SIGTERM or SIGINT asks to stop, a second ends the process") {
  CHECK(exited_with(in_child([] {
                      StopSignals s;
                      if (StopSignals::received() != 0) ::_exit(2);
                      ::raise(SIGTERM);
                      if (StopSignals::received() != SIGTERM) ::_exit(3);
                      if (StopRequest().pending() != SIGTERM) ::_exit(4);
                    }),
                    0));
  CHECK(killed_by(in_child([] {
                    StopSignals s;
                    ::raise(SIGINT);
                    ::raise(SIGTERM);  // the second, of the other kind
                    ::_exit(5);
                  }),
                  SIGTERM));
  CHECK(killed_by(in_child([] {
                    StopSignals s;
                    ::raise(SIGINT);
                    ::raise(SIGINT);
                    ::_exit(5);
                  }),
                  SIGINT));
  // the handlers it replaced come back; nested instances keep what was caught
  CHECK(killed_by(in_child([] {
                    { StopSignals s; }
                    ::raise(SIGTERM);
                    ::_exit(5);
                  }),
                  SIGTERM));
  CHECK(exited_with(in_child([] {
                      StopSignals outer;
                      ::raise(SIGINT);
                      {
                        StopSignals inner;
                        if (StopSignals::received() != SIGINT) ::_exit(2);
                      }
                      if (StopSignals::received() != SIGINT) ::_exit(3);
                    }),
                    0));
}

TEST_CASE("every rank gets the same decision: the largest signal, from the lowest rank") {
  std::mutex m;
  std::vector<StopDecision> got(4);
  run_ranks(4, [&](ThreadComm& c) {
    StopRequest stop;
    const StopDecision none = stop.agreed(c);
    if (c.rank() == 3) stop.request(SIGINT);
    if (c.rank() == 1 || c.rank() == 2) stop.request(SIGTERM);
    const StopDecision d = stop.agreed(c);
    std::lock_guard lock(m);
    CHECK_FALSE(none);
    got[c.rank()] = d;
  });
  for (const auto& d : got) {
    CHECK(d.signal == SIGTERM);
    CHECK(d.rank == 1);
    CHECK(d.describe() == "SIGTERM (rank 1)");
  }
}

TEST_CASE("a rank asked to stop and one not stop after the same step; the checkpoint resumes") {
  using Plan = Sharded<Zero2, 2>;
  constexpr int kSteps = 6, kAsked = 3;
  const auto path = test::temp_path("stopped.safetensors");
  std::mutex m;
  std::vector<double> full(kSteps), resumed(kSteps, -1);
  std::vector<std::int64_t> stopped_at(2, -1);
  run_ranks(2, [&](ThreadComm& c) {
    Trainer<Small, Plan> t(c, test::plan_options());
    for (int s = 0; s < kSteps; ++s) {
      const double loss = t.step(test::plan_batch(s)).loss;
      std::lock_guard lock(m);
      full[s] = loss;
    }
  });
  run_ranks(2, [&](ThreadComm& c) {
    Trainer<Small, Plan> t(c, test::plan_options());
    StopRequest stop;
    for (int s = 0; s < kSteps; ++s) {
      t.step(test::plan_batch(s));
      if (c.rank() == 1 && t.steps_taken() == kAsked) stop.request();  // rank 0 is not asked
      if (stop.agreed(c)) {
        t.save_checkpoint(path);
        std::lock_guard lock(m);
        stopped_at[c.rank()] = t.steps_taken();
        break;
      }
    }
  });
  CHECK(stopped_at == std::vector<std::int64_t>{kAsked, kAsked});
  run_ranks(2, [&](ThreadComm& c) {
    Trainer<Small, Plan> t(c, test::plan_options());
    t.load_checkpoint(path);
    for (int s = kAsked; s < kSteps; ++s) {
      const double loss = t.step(test::plan_batch(s)).loss;
      std::lock_guard lock(m);
      resumed[s] = loss;
    }
  });
  for (int s = kAsked; s < kSteps; ++s) CHECK(resumed[s] == full[s]);
  std::filesystem::remove(path);
}

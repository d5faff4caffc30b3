#pragma once
// Stopping a run between steps: the first SIGTERM or SIGINT asks to stop (a second ends the
// process), and StopRequest::agreed(world) is a collective check so every rank stops after the
// same step (docs/reliability.md).

#include <signal.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "seqpar/comm/communicator.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::inline v0 {

namespace detail::stop {

// The one thing a signal handler may touch: a lock-free atomic of static storage. It holds
// the first stop signal caught (0: none yet).
inline std::atomic<int> caught{0};
static_assert(std::atomic<int>::is_always_lock_free);

// Async-signal-safe: an atomic exchange, signal() and raise().
inline void on_signal(int sig) {
  int none = 0;
  if (caught.compare_exchange_strong(none, sig)) return;  // the first: stop at a step boundary
  ::signal(sig, SIG_DFL);  // a second: end now, as the signal does without a handler
  ::raise(sig);
}

}  // namespace detail::stop

/// "SIGTERM", "SIGINT", or "signal N".
inline std::string signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    default: return "signal " + std::to_string(sig);
  }
}

/// While it lives, SIGTERM and SIGINT do not end the process: the first asks the run to
/// stop (StopRequest::agreed sees it at the next step boundary), a second one, of either
/// kind, ends the process at once as the signal would. The handlers it replaced come back
/// when it is destroyed. Instances nest (the inner one leaves a caught signal caught);
/// make one per process, not one per ThreadComm rank.
class StopSignals {
 public:
  StopSignals() {
    struct sigaction ours {};
    ours.sa_handler = &detail::stop::on_signal;
    sigemptyset(&ours.sa_mask);
    ours.sa_flags = SA_RESTART;  // calls under way go on: a checkpoint being written, a wait
    SEQPAR_CHECK(
        ::sigaction(SIGTERM, &ours, &old_term_) == 0 && ::sigaction(SIGINT, &ours, &old_int_) == 0,
        "StopSignals: cannot install the handlers of SIGTERM and SIGINT");
    if (old_term_.sa_handler != &detail::stop::on_signal) detail::stop::caught = 0;
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  ~StopSignals() {
    ::sigaction(SIGTERM, &old_term_, nullptr);
    ::sigaction(SIGINT, &old_int_, nullptr);
  }

  /// The first signal caught since the outermost StopSignals was made (SIGTERM or SIGINT),
  /// or 0.
  static int received() { return detail::stop::caught.load(); }

 private:
  struct sigaction old_term_ {};
  struct sigaction old_int_ {};
};

/// A share of one StopSignals for the whole process: the first share installs it, the last
/// one gone removes it, so that every rank of a run (threads of one process, or processes)
/// may hold one without their handlers undoing each other's.
class StopSignalsShare {
 public:
  StopSignalsShare() {
    const std::lock_guard lock(mutex());
    if (count()++ == 0) held().emplace();
  }
  ~StopSignalsShare() {
    const std::lock_guard lock(mutex());
    if (--count() == 0) held().reset();
  }
  StopSignalsShare(const StopSignalsShare&) = delete;
  StopSignalsShare& operator=(const StopSignalsShare&) = delete;

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static int& count() {
    static int n = 0;
    return n;
  }
  static std::optional<StopSignals>& held() {
    static std::optional<StopSignals> s;
    return s;
  }
};

/// What the ranks decided at a step boundary: stop (a signal, the largest number any rank
/// asked with, and the lowest rank that asked with it) or go on (signal 0).
struct StopDecision {
  int signal = 0;
  int rank = -1;
  explicit operator bool() const { return signal != 0; }
  /// "SIGTERM (rank 1)".
  std::string describe() const {
    return signal ? signal_name(signal) + " (rank " + std::to_string(rank) + ")" : "no stop";
  }
};

/// One rank's reason to stop: a signal StopSignals caught in this process, or request().
class StopRequest {
 public:
  /// Asks to stop as a caught signal does (a rank's own reason; tests); `sig` names it.
  void request(int sig = SIGTERM) { requested_ = sig; }

  /// This rank's reason: its request(), else the signal caught, else 0.
  int pending() const { return requested_ ? requested_ : StopSignals::received(); }

  /// Collective over `world`, called by every rank at the same step boundary: whether any
  /// rank has a reason to stop. Every rank gets the same decision, so a rank that got the
  /// signal and one that did not stop after the same step. One all-reduce of one integer.
  template <class C>
  StopDecision agreed(C& world) const {
    const std::int64_t sig = pending();
    // the largest signal, then the lowest rank: (signal, -rank) in one integer
    std::int64_t v = sig ? (sig << 32) | (0x7fffffff - static_cast<std::int64_t>(world.rank())) : 0;
    world.all_reduce(&v, 1, ReduceOp::max);
    if (v == 0) return {};
    return {static_cast<int>(v >> 32), static_cast<int>(0x7fffffff - (v & 0xffffffff))};
  }

 private:
  int requested_ = 0;
};

}  // namespace seqpar::inline v0

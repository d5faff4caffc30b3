#pragma once
// How long a rank waits in one communicator call before it ends the run, and how a
// polling wait backs off so that a rank waiting for a stopped peer does not keep a core
// busy. Every communicator takes its default from comm_timeout(), the one place that reads
// SEQPAR_COMM_TIMEOUT_S.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "seqpar/core/error.hpp"

namespace seqpar::inline v0 {

/// Seconds, fractional (tests use a second or two).
using CommSeconds = std::chrono::duration<double>;

/// Waits longer than this are taken for a hang when SEQPAR_COMM_TIMEOUT_S is unset: longer
/// than any one collective of a healthy run (a checkpoint's gather included), short enough
/// that a stopped job ends within the hour.
inline constexpr double default_comm_timeout_s = 600;

/// The timeout communicators start with: SEQPAR_COMM_TIMEOUT_S (seconds, > 0, decimal)
/// when set, else default_comm_timeout_s. Throws naming the variable for any other value.
inline CommSeconds comm_timeout() {
  const char* text = std::getenv("SEQPAR_COMM_TIMEOUT_S");
  if (text == nullptr || *text == '\0') return CommSeconds(default_comm_timeout_s);
  const std::string s(text);
  const bool plain = s.find_first_not_of("0123456789.") == std::string::npos;
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  SEQPAR_CHECK(plain && end != text && *end == '\0' && std::isfinite(v) && v > 0,
               "SEQPAR_COMM_TIMEOUT_S is '", s,
               "'; expected a number of seconds above 0 (e.g. 600)");
  return CommSeconds(v);
}

namespace detail {

/// "2", "0.5", "600": a timeout as messages write it.
inline std::string seconds_text(CommSeconds t) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", t.count());
  return text;
}

/// `timeout`, once `who` (a communicator's name) has checked it is above 0 s.
inline CommSeconds checked_timeout(const char* who, CommSeconds timeout) {
  SEQPAR_CHECK(timeout.count() > 0, who, ": the timeout must be above 0 s, got ", timeout.count());
  return timeout;
}

/// Deadline of a wait that starts now. Timeouts beyond 10^8 s (three years) are taken as
/// that: steady_clock's nanoseconds overflow at about 9 * 10^9 s.
inline std::chrono::steady_clock::time_point comm_deadline(CommSeconds timeout) {
  const CommSeconds t = std::min(timeout, CommSeconds(1e8));
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(t);
}

/// Pauses between polls of a nonblocking operation: none for the first 200 us (a
/// collective of a healthy step completes within that), then sleeps that double from
/// 20 us up to 1 ms, so a long wait costs about 1/1000 of a core and adds at most 1 ms.
class PollBackoff {
 public:
  void pause() {
    const auto waited = std::chrono::steady_clock::now() - start_;
    if (waited < std::chrono::microseconds(200)) return;
    std::this_thread::sleep_for(sleep_);
    sleep_ = std::min<std::chrono::microseconds>(sleep_ * 2, std::chrono::milliseconds(1));
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::microseconds sleep_{20};
};

}  // namespace detail
}  // namespace seqpar::inline v0

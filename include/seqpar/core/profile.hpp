#pragma once
// Where a training step's time goes: wall time by phase (each GEMM family forward and
// backward, attention, norms, activations, the loss, clipping, the optimizer, communication,
// arena and conversion work), its arithmetic or bytes, and the time the GEMMs' threads spend
// packing their operands. Off by default: a scope then costs one relaxed atomic load.
//
//   seqpar::profile::enable();
//   trainer.step(batch); ...               // every scope of every step is summed
//   const auto t = seqpar::profile::totals();
//   std::fputs(seqpar::profile::table(t, probes).c_str(), stdout);
//
// Scopes nest; a phase's time excludes the scopes opened inside it, so the phases of a step
// add up to the step ("other" is what no scope of the step claimed). Times are wall times of
// the calling thread, so they are a device's only where its ops are synchronous (Cpu; on
// Cuda a scope would time the launches). Several ranks in one process (thread ranks) add
// their times together, and a phase's packing may then hold another rank's: profile one
// rank a process for a phase's own figures.

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace seqpar::inline v0::profile {

/// What a phase's rate is measured against: the GEMM probe (arithmetic), the memory
/// bandwidth probe (bytes), or nothing (a phase that waits or bookkeeps).
enum class Bound : std::uint8_t { gemm, memory, none };

#define SEQPAR_PROFILE_PHASES(X)                                      \
  X(step, "step", none)                                               \
  X(qkv, "QKV GEMM", gemm)                                            \
  X(qkv_backward, "QKV GEMM backward", gemm)                          \
  X(attention_out, "attention output GEMM", gemm)                     \
  X(attention_out_backward, "attention output GEMM backward", gemm)   \
  X(mlp_up, "MLP up GEMM", gemm)                                      \
  X(mlp_up_backward, "MLP up GEMM backward", gemm)                    \
  X(mlp_down, "MLP down GEMM", gemm)                                  \
  X(mlp_down_backward, "MLP down GEMM backward", gemm)                \
  X(lm_head, "LM head GEMM", gemm)                                    \
  X(lm_head_backward, "LM head GEMM backward", gemm)                  \
  X(attention, "attention", gemm)                                     \
  X(attention_backward, "attention backward", gemm)                   \
  X(norms, "layer norms", memory)                                     \
  X(norms_backward, "layer norms backward", memory)                   \
  X(activations, "GELU, bias and residual", memory)                   \
  X(activations_backward, "GELU backward and bias gradients", memory) \
  X(embedding, "embedding, forward and backward", memory)             \
  X(loss, "cross entropy (statistics, gradient, rows)", memory)       \
  X(communication, "communication", none)                             \
  X(clipping, "gradient norm and clipping", memory)                   \
  X(optimizer, "optimizer", memory)                                   \
  X(conversion, "conversion and zeroing", memory)                     \
  X(arena, "arena", none)

enum class Phase : std::uint8_t {
#define SEQPAR_PROFILE_ENUM(id, name, bound) id,
  SEQPAR_PROFILE_PHASES(SEQPAR_PROFILE_ENUM)
#undef SEQPAR_PROFILE_ENUM
};

struct PhaseInfo {
  std::string_view name;
  Bound bound;
};

inline constexpr std::array phases{
#define SEQPAR_PROFILE_INFO(id, name, bound) PhaseInfo{name, Bound::bound},
    SEQPAR_PROFILE_PHASES(SEQPAR_PROFILE_INFO)
#undef SEQPAR_PROFILE_INFO
};
inline constexpr std::size_t phase_count = phases.size();

/// What the scopes have summed since the last reset(): per phase its time (excluding the
/// scopes inside it), its calls, and the arithmetic (flops) or bytes its callers declared.
struct Totals {
  std::array<double, phase_count> seconds{}, flops{}, bytes{};
  std::array<std::int64_t, phase_count> calls{};
  /// The GEMM threads' packing inside each phase (thread time, added over the threads), and
  /// in all.
  std::array<double, phase_count> packing_thread_seconds_of{};
  double packing_thread_seconds = 0;
  /// The step phase's whole time (its scope and everything inside it).
  double step_seconds = 0;
  std::int64_t steps = 0;
  double of(Phase p) const { return seconds[static_cast<std::size_t>(p)]; }
};

namespace detail {
struct Counters {
  std::atomic<bool> on{false};
  std::array<std::atomic<std::int64_t>, phase_count> ns{}, calls{}, packing{};
  std::array<std::atomic<double>, phase_count> flops{}, bytes{};
  std::atomic<std::int64_t> packing_ns{0}, step_ns{0};
};
inline Counters& counters() {
  static Counters c;
  return c;
}
inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
inline void add(std::atomic<double>& a, double v) {
  double cur = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(cur, cur + v, std::memory_order_relaxed)) {
  }
}
}  // namespace detail

inline bool enabled() { return detail::counters().on.load(std::memory_order_relaxed); }
/// Starts (or stops) summing; what was summed stays until reset().
inline void enable(bool on = true) { detail::counters().on.store(on, std::memory_order_relaxed); }
inline void reset() {
  auto& c = detail::counters();
  for (std::size_t i = 0; i < phase_count; ++i) {
    c.ns[i] = 0;
    c.calls[i] = 0;
    c.packing[i] = 0;
    c.flops[i] = 0;
    c.bytes[i] = 0;
  }
  c.packing_ns = 0;
  c.step_ns = 0;
}

/// Times its lifetime as phase `p` (exclusive of scopes opened inside it on this thread),
/// with `flops` of arithmetic or `bytes` moved, for the phase's rate.
class Scope {
 public:
  explicit Scope(Phase p, double flops = 0, double bytes = 0) {
    if (!enabled()) return;
    phase_ = p;
    flops_ = flops;
    bytes_ = bytes;
    parent_ = current();
    current() = this;
    packing_start_ = detail::counters().packing_ns.load(std::memory_order_relaxed);
    start_ = detail::now_ns();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  ~Scope() {
    if (start_ < 0) return;
    const std::int64_t whole = detail::now_ns() - start_;
    auto& c = detail::counters();
    const auto i = static_cast<std::size_t>(phase_);
    const std::int64_t packing = c.packing_ns.load(std::memory_order_relaxed) - packing_start_;
    c.ns[i].fetch_add(whole - inner_, std::memory_order_relaxed);
    c.packing[i].fetch_add(packing - inner_packing_, std::memory_order_relaxed);
    c.calls[i].fetch_add(1, std::memory_order_relaxed);
    if (flops_ != 0) detail::add(c.flops[i], flops_);
    if (bytes_ != 0) detail::add(c.bytes[i], bytes_);
    if (phase_ == Phase::step) c.step_ns.fetch_add(whole, std::memory_order_relaxed);
    current() = parent_;
    if (parent_) {
      parent_->inner_ += whole;
      parent_->inner_packing_ += packing;
    }
  }

 private:
  static Scope*& current() {
    thread_local Scope* top = nullptr;
    return top;
  }
  Phase phase_{};
  double flops_ = 0, bytes_ = 0;
  std::int64_t start_ = -1, inner_ = 0, packing_start_ = 0, inner_packing_ = 0;
  Scope* parent_ = nullptr;
};

/// Runs pack(), a GEMM thread's packing of an operand block, timing it when profiling is on:
/// thread time, summed over the threads of every GEMM.
template <class Pack>
void packing(Pack&& pack) {
  if (!enabled()) return pack();
  const std::int64_t start = detail::now_ns();
  pack();
  detail::counters().packing_ns.fetch_add(detail::now_ns() - start, std::memory_order_relaxed);
}

inline Totals totals() {
  const auto& c = detail::counters();
  Totals t;
  for (std::size_t i = 0; i < phase_count; ++i) {
    t.seconds[i] = 1e-9 * static_cast<double>(c.ns[i].load());
    t.calls[i] = c.calls[i].load();
    t.flops[i] = c.flops[i].load();
    t.bytes[i] = c.bytes[i].load();
    t.packing_thread_seconds_of[i] = 1e-9 * static_cast<double>(c.packing[i].load());
  }
  t.packing_thread_seconds = 1e-9 * static_cast<double>(c.packing_ns.load());
  t.step_seconds = 1e-9 * static_cast<double>(c.step_ns.load());
  t.steps = t.calls[static_cast<std::size_t>(Phase::step)];
  return t;
}

/// What the machine can do, measured by the same process (backend/cpu/probes.hpp on the
/// CPU): the GEMM rate in the step's storage type and the memory bandwidth (read + written).
struct Peaks {
  double gemm_flops_per_s = 0;
  double bytes_per_s = 0;
  int threads = 1;
};

/// The profile as a table per step: each phase's seconds, share of the step, calls, the
/// packing inside it (thread time over the threads), and its rate (GFLOP/s or GB/s) as a
/// share of the peak it is bound by; then the GEMMs together and the step's rate against
/// the GEMM peak. `step_flops` is the step's arithmetic as the model counts it (0: the
/// phases' sum).
inline std::string table(const Totals& t, const Peaks& peak, double step_flops = 0) {
  std::string out;
  char line[256];
  const double steps = t.steps > 0 ? static_cast<double>(t.steps) : 1.0;
  const double step = t.step_seconds / steps, threads = std::max(peak.threads, 1);
  const auto row = [&](std::string_view name, double s, double calls, double packing, double rate,
                       double of_peak, const char* unit) {
    const int w = static_cast<int>(name.size());
    const double share = step > 0 ? 100.0 * s / step : 0;
    char pack[16] = "";
    if (packing > 0) std::snprintf(pack, sizeof pack, "%.3f", packing);
    if (rate > 0)
      std::snprintf(line, sizeof line,
                    "| %-44.*s | %7.3f | %5.1f %% | %5.0f | %7s | %6.1f %s | %5.1f %% |\n", w,
                    name.data(), s, share, calls, pack, rate, unit, of_peak);
    else
      std::snprintf(line, sizeof line,
                    "| %-44.*s | %7.3f | %5.1f %% | %5.0f | %7s | %14s | %7s |\n", w, name.data(),
                    s, share, calls, pack, "", "");
    out += line;
  };
  out +=
      "| phase, per step                              |       s |   share | calls | packing |      "
      "     rate | of peak |\n";
  out +=
      "| -------------------------------------------- | ------: | ------: | ----: | ------: | "
      "-------------: | ------: |\n";
  double gemm_s = 0, gemm_flops = 0, all_flops = 0;
  for (std::size_t i = 0; i < phase_count; ++i) {
    const PhaseInfo& p = phases[i];
    const double s = t.seconds[i] / steps, calls = static_cast<double>(t.calls[i]) / steps;
    const double flops = t.flops[i] / steps, bytes = t.bytes[i] / steps;
    const double packing = t.packing_thread_seconds_of[i] / steps / threads;
    all_flops += flops;
    if (i == static_cast<std::size_t>(Phase::step)) continue;
    if (calls == 0) continue;
    if (p.bound == Bound::gemm && i <= static_cast<std::size_t>(Phase::lm_head_backward)) {
      gemm_s += s;
      gemm_flops += flops;
    }
    if (flops > 0 && s > 0)
      row(p.name, s, calls, packing, 1e-9 * flops / s, 100.0 * flops / s / peak.gemm_flops_per_s,
          "GFLOP/s");
    else if (bytes > 0 && s > 0)
      row(p.name, s, calls, packing, 1e-9 * bytes / s, 100.0 * bytes / s / peak.bytes_per_s,
          "GB/s   ");
    else
      row(p.name, s, calls, packing, 0, 0, "");
  }
  const auto step_index = static_cast<std::size_t>(Phase::step);
  row("other (the step outside every phase)", t.seconds[step_index] / steps, 0, 0, 0, 0, "");
  const double packing = t.packing_thread_seconds / steps / threads;
  std::snprintf(
      line, sizeof line,
      "\nGEMMs (the GEMM rows): %.3f s a step, %.1f %%, at %.1f GFLOP/s: %.1f %% of the GEMM "
      "probe's %.1f\n",
      gemm_s, step > 0 ? 100.0 * gemm_s / step : 0, gemm_s > 0 ? 1e-9 * gemm_flops / gemm_s : 0,
      gemm_s > 0 ? 100.0 * gemm_flops / gemm_s / peak.gemm_flops_per_s : 0,
      1e-9 * peak.gemm_flops_per_s);
  out += line;
  std::snprintf(
      line, sizeof line,
      "packing in all: %.3f s a step (thread time over %d threads), %.1f %% of the GEMMs' "
      "time\n",
      packing, peak.threads, gemm_s > 0 ? 100.0 * packing / gemm_s : 0);
  out += line;
  const double flops = step_flops > 0 ? step_flops : all_flops;
  std::snprintf(
      line, sizeof line,
      "step: %.3f s, %.1f GFLOP/s, %.1f %% of the GEMM probe; the memory probe %.1f GB/s\n", step,
      step > 0 ? 1e-9 * flops / step : 0,
      step > 0 ? 100.0 * flops / step / peak.gemm_flops_per_s : 0, 1e-9 * peak.bytes_per_s);
  out += line;
  return out;
}

}  // namespace seqpar::inline v0::profile

#pragma once
// Learning-rate schedules: linear warmup, then constant, linear or cosine decay.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>

namespace seqpar::inline v0 {

enum class LrDecay : std::uint8_t { constant, linear, cosine };

/// lr(step) for optimizer steps 0, 1, 2, ...: peak * step / warmup during warmup, then a
/// decay to min_ratio * peak at total_steps (the schedules of Hugging Face's
/// get_{linear,cosine}_schedule_with_warmup; with warmup > 0 step 0 runs at lr 0).
struct LrSchedule {
  double peak = 1e-4;
  std::int64_t warmup = 0;
  std::int64_t total = 0;  // 0 with a decay: no decay (constant after warmup)
  LrDecay decay = LrDecay::linear;
  double min_ratio = 0.0;

  double at(std::int64_t step) const {
    if (step < warmup)
      return peak * static_cast<double>(step) /
             static_cast<double>(std::max<std::int64_t>(1, warmup));
    if (decay == LrDecay::constant || total <= warmup) return peak;
    const double progress = std::clamp(
        static_cast<double>(step - warmup) / static_cast<double>(total - warmup), 0.0, 1.0);
    const double f = decay == LrDecay::linear ? 1.0 - progress
                                              : 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
    return peak * (min_ratio + (1.0 - min_ratio) * f);
  }
};

}  // namespace seqpar::inline v0

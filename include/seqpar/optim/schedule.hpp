#pragma once
// Learning-rate schedules: linear or logarithmic warmup, then constant, linear or cosine decay.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>

namespace seqpar::inline v0 {

enum class LrDecay : std::uint8_t { constant, linear, cosine };

/// How the rate climbs during warmup: linearly (step / warmup, Hugging Face's schedules
/// and DeepSpeed's warmup_type "linear"), or as log(step + 1) / log(warmup) (DeepSpeed
/// WarmupLR's default, warmup_type "log").
enum class LrWarmup : std::uint8_t { linear, log };

/// lr(step) for optimizer steps 0, 1, 2, ...: from min_ratio * peak up to peak during
/// warmup, then a decay to min_ratio * peak at total_steps (the schedules of Hugging
/// Face's get_{linear,cosine}_schedule_with_warmup, where min_ratio is 0 and step 0 runs at
/// lr 0; DeepSpeed's WarmupLR and WarmupDecayLR, where min_ratio is warmup_min_lr /
/// warmup_max_lr).
struct LrSchedule {
  double peak = 1e-4;       // learning_rate
  std::int64_t warmup = 0;  // warmup_steps
  std::int64_t total = 0;   // where the decay ends; 0: none (constant after warmup)
  LrDecay decay = LrDecay::linear;
  double min_ratio = 0.0;  // warmup_min_lr / peak: where warmup starts and decay ends
  LrWarmup warmup_shape = LrWarmup::linear;

  double at(std::int64_t step) const {
    if (step < warmup) {
      const double w = static_cast<double>(std::max<std::int64_t>(1, warmup));
      // floor + (peak - floor) * num / den: with floor 0 and a linear warmup exactly
      // peak * step / warmup. A log warmup over one step would divide by log(1) = 0: it is
      // linear there.
      const bool log = warmup_shape == LrWarmup::log && warmup > 1;
      const double num = log ? std::log(static_cast<double>(step + 1)) : static_cast<double>(step);
      const double den = log ? std::log(w) : w;
      const double floor = peak * min_ratio;
      return floor + (peak - floor) * num / den;
    }
    if (decay == LrDecay::constant || total <= warmup) return peak;
    const double progress = std::clamp(
        static_cast<double>(step - warmup) / static_cast<double>(total - warmup), 0.0, 1.0);
    const double f = decay == LrDecay::linear ? 1.0 - progress
                                              : 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
    return peak * (min_ratio + (1.0 - min_ratio) * f);
  }
};

}  // namespace seqpar::inline v0

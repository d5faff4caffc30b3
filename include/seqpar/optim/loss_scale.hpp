#pragma once
// Loss scaling (optim/ as DESIGN.md places it): LossScaleOptions, the scale's state from step
// to step, and LossScaler's verdict on each step (take, overflow, fault) with its unscaling
// and clipping of the gradients.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <type_traits>

#include "seqpar/backend/device.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::inline v0 {

/// Loss scaling at run time, with the fields and defaults of DeepSpeed's `fp16` config
/// block. Whether the loss is scaled at all is the precision's default (Fp16Mixed: yes;
/// Fp32, Fp64, Bf16Mixed: no, a constant scale of 1) unless `enabled` says otherwise; a
/// scaled fp32 loss is what lets the CPU test the whole skipping path.
struct LossScaleOptions {
  std::optional<bool> enabled = {};       // unset: Precision::loss_scaling
  double loss_scale = 0;                  // 0: dynamic; > 0: a static scale that never changes
  std::int64_t initial_scale_power = 16;  // the dynamic scale starts at 2^initial_scale_power
  std::int64_t loss_scale_window = 1000;  // clean steps since the last overflow before it doubles
  std::int64_t hysteresis = 2;            // overflows it takes before the scale halves
  bool consecutive_hysteresis = false;    // refill the hysteresis on every clean step
  double min_loss_scale = 1;              // the floor; an overflow there is a fault

  double initial_scale() const {
    return loss_scale > 0 ? loss_scale : std::ldexp(1.0, static_cast<int>(initial_scale_power));
  }
  /// Throws naming the field when a value is not one a scaler can run with.
  void validate() const {
    SEQPAR_CHECK(std::isfinite(loss_scale) && loss_scale >= 0, "LossScaleOptions::loss_scale is ",
                 loss_scale, "; expected 0 (dynamic) or a finite static scale above 0");
    SEQPAR_CHECK(initial_scale_power >= -1000 && initial_scale_power <= 1000,
                 "LossScaleOptions::initial_scale_power is ", initial_scale_power,
                 "; expected an exponent a double holds (-1000 to 1000)");
    SEQPAR_CHECK(loss_scale_window >= 1, "LossScaleOptions::loss_scale_window is ",
                 loss_scale_window, "; expected at least 1 clean step");
    SEQPAR_CHECK(hysteresis >= 1, "LossScaleOptions::hysteresis is ", hysteresis,
                 "; expected at least 1 (1: the first overflow halves the scale)");
    SEQPAR_CHECK(std::isfinite(min_loss_scale) && min_loss_scale > 0,
                 "LossScaleOptions::min_loss_scale is ", min_loss_scale,
                 "; expected a finite scale above 0");
    SEQPAR_CHECK(loss_scale > 0 || initial_scale() >= min_loss_scale,
                 "LossScaleOptions: the initial scale 2^", initial_scale_power,
                 " is below min_loss_scale = ", min_loss_scale);
  }
};

/// What a step's loss and gradient norm allow (StepGuard::update).
enum class StepVerdict : std::uint8_t {
  take,      // both finite: the optimizer steps
  overflow,  // loss scaling: a finite loss whose scaled gradients overflowed; the scaler adapts
  fault,     // a non-finite loss, or a non-finite gradient norm no loss scale explains
};

/// The gradient each token's loss starts from in storage type T: the loss scale over the
/// token count, rounded to T once. In fp32 and fp64 it is 1/targets times the scale, so
/// that a power-of-two scale changes no bit of the unscaled result; a 16-bit T holds
/// neither every count (bf16 rounds 257 to 256) nor a count past 65504 (fp16), so its
/// quotient is taken in double (in fp16 it is subnormal past 16384 targets unscaled).
template <class T>
T loss_gradient(double scale, std::int64_t targets) {
  if (targets <= 0) return T(0);
  if constexpr (!std::is_same_v<StatScalar<T>, T>)
    return static_cast<T>(scale / static_cast<double>(targets));
  else
    return T(1) / static_cast<T>(targets) * static_cast<T>(scale);
}

/// A step's loss scaling: the gradient its token losses start from, and the factor that
/// brings the model's gradients back to those of the token-mean loss (StepGuard::scaling).
template <class T>
struct LossScaling {
  double scale = 1;    // the loss scale this step uses
  T loss_gradient{};   // loss_gradient<T>(scale, targets)
  double unscale = 1;  // the model's gradients are `unscale` times the token mean's
};

/// What a step does with its reduced gradients once its loss and norm are known
/// (StepGuard::judge): nothing unless taken; a float or double model multiplies them by
/// `factor[0..factors)` in turn, exactly; a 16-bit model's optimizer multiplies them by
/// `grad_factor` while it updates the master weights.
template <class T>
struct GradientUpdate {
  StepVerdict verdict = StepVerdict::take;
  int factors = 0;
  T factor[2]{};
  double grad_factor = 1;
  bool take() const { return verdict == StepVerdict::take; }
};

/// Everything a StepGuard carries from step to step (checkpoints save all of it).
struct LossScaleState {
  double scale = 1;
  std::int64_t clean_steps = 0;    // clean steps since the last overflow (or the start)
  std::int64_t hysteresis = 1;     // overflows left before the scale halves
  std::int64_t skipped_steps = 0;  // steps skipped so far, for any reason
  std::int64_t faults_in_a_row = 0;
};

/// The one home of a step's loss-scale decisions: the loss gradient and its unscaling
/// (scaling), whether the update is made (update: a step whose loss or gradient norm is not
/// finite is skipped), the fault stop and the clipping (judge). Its dynamic scale follows
/// DeepSpeed's DynamicLossScaler.update_scale step for step; where it differs, and why, is
/// docs/reliability.md's "Loss scaling". `scaled_by_default`: whether the loss is scaled when
/// LossScaleOptions::enabled is unset (the precision's default).
class LossScaler {
 public:
  explicit LossScaler(const LossScaleOptions& o, bool scaled_by_default) : opts_(o) {
    opts_.validate();
    scaled_ = opts_.enabled.value_or(scaled_by_default);
    SEQPAR_CHECK(scaled_ || opts_.loss_scale == 0, "LossScaleOptions::loss_scale is ",
                 opts_.loss_scale,
                 " but loss scaling is off for this precision; set LossScaleOptions::enabled "
                 "to scale the loss");
    state_.scale = scaled_ ? opts_.initial_scale() : 1.0;
    state_.hysteresis = opts_.hysteresis;
  }

  /// Whether the loss is scaled (by a dynamic or a static scale).
  bool scaled() const { return scaled_; }
  /// Whether the scale changes with overflows.
  bool dynamic() const { return scaled_ && opts_.loss_scale == 0; }
  const LossScaleOptions& options() const { return opts_; }
  double value() const { return state_.scale; }
  /// Clean steps since the last overflow (0 without loss scaling).
  std::int64_t clean_steps() const { return state_.clean_steps; }
  /// Overflows left before the scale halves.
  std::int64_t hysteresis_left() const { return state_.hysteresis; }
  /// Steps skipped so far, for any reason.
  std::int64_t skipped_steps() const { return state_.skipped_steps; }
  /// Faults in a row up to the last step (0 after a step that was taken or overflowed).
  std::int64_t faults_in_a_row() const { return state_.faults_in_a_row; }
  const LossScaleState& state() const { return state_; }
  /// Resumes a saved state (checkpoints).
  void restore(const LossScaleState& s) { state_ = s; }

  /// After a step's loss and gradients are known (the same on every rank): whether to
  /// take the step.
  StepVerdict update(double loss, double grad_norm) {
    StepVerdict v = StepVerdict::take;
    if (!std::isfinite(loss))
      v = StepVerdict::fault;
    else if (!std::isfinite(grad_norm))
      v = can_adapt() ? StepVerdict::overflow : StepVerdict::fault;
    if (v != StepVerdict::take) {
      ++state_.skipped_steps;
      state_.faults_in_a_row = v == StepVerdict::fault ? state_.faults_in_a_row + 1 : 0;
    } else {
      state_.faults_in_a_row = 0;
    }
    if (!dynamic() || v == StepVerdict::fault) return v;
    if (v == StepVerdict::overflow) {
      if (state_.hysteresis > 1)
        --state_.hysteresis;
      else
        state_.scale = std::max(state_.scale / 2, opts_.min_loss_scale);
      state_.clean_steps = 0;
    } else {
      ++state_.clean_steps;
      if (opts_.consecutive_hysteresis) state_.hysteresis = opts_.hysteresis;
      // DeepSpeed's "stable interval": the clean steps before this one since the last
      // overflow; a whole number of windows of them doubles the scale.
      if (const std::int64_t stable = state_.clean_steps - 1;
          stable > 0 && stable % opts_.loss_scale_window == 0) {
        state_.hysteresis = opts_.hysteresis;
        state_.scale *= 2;
      }
    }
    return v;
  }

  /// The loss scaling of a step over `targets` tokens in storage type T.
  template <class T>
  LossScaling<T> scaling(std::int64_t targets) const {
    LossScaling<T> s;
    s.scale = value();
    s.loss_gradient = loss_gradient<T>(s.scale, targets);
    if constexpr (std::is_same_v<StatScalar<T>, T>)
      s.unscale = 1.0 / s.scale;
    else if (targets > 0)
      s.unscale = 1.0 / (static_cast<double>(s.loss_gradient) * static_cast<double>(targets));
    return s;
  }

  /// After the step's loss and (unscaled) gradient norm are known, the same on every rank:
  /// the verdict (update()), and for a step taken the unscaling and clipping of its
  /// gradients. Clipping is torch.nn.utils.clip_grad_norm_'s: a factor max_grad_norm /
  /// (norm + 1e-6) when below 1 (max_grad_norm <= 0: none). A float model's scaled
  /// gradients are unscaled first, by their own product: exact for a power-of-two scale
  /// (even one whose inverse is subnormal), so the clipping and the update that follow have
  /// the bits of an unscaled run. Throws, naming `step`, after `max_faults` faults in a row.
  template <class T>
  GradientUpdate<T> judge(double loss, double norm, const LossScaling<T>& s, double max_grad_norm,
                          std::int64_t step, std::int64_t max_faults) {
    GradientUpdate<T> g;
    g.verdict = update(loss, norm);
    // (A NaN's sign bit means nothing; printed without it.)
    SEQPAR_CHECK(state_.faults_in_a_row < max_faults, "step ", step, ": the loss (",
                 std::isnan(loss) ? std::fabs(loss) : loss, ") or the gradient norm (",
                 std::isnan(norm) ? std::fabs(norm) : norm, ") was not finite in ",
                 state_.faults_in_a_row,
                 " steps in a row (TrainOptions::max_nonfinite_steps = ", max_faults,
                 "); no update was made in them. Training stops: lower the learning rate or check "
                 "the data and the weights");
    if (!g.take()) return g;
    const double coef = max_grad_norm / (norm + 1e-6);
    const bool clip = max_grad_norm > 0 && coef < 1.0;
    if constexpr (!std::is_same_v<StatScalar<T>, T>) {
      g.grad_factor = s.unscale;
      if (clip) g.grad_factor *= coef;
    } else {
      if (s.scale != 1.0) g.factor[g.factors++] = static_cast<T>(s.unscale);
      if (clip) g.factor[g.factors++] = static_cast<T>(coef);
    }
    return g;
  }

 private:
  // Whether an overflow is the scaler's to answer: a dynamic scale with hysteresis left,
  // or one above its floor.
  bool can_adapt() const {
    return dynamic() && (state_.hysteresis > 1 || state_.scale > opts_.min_loss_scale);
  }

  LossScaleOptions opts_;
  bool scaled_ = false;
  LossScaleState state_;
};

}  // namespace seqpar::inline v0

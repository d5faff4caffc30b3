#pragma once
// Precision policies: the dtype of weights, activations and gradients in the model, the
// type of the optimizer's master weights and moments, and whether the loss is scaled.
// The storage type of a dtype belongs to the device (StorageOf<Device, DType>): bf16 and
// fp16 exist on Cuda; asking for them on the CPU stops the build with a message.

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>

#include "seqpar/backend/device.hpp"
#include "seqpar/core/dtype.hpp"

namespace seqpar::inline v0 {

/// fp32 everywhere.
struct Fp32 {
  static constexpr DType dtype = DType::f32;
  static constexpr bool loss_scaling = false;
};
/// fp64 everywhere (CPU only): gradient checks and references.
struct Fp64 {
  static constexpr DType dtype = DType::f64;
  static constexpr bool loss_scaling = false;
};
/// bf16 weights, activations and gradients in the model; fp32 master weights and AdamW
/// moments in the optimizer; layernorm statistics, ALiBi positions and slopes and the
/// softmax statistics of the loss in fp32. No loss scaling (bf16 has fp32's range).
struct Bf16Mixed {
  static constexpr DType dtype = DType::bf16;
  static constexpr bool loss_scaling = false;
};
/// As Bf16Mixed in fp16, with dynamic loss scaling: the loss gradient is multiplied by
/// the scale and the gradients divided by it before clipping; a step whose gradient norm
/// is not finite is skipped and the scale halved (StepGuard); after `loss_scale_window` clean steps
/// in a row the scale doubles (torch.cuda.amp.GradScaler's defaults).
struct Fp16Mixed {
  static constexpr DType dtype = DType::f16;
  static constexpr bool loss_scaling = true;
  static constexpr double initial_loss_scale = 65536.0;
  static constexpr std::int64_t loss_scale_window = 2000;
};

/// A precision policy: a model dtype and whether the loss is scaled (then also its
/// initial scale and growth window).
template <class P>
concept Precision = requires {
  { P::dtype } -> std::convertible_to<DType>;
  { P::loss_scaling } -> std::convertible_to<bool>;
}
&&(!P::loss_scaling || requires {
  { P::initial_loss_scale } -> std::convertible_to<double>;
  { P::loss_scale_window } -> std::convertible_to<std::int64_t>;
});

/// The type policy P stores model tensors in on device D.
template <Precision P, Device D>
using ComputeType = typename StorageOf<D, P::dtype>::type;

/// What a step's loss and gradient norm allow (StepGuard::update).
enum class StepVerdict : std::uint8_t {
  take,      // both finite: the optimizer steps
  overflow,  // loss scaling: a finite loss whose scaled gradients overflowed; the scale halves
  fault,     // a non-finite loss, or a non-finite gradient norm no loss scale explains
};

/// The one place that decides whether a step's update is made, for every precision
/// policy: a step whose loss or gradient norm is not finite is skipped. It also keeps the
/// run's loss scale (a constant 1 for policies without loss scaling; for the others the
/// dynamic scale described at Fp16Mixed) and counts the skipped steps. A non-finite
/// gradient norm under loss scaling is an overflow while the scale can still halve, and a
/// fault once it is at its floor; a non-finite loss is always a fault (no scale changes it).
template <Precision P>
class StepGuard {
 public:
  /// The smallest loss scale; an overflow at this scale is a fault.
  static constexpr double min_scale = 1.0 / 65536.0;

  double value() const { return scale_; }
  /// Clean steps in a row since the scale last changed (0 without loss scaling).
  std::int64_t clean_steps() const { return clean_; }
  /// Steps skipped so far, for any reason.
  std::int64_t skipped_steps() const { return skipped_; }
  /// Faults in a row up to the last step (0 after a step that was taken or overflowed).
  std::int64_t faults_in_a_row() const { return faults_in_a_row_; }
  /// Resumes a saved scale (checkpoints).
  void restore(double scale, std::int64_t clean_steps) {
    scale_ = scale;
    clean_ = clean_steps;
  }

  /// After a step's loss and gradients are known (the same on every rank): whether to
  /// take the step.
  StepVerdict update(double loss, double grad_norm) {
    StepVerdict v = StepVerdict::take;
    if (!std::isfinite(loss))
      v = StepVerdict::fault;
    else if (!std::isfinite(grad_norm))
      v = P::loss_scaling && scale_ > min_scale ? StepVerdict::overflow : StepVerdict::fault;
    if (v != StepVerdict::take) {
      ++skipped_;
      faults_in_a_row_ = v == StepVerdict::fault ? faults_in_a_row_ + 1 : 0;
    } else {
      faults_in_a_row_ = 0;
    }
    if constexpr (P::loss_scaling) {
      if (v == StepVerdict::overflow) {
        scale_ = std::max(scale_ * 0.5, min_scale);
        clean_ = 0;
      } else if (v == StepVerdict::take && ++clean_ >= P::loss_scale_window) {
        scale_ *= 2.0;
        clean_ = 0;
      }
    }
    return v;
  }

 private:
  double scale_ = initial();
  std::int64_t clean_ = 0;
  std::int64_t skipped_ = 0;
  std::int64_t faults_in_a_row_ = 0;

  static constexpr double initial() {
    if constexpr (P::loss_scaling)
      return P::initial_loss_scale;
    else
      return 1.0;
  }
};

}  // namespace seqpar::inline v0

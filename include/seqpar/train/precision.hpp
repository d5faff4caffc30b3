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
/// is not finite is skipped and the scale halved; after `loss_scale_window` clean steps
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

/// The loss scale of a run: a constant 1 for policies without loss scaling; for the
/// others the dynamic scale described at Fp16Mixed.
template <Precision P>
class LossScale {
 public:
  double value() const { return scale_; }
  /// Clean steps in a row since the scale last changed (0 without loss scaling).
  std::int64_t clean_steps() const { return clean_; }
  /// Resumes a saved scale (checkpoints).
  void restore(double scale, std::int64_t clean_steps) {
    scale_ = scale;
    clean_ = clean_steps;
  }
  /// After a step's gradients are known: whether to take the step. A non-finite gradient
  /// norm skips it (policies with loss scaling only) and halves the scale.
  bool update(double grad_norm) {
    if constexpr (!P::loss_scaling) {
      return true;
    } else {
      if (!std::isfinite(grad_norm)) {
        scale_ = std::max(scale_ * 0.5, 1.0 / 65536.0);
        clean_ = 0;
        return false;
      }
      if (++clean_ >= P::loss_scale_window) {
        scale_ *= 2.0;
        clean_ = 0;
      }
      return true;
    }
  }

 private:
  double scale_ = initial();
  std::int64_t clean_ = 0;

  static constexpr double initial() {
    if constexpr (P::loss_scaling)
      return P::initial_loss_scale;
    else
      return 1.0;
  }
};

}  // namespace seqpar::inline v0

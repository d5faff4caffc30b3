#pragma once
// Precision policies: the dtype of weights, activations and gradients in the model, the
// type of the optimizer's master weights and moments, and whether the loss is scaled by
// default; StepGuard: the loss scaler (optim/loss_scale.hpp) with the precision's default.
// The storage type of a dtype belongs to the device (StorageOf<Device, DType>): bf16 and
// fp16 exist on Cpu (the host bit types, fp32 arithmetic) and on Cuda.

#include <concepts>
#include <cstdint>
#include <type_traits>

#include "seqpar/backend/device.hpp"
#include "seqpar/core/dtype.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/optim/loss_scale.hpp"

namespace seqpar::inline v0 {

/// A precision of model dtype `D`, its loss scaled by default or not.
template <DType D, bool Scaled>
struct PrecisionOf {
  static constexpr DType dtype = D;
  static constexpr bool loss_scaling = Scaled;
};

/// fp32 everywhere.
struct Fp32 : PrecisionOf<DType::f32, false> {};
/// fp64 everywhere (CPU only): gradient checks and references.
struct Fp64 : PrecisionOf<DType::f64, false> {};
/// bf16 weights, activations and gradients in the model; fp32 master weights and AdamW
/// moments in the optimizer; layernorm statistics, ALiBi positions and slopes and the
/// softmax statistics of the loss in fp32. No loss scaling by default (bf16 has fp32's
/// range); LossScaleOptions::enabled asks for it.
struct Bf16Mixed : PrecisionOf<DType::bf16, false> {};
/// As Bf16Mixed in fp16, with dynamic loss scaling by default: the loss gradient is
/// multiplied by the scale and the gradients divided by it before clipping; a step whose
/// gradient norm is not finite is skipped and the scale lowered, and it grows again after
/// a window of clean steps (StepGuard, configured by LossScaleOptions as DeepSpeed's fp16
/// block is).
struct Fp16Mixed : PrecisionOf<DType::f16, true> {};

/// A precision policy: a model dtype and whether the loss is scaled by default.
template <class P>
concept Precision = requires {
  { P::dtype } -> std::convertible_to<DType>;
  { P::loss_scaling } -> std::convertible_to<bool>;
};

/// The type policy P stores model tensors in on device D.
template <Precision P, Device D>
using ComputeType = typename StorageOf<D, P::dtype>::type;

/// A step's loss-scale decisions under precision P: a LossScaler whose loss is scaled by
/// default as P says (Fp16Mixed: yes; the others: no, unless LossScaleOptions::enabled).
template <Precision P>
class StepGuard : public LossScaler {
 public:
  explicit StepGuard(const LossScaleOptions& o = {}) : LossScaler(o, P::loss_scaling) {}
};

}  // namespace seqpar::inline v0

#pragma once
// Precision policies: the compute type of weights, activations and gradients, and
// whether the loss is scaled.

namespace seqpar::inline v0 {

/// fp32 everywhere.
struct Fp32 {
  using compute = float;
  static constexpr bool loss_scaling = false;
};
/// fp64 everywhere (CPU only): gradient checks and references.
struct Fp64 {
  using compute = double;
  static constexpr bool loss_scaling = false;
};

template <class P>
concept Precision = requires { typename P::compute; P::loss_scaling; };

}  // namespace seqpar::inline v0

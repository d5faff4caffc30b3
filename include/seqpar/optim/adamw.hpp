#pragma once
// AdamW with decoupled weight decay over flat parameter ranges. Decay applies only to
// the tensors the parameter table marks (matrices), as the Hugging Face Trainer does.

#include <cmath>
#include <cstdint>
#include <vector>

#include "seqpar/backend/device.hpp"
#include "seqpar/backend/kernels.hpp"
#include "seqpar/core/arena.hpp"
#include "seqpar/nn/params.hpp"

namespace seqpar::inline v0 {

/// AdamW hyperparameters (torch.optim.AdamW's meaning).
struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
};

/// Per-step coefficients for optimizer step t (1-based) at learning rate lr.
inline kernels::AdamCoeffs adam_coeffs(const AdamWConfig& c, double lr, std::int64_t t) {
  const double bc1 = 1.0 - std::pow(c.beta1, static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(c.beta2, static_cast<double>(t));
  return {static_cast<float>(lr), static_cast<float>(c.beta1), static_cast<float>(c.beta2),
          static_cast<float>(c.eps), static_cast<float>(c.weight_decay), static_cast<float>(lr / bc1),
          static_cast<float>(std::sqrt(bc2))};
}

/// Moments for the elements [begin, end) of one unit's flat buffer.
template <class T, class ArenaT>
struct AdamState {
  std::int64_t begin = 0, end = 0;
  Buffer<T, ArenaT> m, v;
};

/// Applies AdamW to elements [s.begin, s.end) of unit `u`: p and g point at element
/// s.begin. The range may cut through tensors (a ZeRO shard); each piece gets its
/// tensor's decay flag.
template <Device D, class T, class ArenaT>
void adamw_update(T* p, const T* g, AdamState<T, ArenaT>& s, const UnitTable& u, const kernels::AdamCoeffs& c) {
  for (const auto& spec : u.params) {
    const std::int64_t lo = std::max(s.begin, spec.offset), hi = std::min(s.end, spec.offset + spec.numel());
    if (lo >= hi) continue;
    const std::int64_t k = lo - s.begin;
    Ops<D>::adamw(p + k, g + k, s.m.data() + k, s.v.data() + k, hi - lo, c, spec.decay);
  }
}

}  // namespace seqpar::inline v0

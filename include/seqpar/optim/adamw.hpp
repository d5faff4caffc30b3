#pragma once
// AdamW with decoupled weight decay over flat parameter ranges. Decay applies only to
// the tensors the parameter table marks (matrices), as the Hugging Face Trainer does.
// For 16-bit models the optimizer keeps fp32 master weights and moments (adamw_mixed):
// the model's 16-bit weights are a rounded copy of the master, remade every step.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "seqpar/backend/device.hpp"
#include "seqpar/backend/kernels.hpp"
#include "seqpar/config/units.hpp"
#include "seqpar/core/arena.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/optim/segments.hpp"

namespace seqpar::inline v0 {

/// AdamW hyperparameters (torch.optim.AdamW's meaning).
struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
};

/// Per-step coefficients for optimizer step t (1-based) at learning rate lr.
inline kernels::AdamCoeffs adam_coeffs(const AdamWConfig& c, double lr, std::int64_t t) {
  const double bc1 = 1.0 - std::pow(c.beta1, static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(c.beta2, static_cast<double>(t));
  return {static_cast<float>(lr),
          static_cast<float>(c.beta1),
          static_cast<float>(c.beta2),
          static_cast<float>(c.eps),
          static_cast<float>(c.weight_decay),
          static_cast<float>(lr / bc1),
          static_cast<float>(std::sqrt(bc2))};
}

/// Optimizer state for the elements [begin, end) of one unit's flat buffer, in the
/// device memory of the arena: moments m and v and, for 16-bit weights, the fp32 master
/// weights (Master is float then; for float and double weights it is T and `master` stays
/// empty: the weights are their own master).
template <class T, class ArenaT>
struct AdamState {
  using Master = StatScalar<T>;
  static constexpr bool mixed = !std::is_same_v<Master, T>;
  std::int64_t begin = 0, end = 0;
  Buffer<Master, ArenaT> m, v;
  Buffer<Master, ArenaT> master{};
};

/// Makes s the zero state of elements [begin, end) of a unit, `size` elements long (a
/// padded shard may be longer than the range); `p` (device memory) holds the weights of
/// the range, which become the master weights of a mixed state.
template <Device D, class T, class ArenaT>
void adam_init(AdamState<T, ArenaT>& s, ArenaT& arena, std::int64_t begin, std::int64_t end,
               std::int64_t size, const T* p) {
  using M = typename AdamState<T, ArenaT>::Master;
  s.begin = begin;
  s.end = end;
  s.m = Buffer<M, ArenaT>(arena, static_cast<std::size_t>(size), Memory::optimizer);
  s.v = Buffer<M, ArenaT>(arena, static_cast<std::size_t>(size), Memory::optimizer);
  if constexpr (AdamState<T, ArenaT>::mixed) {
    s.master = Buffer<M, ArenaT>(arena, static_cast<std::size_t>(size), Memory::optimizer);
    Ops<D>::convert(s.master.data(), p, size);
  }
}

/// Applies AdamW to elements [s.begin, s.end) of unit `u`: p and g point at element
/// s.begin. The range may cut through tensors (a ZeRO shard); each piece gets its
/// tensor's decay flag, and one call of the op covers the whole range (a multi-tensor
/// update). Gradients are multiplied by `grad_factor` first (a mixed state only: the
/// inverse loss scale and the clipping coefficient); a mixed state updates the master
/// weights and rounds them into p.
template <Device D, class T, class ArenaT>
void adamw_update(T* p, const T* g, AdamState<T, ArenaT>& s, const UnitTable& u,
                  const kernels::AdamCoeffs& c, double grad_factor = 1.0) {
  using M = typename AdamState<T, ArenaT>::Master;
  if constexpr (!AdamState<T, ArenaT>::mixed)
    SEQPAR_CHECK(grad_factor == 1.0, "adamw_update: a gradient factor (", grad_factor,
                 ") needs master weights; scale the gradients of a float or double model instead");
  for_each_segments<bool>(
      u, s.begin, s.end, [](const ParamSpec& spec) { return spec.decay; },
      [&](std::int64_t k, const kernels::Segments<bool>& decay) {
        if constexpr (AdamState<T, ArenaT>::mixed)
          Ops<D>::adamw_mixed(s.master.data() + k, p + k, g + k, s.m.data() + k, s.v.data() + k,
                              decay, c, static_cast<M>(grad_factor));
        else
          Ops<D>::adamw(p + k, g + k, s.m.data() + k, s.v.data() + k, decay, c);
      });
}

}  // namespace seqpar::inline v0

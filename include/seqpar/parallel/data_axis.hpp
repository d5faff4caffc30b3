#pragma once
// DataAxis<Policy, Stack, Device, T>: what the data-parallel ranks do with gradients, optimizer
// state and parameters; one specialisation per data-policy family under parallel/data/, all
// sharing DataAxisBase (axis_base.hpp).

#include "seqpar/backend/device.hpp"
#include "seqpar/parallel/policies.hpp"
#include "seqpar/parallel/unit_hooks.hpp"

namespace seqpar::inline v0 {

/// The data axis of a plan whose data policy is `Policy` (PlanTraits<Plan>::data), for a
/// stack of type Stack on device D with storage type T. Only the specialisations included
/// below exist; the primary template is what any other policy gets.
template <class Policy, UnitStore Stack, Device D, class T>
class DataAxis {
  static_assert(
      sizeof(Policy) == 0,
      "DataAxis<Policy, ...>: no data axis for this policy; a plan's data axis is Replicated<N>, "
      "Sharded<Zero1, N>, Sharded<Zero2, N> or Sharded<Zero3, N>.");
};

}  // namespace seqpar::inline v0

#define SEQPAR_PARALLEL_DATA_AXIS_INCLUDED
#include "seqpar/parallel/data/replicated.hpp"
#include "seqpar/parallel/data/zero12.hpp"
#include "seqpar/parallel/data/zero3.hpp"

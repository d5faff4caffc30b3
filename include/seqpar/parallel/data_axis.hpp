#pragma once
// DataAxis<Policy, Stack, Device, T>: what the data-parallel ranks do with gradients,
// optimizer state and parameters. One specialisation per family of the plan's data
// policy, each in a header of its own under parallel/data/: Replicated<N>
// (replicated.hpp), Sharded<Zero1 | Zero2, N> (zero12.hpp), Sharded<Zero3, N> (zero3.hpp);
// what they share is DataAxisBase (axis_base.hpp: the ranges, AdamW state, norm and
// checkpoint I/O), with the offload transfers as its member (gradient_downloads.hpp).
//
// The arena's categories: the shards a rank keeps are `parameters`, `gradients` (ZeRO-1's
// reduce-scatter target beside the model's whole gradients is a `buffers` block) and
// `optimizer`; ZeRO-2/3's full-size gradients of a unit and their reduced block exist only
// between the backward and the reduction (`unreduced_gradients`), ZeRO-3's full parameters
// only while a unit is used (`gathered_parameters`); both are 0 after a step.

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

#pragma once
// make_family_trainer's definition, included only by the units that instantiate a plan family's
// trainers, so that the families compile in units of their own.

#include <optional>
#include <type_traits>
#include <utility>

#include "seqpar/train/any_trainer.hpp"

namespace seqpar::inline v0 {

template <BloomModel M, Device Dev, Precision Prec, class Family>
std::optional<AnyTrainer> make_family_trainer(const PlanDesc& layout, AnyComm world,
                                              const TrainOptions& options) {
  std::optional<AnyTrainer> made;
  Family::with(layout, [&](auto plan) {
    using Plan = typename decltype(plan)::type;
    if constexpr (plan_fits<M, Plan>)
      made = AnyTrainer::make<M, Plan, Dev, Prec>(std::move(world), options);
  });
  return made;
}

}  // namespace seqpar::inline v0

#pragma once
// The definition of make_family_trainer (declared in train/any_trainer.hpp): the trainers of
// a plan family, instantiated for one model, device and precision. A program includes this
// header in the units that compile its families, one explicit instantiation each:
//
//   template std::optional<seqpar::AnyTrainer>
//   seqpar::make_family_trainer<Model, seqpar::Cpu, seqpar::Fp32, Family>(
//       const seqpar::PlanDesc&, seqpar::AnyComm, const seqpar::TrainOptions&);
//
// and calls make_trainer (any_trainer.hpp) from any other unit. A program of one unit
// includes it where it calls make_trainer.

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

#pragma once
// PlanDesc: a plan type (Replicated<4>, Hybrid<TP2, PP2, DP2>, ...) as run-time numbers,
// so that the planner and seqpar-plan can list, name and compare plans they have not been
// compiled for. PlanDesc::of<Plan>() maps a type to its description; the rules a PlanDesc
// is held to are plan/plan_rules.hpp's.

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "seqpar/parallel/plan.hpp"
#include "seqpar/parallel/policies.hpp"

namespace seqpar::inline v0 {

/// The degrees of a plan's three axes, its data policy and its pipeline schedule.
struct PlanDesc {
  int data = 1, tensor = 1, pipeline = 1;
  int zero_stage = 0;  // 0 Replicated, 1..3 Sharded<Zero1..3>
  bool gpipe = false;  // the pipeline schedule: GPipe, else OneFOneB

  int world_size() const { return data * tensor * pipeline; }
  bool operator==(const PlanDesc&) const = default;

  /// The description of a plan type whose degrees are static.
  template <ParallelPlan Plan>
  static constexpr PlanDesc of() {
    using P = PlanTraits<Plan>;
    static_assert(!P::dynamic_degree,
                  "PlanDesc::of<Plan>: every degree must be static (the planner needs numbers).");
    return {P::data_degree, P::tensor_degree, P::pipeline_degree, P::zero_stage,
            std::is_same_v<typename P::pipeline::schedule, GPipe>};
  }

  /// The plan's type as C++ spells it, canonically: one policy alone, else
  /// Hybrid<TensorSplit<t>, Pipeline<s, Schedule>, data policy> with the axes of degree 1
  /// left out (Replicated<1> when every degree is 1).
  std::string name() const {
    std::vector<std::string> axes;
    if (tensor > 1) axes.push_back("TensorSplit<" + std::to_string(tensor) + ">");
    if (pipeline > 1)
      axes.push_back("Pipeline<" + std::to_string(pipeline) + "," + (gpipe ? "GPipe" : "OneFOneB") +
                     ">");
    const std::string d = zero_stage == 0 ? "Replicated<" + std::to_string(data) + ">"
                                          : "Sharded<Zero" + std::to_string(zero_stage) + "," +
                                                std::to_string(data) + ">";
    if (data > 1 || zero_stage > 0 || axes.empty()) axes.push_back(d);
    if (axes.size() == 1) return axes[0];
    std::string s = "Hybrid<";
    for (std::size_t i = 0; i < axes.size(); ++i) s += (i ? "," : "") + axes[i];
    return s + ">";
  }
};

}  // namespace seqpar::inline v0

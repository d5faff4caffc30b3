#pragma once
// PlanDesc: a plan type (Replicated<4>, Hybrid<TP2, PP2, DP2>, ...) as run-time numbers,
// so that the planner and seqpar-plan can list, name and compare plans they have not been
// compiled for. PlanDesc::of<Plan>() maps a type to its description; enumerate_plans()
// lists every plan of a world size that CheckPlan accepts for a model, in the same words.

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "seqpar/config/bloom.hpp"
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

/// The rule of CheckPlan<M, Plan> that a plan breaks for a model of this shape, in the
/// words of its static_assert; empty when CheckPlan accepts it. (CheckPlan needs the model
/// and the plan as types; this is the same rules for numbers read at run time.)
inline std::string plan_rule_broken(const BloomConfig& m, const PlanDesc& p) {
  if (p.tensor < 1 || p.pipeline < 1 || p.data < 1)
    return "every degree must be at least 1 (a Trainer needs static tensor and pipeline degrees)";
  if (m.heads % p.tensor != 0)
    return "TensorSplit<N>: N must divide the number of attention heads (rule<" +
           std::to_string(m.heads) + ", " + std::to_string(p.tensor) + ">).";
  if (m.layers % p.pipeline != 0)
    return "Pipeline<S>: S must divide the number of layers (rule<" + std::to_string(m.layers) +
           ", " + std::to_string(p.pipeline) + ">).";
  if (p.zero_stage < 0 || p.zero_stage > 3)
    return "Sharded<Z, N>: Z must be Zero1, Zero2 or Zero3.";
  return {};
}

/// Every plan of `world` ranks that CheckPlan accepts for model m: each factorisation into
/// data x tensor x pipeline degrees, each data policy (Replicated, and Zero1/2/3 when the
/// data degree is above 1: over one rank they shard nothing), each pipeline schedule (when
/// there are stages). Ordered by tensor degree, then stages, then schedule, then policy.
inline std::vector<PlanDesc> enumerate_plans(const BloomConfig& m, int world) {
  std::vector<PlanDesc> out;
  for (int t = 1; t <= world; ++t) {
    if (world % t) continue;
    for (int s = 1; s <= world / t; ++s) {
      if ((world / t) % s) continue;
      const int d = world / t / s;
      for (const bool gpipe : {false, true}) {
        if (gpipe && s == 1) continue;
        for (int z = 0; z <= (d > 1 ? 3 : 0); ++z) {
          const PlanDesc p{d, t, s, z, gpipe};
          if (plan_rule_broken(m, p).empty()) out.push_back(p);
        }
      }
    }
  }
  return out;
}

}  // namespace seqpar::inline v0

#pragma once
// The plan rules on run-time numbers in one place (check_plan): whether a layout's degrees
// are valid, fit a world and the model, and are compiled in a program. CheckPlan
// (parallel/plan.hpp) holds plan types to the same model rules at compile time.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "seqpar/config/bloom.hpp"
#include "seqpar/parallel/plan.hpp"
#include "seqpar/plan/plan_desc.hpp"

namespace seqpar::inline v0 {

/// The rule a layout breaks (check_plan): the first of them in this order, or none.
enum class PlanRule : std::uint8_t {
  none,
  degrees,         // a degree below 1 (data: below 0, 0 being open), a ZeRO stage not 0 to 3
  world_size,      // a stated data degree whose ranks are not the world's
  world_multiple,  // an open data degree over a world that tensor x pipeline does not divide
  heads,           // a tensor degree that does not divide the model's attention heads
  layers,          // a number of stages that does not divide the model's layers
  not_compiled,    // not among the layouts the program compiled
};

/// What check_plan decided: the rule broken, and the layout as it runs (one stage is 1F1B;
/// an open data degree is what the world leaves, where the world allows one).
struct PlanCheck {
  PlanRule broken = PlanRule::none;
  PlanDesc layout;
  bool ok() const { return broken == PlanRule::none; }
};

/// Whether `a` and `b` are one layout, whatever their data degrees.
inline bool same_layout(const PlanDesc& a, const PlanDesc& b) {
  return a.tensor == b.tensor && a.pipeline == b.pipeline && a.gpipe == b.gpipe &&
         a.zero_stage == b.zero_stage;
}

/// Whether `compiled` (a program's layouts, data degrees open) holds the layout of `p`.
inline bool layout_compiled(const PlanDesc& p, const std::vector<PlanDesc>& compiled) {
  return std::any_of(compiled.begin(), compiled.end(),
                     [&](const PlanDesc& c) { return same_layout(c, p); });
}

/// The one decision whether layout `p` (its data degree 0: what the world leaves) runs model
/// `m` over `world` ranks in a program that compiled `compiled` (nullptr: any layout).
inline PlanCheck check_plan(PlanDesc p, int world, const BloomConfig& m,
                            const std::vector<PlanDesc>* compiled = nullptr) {
  const auto verdict = [&p](PlanRule r) { return PlanCheck{r, p}; };
  if (p.tensor < 1 || p.pipeline < 1 || p.data < 0 || p.zero_stage < 0 || p.zero_stage > 3)
    return verdict(PlanRule::degrees);
  if (p.pipeline == 1) p.gpipe = false;  // one stage has nothing to schedule
  const int others = p.tensor * p.pipeline;
  if (p.data > 0 && p.data * others != world) return verdict(PlanRule::world_size);
  if (p.data == 0) {
    if (world % others != 0) return verdict(PlanRule::world_multiple);
    p.data = world / others;
  }
  if (!tensor_degree_divides_heads(m.heads, p.tensor)) return verdict(PlanRule::heads);
  if (!stages_divide_layers(m.layers, p.pipeline)) return verdict(PlanRule::layers);
  if (compiled != nullptr && !layout_compiled(p, *compiled)) return verdict(PlanRule::not_compiled);
  return verdict(PlanRule::none);
}

/// The rule of CheckPlan<M, Plan> that a plan breaks for a model of this shape, in the
/// words of its static_assert; empty when CheckPlan accepts it. (CheckPlan needs the model
/// and the plan as types; this is the same rules for numbers read at run time.)
inline std::string plan_rule_broken(const BloomConfig& m, const PlanDesc& p) {
  const bool degrees = p.tensor >= 1 && p.pipeline >= 1 && p.data >= 1;
  switch (degrees ? check_plan(p, p.world_size(), m).broken : PlanRule::degrees) {
    case PlanRule::degrees:
      if (degrees) return "Sharded<Z, N>: Z must be Zero1, Zero2 or Zero3.";
      return "every degree must be at least 1 (a Trainer needs static tensor and pipeline degrees)";
    case PlanRule::heads:
      return "TensorSplit<N>: N must divide the number of attention heads (rule<" +
             std::to_string(m.heads) + ", " + std::to_string(p.tensor) + ">).";
    case PlanRule::layers:
      return "Pipeline<S>: S must divide the number of layers (rule<" + std::to_string(m.layers) +
             ", " + std::to_string(p.pipeline) + ">).";
    default: return {};
  }
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
          if (check_plan(p, world, m).ok()) out.push_back(p);
        }
      }
    }
  }
  return out;
}

}  // namespace seqpar::inline v0

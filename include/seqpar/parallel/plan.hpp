#pragma once
// PlanTraits: the degrees of a plan's three axes, and the rules a plan must satisfy,
// checked at compile time with messages that name the rule and the numbers.

#include <cstdint>
#include <type_traits>

#include "seqpar/config/bloom.hpp"
#include "seqpar/parallel/policies.hpp"

namespace seqpar::inline v0 {

namespace detail {
template <class P>
concept AxisPolicy = requires {
  typename P::axis;
  P::degree;
};
template <class P, class Tag>
inline constexpr int count_axis = std::is_same_v<typename P::axis, Tag> ? 1 : 0;

// The policy of kind Tag among Axes, or Default.
template <class Tag, class Default, class... Axes>
struct axis_of {
  using type = Default;
};
template <class Tag, class Default, class First, class... Rest>
struct axis_of<Tag, Default, First, Rest...> {
  using type = std::conditional_t<std::is_same_v<typename First::axis, Tag>, First,
                                  typename axis_of<Tag, Default, Rest...>::type>;
};
}  // namespace detail

/// A single policy (Replicated<4>, TensorSplit<2>, ...) or a Hybrid of them.
template <class Plan>
struct PlanTraits;

template <class... Axes>
struct PlanTraits<Hybrid<Axes...>> {
  static_assert(
      (detail::AxisPolicy<Axes> && ...),
      "Hybrid<...>: every axis must be a policy: Replicated, Sharded, TensorSplit or Pipeline.");
  static_assert((detail::count_axis<Axes, DataAxisTag> + ... + 0) <= 1,
                "Hybrid<...>: the data axis is given twice (at most one Replicated or Sharded).");
  static_assert((detail::count_axis<Axes, TensorAxisTag> + ... + 0) <= 1,
                "Hybrid<...>: the tensor axis is given twice (at most one TensorSplit).");
  static_assert((detail::count_axis<Axes, PipelineAxisTag> + ... + 0) <= 1,
                "Hybrid<...>: the pipeline axis is given twice (at most one Pipeline).");
  static_assert(((Axes::degree == dynamic ? 1 : 0) + ... + 0) <= 1,
                "Hybrid<...>: more than one degree is dynamic; at most one axis may take its size "
                "at run time.");

  using data = typename detail::axis_of<DataAxisTag, Replicated<1>, Axes...>::type;
  using tensor = typename detail::axis_of<TensorAxisTag, TensorSplit<1>, Axes...>::type;
  using pipeline = typename detail::axis_of<PipelineAxisTag, Pipeline<1, OneFOneB>, Axes...>::type;
  static constexpr int data_degree = data::degree;
  static constexpr int tensor_degree = tensor::degree;
  static constexpr int pipeline_degree = pipeline::degree;
  static constexpr int zero_stage = data::zero_stage;
  static constexpr bool dynamic_degree =
      data_degree == dynamic || tensor_degree == dynamic || pipeline_degree == dynamic;
  /// The product of the degrees; 0 when one of them is dynamic.
  static constexpr int world_size =
      dynamic_degree ? 0 : data_degree * tensor_degree * pipeline_degree;
};

template <class Plan>
requires detail::AxisPolicy<Plan>
struct PlanTraits<Plan> : PlanTraits<Hybrid<Plan>> {
};

/// Anything PlanTraits understands.
template <class Plan>
concept ParallelPlan = requires {
  PlanTraits<Plan>::world_size;
};

/// The model rules of a layout on numbers, the one home of them: CheckPlan (on types below),
/// plan_fits and the run-time check (plan/plan_rules.hpp: check_plan) all ask these.
constexpr bool tensor_degree_divides_heads(std::int64_t heads, int tensor_degree) {
  return tensor_degree >= 1 && heads % tensor_degree == 0;
}
constexpr bool stages_divide_layers(std::int64_t layers, int stages) {
  return stages >= 1 && layers % stages == 0;
}

/// The rules between a model and a plan. Each rule is a class template whose arguments
/// are the numbers involved, so the compiler's "in instantiation of" line shows them.
namespace rule {
template <std::int64_t Heads, int TensorDegree>
struct TensorDegreeDividesHeads {
  static_assert(
      tensor_degree_divides_heads(Heads, TensorDegree),
      "TensorSplit<N>: N must divide the number of attention heads (rule<heads, N> above).");
  static constexpr bool value = true;
};
template <int TensorDegree>
struct TensorDegreeIsStatic {
  static_assert(
      TensorDegree != dynamic,
      "TensorSplit: a Trainer needs a static tensor degree; it fixes every tensor's shape.");
  static constexpr bool value = true;
};
template <int Stages>
struct StagesAreStatic {
  static_assert(
      Stages != dynamic,
      "Pipeline: a Trainer needs a static number of stages; it fixes which layers a rank holds.");
  static constexpr bool value = true;
};
template <std::int64_t Layers, int Stages>
struct StagesDivideLayers {
  static_assert(stages_divide_layers(Layers, Stages),
                "Pipeline<S>: S must divide the number of layers (rule<layers, S> above).");
  static constexpr bool value = true;
};
}  // namespace rule

template <BloomModel M, ParallelPlan Plan>
struct CheckPlan {
  using P = PlanTraits<Plan>;
  static constexpr bool ok =
      rule::TensorDegreeIsStatic<P::tensor_degree>::value &&
      rule::StagesAreStatic<P::pipeline_degree>::value &&
      rule::TensorDegreeDividesHeads<M::heads,
                                     (P::tensor_degree == dynamic ? 1 : P::tensor_degree)>::value &&
      rule::StagesDivideLayers<M::layers,
                               (P::pipeline_degree == dynamic ? 1 : P::pipeline_degree)>::value;
};

/// Whether model M can take plan Plan: CheckPlan's model rules as a value (a plan family
/// skips, rather than fails to compile, a tensor degree the model's heads or stages its
/// layers refuse).
template <BloomModel M, ParallelPlan Plan>
inline constexpr bool plan_fits = tensor_degree_divides_heads(M::heads,
                                                              PlanTraits<Plan>::tensor_degree) &&
                                  stages_divide_layers(M::layers,
                                                       PlanTraits<Plan>::pipeline_degree);

}  // namespace seqpar::inline v0

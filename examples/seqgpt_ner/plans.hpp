// The parallel plans seqgpt_ner is compiled with, chosen at run time by name, in families
// (the order of --help). A model's trainers under one family are one translation unit
// (CMakeLists.txt, model_unit.cpp.in): what a Trainer instantiates whatever the plan costs
// more than the plans, and is paid once per family that way.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "seqpar/parallel/plan.hpp"
#include "seqpar/parallel/policies.hpp"

namespace ner {

/// A string as a template argument: a plan's name and how its type is spelled.
template <std::size_t N>
struct Name {
  char text[N];
  constexpr Name(const char (&s)[N]) { std::copy_n(s, N, text); }
  constexpr std::string_view view() const { return {text, N - 1}; }
};

/// A plan the example offers: the name --plan takes, the type as users write it, the type.
template <Name Called, Name Spelled, class P>
struct NamedPlan {
  using type = P;
  static constexpr std::string_view name = Called.view();
  static constexpr std::string_view spelled = Spelled.view();
  /// The ranks the plan needs (every degree of the example's plans is static).
  static constexpr int world_size = seqpar::PlanTraits<P>::world_size;
  static_assert(world_size > 0, "seqgpt_ner's plans have static degrees");
};

/// Plans that belong together; `Called` names the family.
template <Name Called, class... Plans>
struct PlanFamily {
  static constexpr std::string_view name = Called.view();
  /// Calls f(NamedPlan{}) for the plan called `plan`; false when the family has none.
  template <class F>
  static bool with(std::string_view plan, F&& f) {
    return ((plan == Plans::name ? (f(Plans{}), true) : false) || ...);
  }
  template <class F>
  static void each(F&& f) {
    (f(Plans{}), ...);
  }
  /// Where the plan called `plan` is in the family; -1 when it has none.
  static constexpr int index(std::string_view plan) {
    int i = 0, at = -1;
    ((at = at < 0 && plan == Plans::name ? i : at, ++i), ...);
    return at;
  }
  using Tuple = std::tuple<Plans...>;
};

namespace plan_lookup {
/// Plan I of Family; void for -1.
template <class Family, int I>
struct PlanAt {
  using type = std::tuple_element_t<static_cast<std::size_t>(I), typename Family::Tuple>;
};
template <class Family>
struct PlanAt<Family, -1> {
  using type = void;
};
/// The first of Ts that is not void; void when all are.
template <class... Ts>
struct FirstOf {
  using type = void;
};
template <class T, class... Ts>
struct FirstOf<T, Ts...> {
  using type = std::conditional_t<std::is_void_v<T>, typename FirstOf<Ts...>::type, T>;
};
}  // namespace plan_lookup

using namespace seqpar;
// A plan adds about a second to its family's unit (docs/ner.md#build).
/// Data parallelism alone: replicas and ZeRO sharding.
using DataPlans = PlanFamily<"data", NamedPlan<"single", "Replicated<1>", Replicated<1>>,
                             NamedPlan<"dp2", "Replicated<2>", Replicated<2>>,
                             NamedPlan<"dp4", "Replicated<4>", Replicated<4>>,
                             NamedPlan<"zero1x2", "Sharded<Zero1, 2>", Sharded<Zero1, 2>>,
                             NamedPlan<"zero2x2", "Sharded<Zero2, 2>", Sharded<Zero2, 2>>,
                             NamedPlan<"zero3x2", "Sharded<Zero3, 2>", Sharded<Zero3, 2>>,
                             NamedPlan<"zero3x4", "Sharded<Zero3, 4>", Sharded<Zero3, 4>>>;
/// The model split: over the tensor axis or into pipeline stages, with data parallelism.
using SplitPlans = PlanFamily<
    "split", NamedPlan<"tp2", "TensorSplit<2>", TP2>,
    NamedPlan<"tp2dp2", "Hybrid<TP2, DP2>", Hybrid<TP2, DP2>>,
    NamedPlan<"tp2zero3x2", "Hybrid<TP2, Sharded<Zero3, 2>>", Hybrid<TP2, Sharded<Zero3, 2>>>,
    NamedPlan<"pp2", "Pipeline<2, OneFOneB>", Pipeline<2, OneFOneB>>,
    NamedPlan<"pp2dp2", "Hybrid<Pipeline<2, OneFOneB>, DP2>", Hybrid<Pipeline<2, OneFOneB>, DP2>>>;

/// Families, visited in order: each(f) calls f(Family{}) for every one.
template <class... Families>
struct FamilyList {
  template <class F>
  static void each(F&& f) {
    (f(Families{}), ...);
  }
  /// The NamedPlan of the families called `plan`; void when none is.
  template <Name N>
  using called = typename plan_lookup::FirstOf<
      typename plan_lookup::PlanAt<Families, Families::index(N.view())>::type...>::type;
};

/// What --device cpu offers: every family, in the order of --help.
using CpuFamilies = FamilyList<DataPlans, SplitPlans>;

namespace plan_lookup {
template <Name N>
struct PlanCalled {
  using type = typename CpuFamilies::template called<N>;
  static_assert(!std::is_void_v<type>, "no plan of plans.hpp has this name");
};
}  // namespace plan_lookup

/// The NamedPlan of CpuFamilies called N, for a family that offers some of them by name
/// (CudaPlans): a plan's name and type have one home. A name of no plan does not compile.
template <Name N>
using PlanCalled = typename plan_lookup::PlanCalled<N>::type;

/// Calls f(NamedPlan{}) for the plan called `name`; false when there is none.
template <class F>
bool with_plan(std::string_view name, F&& f) {
  bool found = false;
  CpuFamilies::each([&](auto family) { found = found || decltype(family)::with(name, f); });
  return found;
}

/// Plan names and what they mean, for --help and error messages.
inline std::string plan_list() {
  std::string s;
  CpuFamilies::each([&](auto family) {
    decltype(family)::each([&](auto plan) {
      s +=
          (s.empty() ? "" : ", ") + std::string(plan.name) + " (" + std::string(plan.spelled) + ")";
    });
  });
  return s;
}

/// The ranks the plan called `name` needs; 0 when there is no such plan.
inline int plan_world_size(std::string_view name) {
  int n = 0;
  with_plan(name, [&](auto plan) { n = plan.world_size; });
  return n;
}

}  // namespace ner

// The parallel plans seqgpt_ner is compiled with, chosen at run time by name.
#pragma once

#include <string>
#include <string_view>
#include <type_traits>

#include "seqpar/parallel/policies.hpp"

namespace ner {

/// Plan names and what they mean, for --help and error messages.
inline const char* plan_list() {
  return "single (Replicated<1>), dp2 (Replicated<2>), dp4 (Replicated<4>), zero1x2 "
         "(Sharded<Zero1, 2>), "
         "zero2x2 (Sharded<Zero2, 2>), zero3x2 (Sharded<Zero3, 2>), tp2 (TensorSplit<2>), "
         "pp2 (Pipeline<2, OneFOneB>), tp2dp2 (Hybrid<TP2, DP2>)";
}

/// Calls f(std::type_identity<Plan>{}) for the plan called `name`; false when there is none.
template <class F>
bool with_plan(std::string_view name, F&& f) {
  using namespace seqpar;
  if (name == "single") return f(std::type_identity<Replicated<1>>{}), true;
  if (name == "dp2") return f(std::type_identity<Replicated<2>>{}), true;
  if (name == "dp4") return f(std::type_identity<Replicated<4>>{}), true;
  if (name == "zero1x2") return f(std::type_identity<Sharded<Zero1, 2>>{}), true;
  if (name == "zero2x2") return f(std::type_identity<Sharded<Zero2, 2>>{}), true;
  if (name == "zero3x2") return f(std::type_identity<Sharded<Zero3, 2>>{}), true;
  if (name == "tp2") return f(std::type_identity<TP2>{}), true;
  if (name == "pp2") return f(std::type_identity<Pipeline<2, OneFOneB>>{}), true;
  if (name == "tp2dp2") return f(std::type_identity<Hybrid<TP2, DP2>>{}), true;
  return false;
}

}  // namespace ner

// A trainer's weights read out for comparison: in for_each_param's order, or by name.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "seqpar/config/units.hpp"

namespace seqpar::test {

/// Every weight of a trainer (this rank's blocks), in for_each_param's order (16-bit ones
/// widened: exactly).
template <class TrainerT>
std::vector<float> all_weights(TrainerT& t) {
  std::vector<float> w;
  t.for_each_param(
      [&](const ParamSpec& p, auto* v, auto*) { w.insert(w.end(), v, v + p.numel()); });
  return w;
}

/// Every weight of a trainer (this rank's blocks), by tensor name.
template <class TrainerT>
std::map<std::string, std::vector<float>> weights_by_name(TrainerT& t) {
  std::map<std::string, std::vector<float>> w;
  t.for_each_param([&](const ParamSpec& p, auto* v, auto*) { w[p.name].assign(v, v + p.numel()); });
  return w;
}

}  // namespace seqpar::test

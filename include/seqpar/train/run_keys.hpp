#pragma once
// What a run's ranks must share and what a resume must find unchanged of the trainer, as
// name/value texts: its model, plan, device and precision and every TrainOptions field (one
// list: visit_options).

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "seqpar/comm/agreement.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/plan/registry.hpp"
#include "seqpar/train/resume_keys.hpp"
#include "seqpar/train/train_options.hpp"
#include "seqpar/train/trainer.hpp"

namespace seqpar::inline v0 {

/// The model as the agreement and the checkpoints name it.
inline std::string model_text(const TrainerFacts& f) {
  const BloomConfig& m = f.model;
  return std::to_string(f.parameter_count) + " parameters, hidden " + std::to_string(m.hidden) +
         ", layers " + std::to_string(m.layers) + ", heads " + std::to_string(m.heads) +
         ", vocabulary " + std::to_string(m.vocab_size);
}

/// The run's own keys: the model, and each option that changes what is computed
/// ("options.<field>"; OptionRole order and result).
inline std::vector<RunKey> trainer_keys(const TrainerFacts& f, const TrainOptions& o) {
  std::vector<RunKey> keys{{"model", model_text(f), true}};
  visit_options(o, [&](std::string_view name, const auto& v, OptionRole role) {
    if (role != OptionRole::layout)
      keys.push_back({"options." + std::string(name), field_text(v), role == OptionRole::order});
  });
  return keys;
}

/// What the ranks of a run must have alike: the trainer's model, plan, device and
/// precision, and every TrainOptions field.
inline AgreedValues agreed_values(const TrainerFacts& f, const TrainOptions& o) {
  AgreedValues v{{"model", model_text(f)},
                 {"plan", plan_name(f.plan)},
                 {"device", device_name(f.device)},
                 {"precision", std::string(f.precision)}};
  visit_options(o, [&](std::string_view name, const auto& x, OptionRole) {
    v.emplace_back("options." + std::string(name), field_text(x));
  });
  return v;
}

}  // namespace seqpar::inline v0

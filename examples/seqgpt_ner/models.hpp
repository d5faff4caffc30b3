// The models seqgpt_ner is built for (model_list.hpp: those it knows), and what its commands ask of
// a model on a device (ModelServices): a trainer for a layout chosen at launch, generation from
// weights, the weights checked and the transformers directory written. Each model's code is
// compiled in units of its own, per device, family of plans and precision (CMakeLists.txt,
// model_unit.cpp.in, model_services.hpp); the commands see only this interface.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model_list.hpp"
#include "seqpar/comm/any_comm.hpp"
#include "seqpar/config/bloom.hpp"
#include "seqpar/nn/generate.hpp"
#include "seqpar/plan/plan_desc.hpp"
#include "seqpar/train/any_trainer.hpp"
#include "seqpar/train/generation_model.hpp"
#include "seqpar/train/hf_model_dir.hpp"

namespace ner {

/// Generation with a whole model on one rank: what evaluation and prediction call.
using seqpar::GenerateFn;

/// What the commands ask of a model on a device.
class ModelServices {
 public:
  virtual ~ModelServices() = default;
  /// This rank's trainer for a resolved layout, in the precision called `precision`; refuses
  /// a precision the program did not compile for the device, naming those it has.
  virtual seqpar::AnyTrainer make_trainer(const seqpar::PlanDesc& layout,
                                          std::string_view precision, seqpar::AnyComm world,
                                          const seqpar::TrainOptions& options) const = 0;
  /// The precisions the program compiled for this device, e.g. "fp32" or "fp32, bf16, fp16".
  virtual std::string precisions() const = 0;
  /// Checks a weights file against the model from its header alone, before the model is
  /// allocated.
  virtual void check_weights(const std::filesystem::path& weights) const = 0;
  /// Loads `weights` (a model, a checkpoint or pytorch_model.bin: the whole model whatever
  /// the plan that wrote it) into a whole model on one rank in fp32, made on first use and
  /// kept for the next loads; returns generation from it.
  virtual GenerateFn load(const std::filesystem::path& weights) = 0;
  /// Writes the model directory transformers opens (seqpar::write_hf_model_dir) from
  /// `weights`.
  virtual void write_hf_dir(const seqpar::HfExport& e,
                            const std::filesystem::path& weights) const = 0;
};

/// Model M's services on device Dev (model_services.hpp; each compiled in a unit of its own).
template <seqpar::BloomModel M, seqpar::Device Dev>
std::unique_ptr<ModelServices> make_services();

/// The services of the model called `model` on `device` (models.cpp); refuses a device the
/// program was not built for.
std::unique_ptr<ModelServices> model_services(std::string_view model, std::string_view device);

/// The ModelInfo of `name`; refuses an unknown one.
const ModelInfo& model_info(std::string_view name);

/// Refuses model `name` where this build did not compile it, naming the SEQPAR_NER_MODELS
/// that does.
void check_compiled(std::string_view name);

/// The model of shape `shape` (read from `source`, e.g. a config.json); refuses, naming
/// `source`, a shape no model has (naming its fields) and a model this build did not
/// compile (naming the SEQPAR_NER_MODELS that compiles it).
const ModelInfo& model_of_shape(const seqpar::BloomConfig& shape, const std::string& source);

/// The precisions compiled for `device`, as make_trainer names them (models.cpp).
std::vector<std::string_view> compiled_precisions(std::string_view device);

}  // namespace ner

// What seqgpt_ner's commands (run.hpp) see of a model and of a plan: interfaces, so that the
// training loop, evaluation and prediction are compiled once per device whatever the model
// and the plan, and each model's code in a unit of its own
// (model_parts.hpp defines what is declared here, the units of model_unit.cpp.in compile it).
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "plans.hpp"
#include "seqpar/comm/any_comm.hpp"
#include "seqpar/nn/generate.hpp"
#include "seqpar/train/trainer.hpp"

namespace ner {

using namespace seqpar;

/// Generation with a whole model (a one-rank trainer's own stack, or weights loaded from a
/// file): what evaluation and prediction call, whatever the model.
using GenerateFn = std::function<Generated(const BatchView&, const GenerateOptions&)>;

/// One rank's Trainer<M, Plan, Dev, Prec> as the training loop uses it.
template <Device Dev>
class RankTrainer {
 public:
  virtual ~RankTrainer() = default;
  virtual StepStats step(const BatchView& batch) = 0;
  virtual std::map<std::string, std::string> load_checkpoint(const std::filesystem::path& path) = 0;
  virtual void load_weights(const TensorLookup& lookup, const std::string& file) = 0;
  virtual void save_checkpoint(const std::filesystem::path& path,
                               const std::map<std::string, std::string>& metadata) = 0;
  virtual void save_weights(const std::filesystem::path& path) = 0;
  virtual MemoryStats memory() const = 0;
  virtual std::int64_t steps_taken() const = 0;
  virtual double loss_scale() const = 0;
  /// Generation from this rank's own stack when it is the whole model in fp32 (one rank, no
  /// tensor split); empty otherwise (evaluation then loads the checkpoint just written).
  virtual GenerateFn own_model() = 0;
};

/// A plan as the training loop sees it: its degrees and how a rank makes its trainer.
template <Device Dev>
struct PlanRun {
  int world = 0, data_degree = 0, pipeline_degree = 0;
  std::unique_ptr<RankTrainer<Dev>> (*make)(AnyComm& comm, const TrainOptions& to) = nullptr;
};

/// The plan of family F called `name` for model M on Dev in Prec; none when F has no such
/// plan (defined in model_parts.hpp, compiled in the unit of M, F, Dev and Prec).
template <BloomModel M, class F, Device Dev, Precision Prec>
std::optional<PlanRun<Dev>> family_plan(std::string_view name);

/// What the training loop, eval and predict ask of the model, whatever the plan.
template <Device Dev>
class NerModel {
 public:
  struct Facts {
    std::int64_t vocab_size = 0, parameter_count = 0, hidden = 0, layers = 0, heads = 0;
    bool seqgpt = false;  // SeqGPT-560M: its authors' decoding is the default
  };
  explicit NerModel(const Facts& f) : facts(f) {}
  virtual ~NerModel() = default;
  const Facts facts;
  /// Checks a weights file against the model from its header alone, before the model is
  /// allocated.
  virtual void check_weights(const std::filesystem::path& path) const = 0;
  /// Calls read(lookup, file name) with the tensors of a weights file checked against the
  /// model.
  virtual void read_weights(
      const std::filesystem::path& path,
      const std::function<void(const TensorLookup&, const std::string&)>& read) const = 0;
  /// Loads the weights of `path` (a model, checkpoint or pytorch_model.bin: the whole model
  /// whatever the plan) into a whole model on one rank in fp32, made on first use and kept
  /// for the next loads; returns generation from it.
  virtual GenerateFn load(const std::filesystem::path& path) = 0;
  /// Writes a model directory transformers opens (hf_export.hpp).
  virtual void write_hf_dir(const std::filesystem::path& dir, const std::filesystem::path& weights,
                            const std::filesystem::path& tokenizer_file,
                            const GenerateOptions& decoding, std::int64_t max_length) const = 0;
};

/// Model M's services on Dev (defined in model_parts.hpp, compiled in a unit of their own).
template <BloomModel M, Device Dev>
std::unique_ptr<NerModel<Dev>> make_ner_model();

}  // namespace ner

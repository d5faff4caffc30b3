// The definitions behind trainers.hpp's declarations: a plan's trainer (PlanTrainer,
// family_plan) and a model's services (NerModelOf, make_ner_model). Included by the units
// that compile them for a model (generated from model_unit.cpp.in, CMakeLists.txt), not by
// the commands (commands.cpp, cuda_commands.cpp), which only call them. Each unit includes
// its device's Ops first (model_unit.cpp.in): a CUDA unit never compiles Ops<Cpu>.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>

#include "hf_export.hpp"
#include "seqpar/io/bloom_weights.hpp"
#include "seqpar/io/tensor_file.hpp"
#include "trainers.hpp"

namespace ner {

namespace fs = std::filesystem;

template <BloomModel M, class Plan, Device Dev, Precision Prec>
class PlanTrainer final : public RankTrainer<Dev> {
  using TrainerT = Trainer<M, Plan, Dev, Prec>;

 public:
  PlanTrainer(AnyComm& comm, const TrainOptions& to) : t_(comm, to) {}
  StepStats step(const BatchView& batch) override { return t_.step(batch); }
  std::map<std::string, std::string> load_checkpoint(const std::filesystem::path& path) override {
    return t_.load_checkpoint(path);
  }
  void load_weights(const TensorLookup& lookup, const std::string& file) override {
    t_.load_weights(lookup, file);
  }
  void save_checkpoint(const std::filesystem::path& path,
                       const std::map<std::string, std::string>& metadata) override {
    t_.save_checkpoint(path, metadata);
  }
  void save_weights(const std::filesystem::path& path) override { t_.save_weights(path); }
  MemoryStats memory() const override { return t_.memory(); }
  std::int64_t steps_taken() const override { return t_.steps_taken(); }
  double loss_scale() const override { return t_.loss_scale(); }
  GenerateFn own_model() override {
    if constexpr (TrainerT::world_size == 1 &&
                  std::is_same_v<typename TrainerT::Stack, BloomStack<M, Dev, float>>) {
      return [this](const BatchView& b, const GenerateOptions& go) {
        return generate(t_.model(), b, go);
      };
    } else {
      return {};
    }
  }

 private:
  TrainerT t_;
};

template <BloomModel M, class F, Device Dev, Precision Prec>
std::optional<PlanRun<Dev>> family_plan(std::string_view name) {
  std::optional<PlanRun<Dev>> run;
  F::with(name, [&](auto p) {
    using Plan = typename decltype(p)::type;
    using Traits = PlanTraits<Plan>;
    run = PlanRun<Dev>{
        Traits::world_size, Traits::data_degree, Traits::pipeline_degree,
        [](AnyComm& comm, const TrainOptions& to) -> std::unique_ptr<RankTrainer<Dev>> {
          return std::make_unique<PlanTrainer<M, Plan, Dev, Prec>>(comm, to);
        }};
  });
  return run;
}

/// Checks a weights file against model M from its header alone, before the model is
/// allocated.
template <BloomModel M>
void check_weights_file(const fs::path& path) {
  const BloomWeightsFile<M> f(path);
}

/// A whole model on one rank for generation, in fp32 on device Dev (whatever precision
/// trained it: checkpoints hold fp32 weights): its own arena and stack, weights from a file.
template <BloomModel M, Device Dev>
struct GenerationModel {
  DeviceArena<Dev> arena;
  BloomStack<M, Dev, float> stack{arena};

  /// Loads weights by Hugging Face names (a model, checkpoint or pytorch_model.bin).
  void load(const fs::path& path) {
    const BloomWeightsFile<M> f(path);
    for (std::size_t u = 0; u < stack.units().size(); ++u)
      for (const auto& p : stack.units()[u].params) f.read(p, stack.params(u) + p.offset);
  }
};

template <BloomModel M, Device Dev>
class NerModelOf final : public NerModel<Dev> {
 public:
  NerModelOf()
      : NerModel<Dev>({M::vocab_size, M::parameter_count, M::hidden, M::layers, M::heads,
                       std::is_same_v<M, SeqGPT560M>}) {}
  void check_weights(const fs::path& path) const override { check_weights_file<M>(path); }
  void read_weights(
      const fs::path& path,
      const std::function<void(const TensorLookup&, const std::string&)>& read) const override {
    const BloomWeightsFile<M> f(path);
    read(f.lookup(), f.name());
  }
  GenerateFn load(const fs::path& path) override {
    if (!gen_) gen_ = std::make_unique<GenerationModel<M, Dev>>();
    gen_->load(path);
    return [g = gen_.get()](const BatchView& b, const GenerateOptions& go) {
      return generate(g->stack, b, go);
    };
  }
  void write_hf_dir(const fs::path& dir, const fs::path& weights, const fs::path& tokenizer_file,
                    const GenerateOptions& decoding, std::int64_t max_length) const override {
    ner::write_hf_dir<M>(dir, weights, tokenizer_file, decoding, max_length);
  }

 private:
  std::unique_ptr<GenerationModel<M, Dev>> gen_;
};

template <BloomModel M, Device Dev>
std::unique_ptr<NerModel<Dev>> make_ner_model() {
  return std::make_unique<NerModelOf<M, Dev>>();
}

}  // namespace ner

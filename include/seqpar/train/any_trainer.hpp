#pragma once
// AnyTrainer: any Trainer<Model, Plan, Device, Precision> behind one type, as AnyComm is any
// communicator, so that a program chooses its plan, model and precision when it is launched.
// make_trainer picks the Trainer of a resolved layout (plan/registry.hpp) among the plan
// families a program compiles; the families' trainers are defined in train/plan_trainers.hpp,
// which a program includes in the units that compile them (one per family, device and
// precision keeps each unit small) and nowhere else.

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "seqpar/backend/device.hpp"
#include "seqpar/comm/any_comm.hpp"
#include "seqpar/config/bloom.hpp"
#include "seqpar/core/batch.hpp"
#include "seqpar/core/dtype.hpp"
#include "seqpar/io/bloom_weights.hpp"
#include "seqpar/plan/plan_desc.hpp"
#include "seqpar/plan/registry.hpp"
#include "seqpar/train/generation_model.hpp"
#include "seqpar/train/precision.hpp"
#include "seqpar/train/trainer.hpp"

namespace seqpar::inline v0 {

/// One rank's Trainer of any model, plan, device and precision (a move-only handle).
class AnyTrainer {
 public:
  AnyTrainer() = default;

  /// This rank's Trainer<M, Plan, Dev, Prec> over `world`.
  template <BloomModel M, ParallelPlan Plan, Device Dev, Precision Prec>
  static AnyTrainer make(AnyComm world, const TrainOptions& options) {
    AnyTrainer t;
    t.impl_ = std::make_unique<Model<M, Plan, Dev, Prec>>(std::move(world), options);
    return t;
  }

  explicit operator bool() const { return impl_ != nullptr; }
  const TrainerFacts& facts() const { return impl().facts; }

  /// Trainer::step: one optimizer step on a global batch (every rank passes the same one).
  StepStats step(const BatchView& batch) { return impl().step(batch); }
  /// Trainer::evaluate: the loss of a batch, the weights untouched.
  double evaluate(const BatchView& batch) { return impl().evaluate(batch); }
  void load_weights(const std::filesystem::path& path) { impl().load_weights(path); }
  void load_weights(const TensorLookup& lookup, const std::string& file) {
    impl().load_weights(lookup, file);
  }
  /// Collective: every parameter, whole, written by world rank 0 (Trainer::save_weights).
  void save_weights(const std::filesystem::path& path, DType dtype = DType::f32) {
    impl().save_weights(path, dtype);
  }
  /// Collective: the whole training state with `metadata` (Trainer::save_checkpoint).
  void save_checkpoint(const std::filesystem::path& path,
                       const std::map<std::string, std::string>& metadata = {}) {
    impl().save_checkpoint(path, metadata);
  }
  std::map<std::string, std::string> load_checkpoint(const std::filesystem::path& path) {
    return impl().load_checkpoint(path);
  }
  MemoryStats memory() const { return impl().memory(); }
  std::int64_t steps_taken() const { return impl().steps_taken(); }
  double loss_scale() const { return impl().loss_scale(); }
  const TrainOptions& options() const { return impl().options(); }
  /// The bytes this rank's communicators moved along `axis`.
  const CommStats& comm_stats(MeshAxis axis) const { return impl().comm_stats(axis); }
  const CommStats& data_stats() const { return comm_stats(MeshAxis::data); }
  const CommStats& tensor_stats() const { return comm_stats(MeshAxis::tensor); }
  const CommStats& pipeline_stats() const { return comm_stats(MeshAxis::pipeline); }
  /// A decoder (greedy or beam search) over this trainer's model, whole on this rank in
  /// fp32, with the weights of `weights` (a checkpoint the run wrote): what an evaluation
  /// during training needs in-process, whatever the plan.
  GenerateFn generator(const std::filesystem::path& weights) const {
    return impl().generator(weights);
  }

 private:
  struct Concept {
    virtual ~Concept() = default;
    virtual StepStats step(const BatchView& batch) = 0;
    virtual double evaluate(const BatchView& batch) = 0;
    virtual void load_weights(const std::filesystem::path& path) = 0;
    virtual void load_weights(const TensorLookup& lookup, const std::string& file) = 0;
    virtual void save_weights(const std::filesystem::path& path, DType dtype) = 0;
    virtual void save_checkpoint(const std::filesystem::path& path,
                                 const std::map<std::string, std::string>& metadata) = 0;
    virtual std::map<std::string, std::string> load_checkpoint(
        const std::filesystem::path& path) = 0;
    virtual MemoryStats memory() const = 0;
    virtual std::int64_t steps_taken() const = 0;
    virtual double loss_scale() const = 0;
    virtual const TrainOptions& options() const = 0;
    virtual const CommStats& comm_stats(MeshAxis axis) const = 0;
    virtual GenerateFn generator(const std::filesystem::path& weights) const = 0;
    TrainerFacts facts;
  };

  template <BloomModel M, ParallelPlan Plan, Device Dev, Precision Prec>
  struct Model final : Concept {
    Model(AnyComm world, const TrainOptions& options) : t(std::move(world), options) {
      this->facts = t.facts();
    }
    StepStats step(const BatchView& batch) override { return t.step(batch); }
    double evaluate(const BatchView& batch) override { return t.evaluate(batch); }
    void load_weights(const std::filesystem::path& path) override { t.load_weights(path); }
    void load_weights(const TensorLookup& lookup, const std::string& file) override {
      t.load_weights(lookup, file);
    }
    void save_weights(const std::filesystem::path& path, DType dtype) override {
      t.save_weights(path, dtype);
    }
    void save_checkpoint(const std::filesystem::path& path,
                         const std::map<std::string, std::string>& metadata) override {
      t.save_checkpoint(path, metadata);
    }
    std::map<std::string, std::string> load_checkpoint(const std::filesystem::path& path) override {
      return t.load_checkpoint(path);
    }
    MemoryStats memory() const override { return t.memory(); }
    std::int64_t steps_taken() const override { return t.steps_taken(); }
    double loss_scale() const override { return t.loss_scale(); }
    const TrainOptions& options() const override { return t.options(); }
    const CommStats& comm_stats(MeshAxis axis) const override { return t.comm_stats(axis); }
    GenerateFn generator(const std::filesystem::path& weights) const override {
      return load_generation_model<M, Dev>(weights);
    }
    Trainer<M, Plan, Dev, Prec> t;
  };

  Concept& impl() const {
    SEQPAR_CHECK(impl_ != nullptr, "AnyTrainer: no trainer (made by make_trainer)");
    return *impl_;
  }

  std::unique_ptr<Concept> impl_;
};

/// Precision policies a program compiles for a device, in the order make_trainer tries them.
template <Precision... P>
struct Precisions {};

/// The names of a list's precisions (precision_name), in its order.
template <Precision... P>
std::vector<std::string_view> precision_names(Precisions<P...>) {
  return {precision_name<P>()...};
}

/// This rank's trainer of model M on Dev in precision Prec for `layout` (resolved: its data
/// degree is world.size() / (tensor x pipeline)), when Family has it; nullopt otherwise.
/// Defined in train/plan_trainers.hpp and compiled where a program instantiates it.
template <BloomModel M, Device Dev, Precision Prec, class Family>
std::optional<AnyTrainer> make_family_trainer(const PlanDesc& layout, AnyComm world,
                                              const TrainOptions& options);

namespace detail {
template <BloomModel M, Device Dev, Precision Prec, class Set>
std::optional<AnyTrainer> make_set_trainer(const PlanDesc& layout, const AnyComm& world,
                                           const TrainOptions& options) {
  std::optional<AnyTrainer> made;
  Set::each([&](auto family) {
    if (!made) made = make_family_trainer<M, Dev, Prec, decltype(family)>(layout, world, options);
  });
  return made;
}
}  // namespace detail

/// This rank's trainer of model M on device Dev for a resolved `layout` (resolve_plan), in
/// the precision called `precision` (precision_name) among PrecisionList, under the plan
/// families of Set. Every rank of `world` calls it alike. Throws naming the precision or
/// the layout when the program did not compile it.
template <BloomModel M, Device Dev, class PrecisionList, class Set>
AnyTrainer make_trainer(const PlanDesc& layout, std::string_view precision, AnyComm world,
                        const TrainOptions& options);

namespace detail {
template <BloomModel M, Device Dev, class Set, Precision... P>
AnyTrainer make_trainer_in(Precisions<P...>, const PlanDesc& layout, std::string_view precision,
                           const AnyComm& world, const TrainOptions& options) {
  std::optional<AnyTrainer> made;
  bool known = false;
  ((precision == precision_name<P>() && !known
        ? (known = true, made = make_set_trainer<M, Dev, P, Set>(layout, world, options), true)
        : false),
   ...);
  std::string compiled;
  ((compiled += (compiled.empty() ? "" : ", ") + std::string(precision_name<P>())), ...);
  SEQPAR_CHECK(known, "precision ", precision, " is not compiled for ", Dev::name,
               " in this program; it has ", compiled);
  SEQPAR_CHECK(made.has_value(), "plan ", plan_name(layout), " (", layout.name(),
               ") is not compiled for ", Dev::name, " in ", precision, " in this program; it has ",
               describe_layouts(Set::layouts()));
  return std::move(*made);
}
}  // namespace detail

template <BloomModel M, Device Dev, class PrecisionList, class Set>
AnyTrainer make_trainer(const PlanDesc& layout, std::string_view precision, AnyComm world,
                        const TrainOptions& options) {
  return detail::make_trainer_in<M, Dev, Set>(PrecisionList{}, layout, precision, world, options);
}

}  // namespace seqpar::inline v0

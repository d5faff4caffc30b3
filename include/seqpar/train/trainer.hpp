#pragma once
// Trainer<Model, Plan, Device, Precision>: the whole training stack of one rank.

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "seqpar/backend/device.hpp"
#include "seqpar/comm/any_comm.hpp"
#include "seqpar/config/bloom.hpp"
#include "seqpar/core/batch.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/core/profile.hpp"
#include "seqpar/io/bloom_weights.hpp"
#include "seqpar/io/safetensors.hpp"
#include "seqpar/io/tensor_file.hpp"
#include "seqpar/nn/model.hpp"
#include "seqpar/optim/adamw.hpp"
#include "seqpar/optim/schedule.hpp"
#include "seqpar/parallel/data_axis.hpp"
#include "seqpar/parallel/mesh.hpp"
#include "seqpar/parallel/pipeline_axis.hpp"
#include "seqpar/parallel/plan.hpp"
#include "seqpar/parallel/policies.hpp"
#include "seqpar/parallel/tensor_axis.hpp"
#include "seqpar/plan/plan_desc.hpp"
#include "seqpar/train/checkpoint.hpp"
#include "seqpar/train/pipeline.hpp"
#include "seqpar/train/precision.hpp"
#include "seqpar/train/train_options.hpp"

namespace seqpar::inline v0 {

/// The name of precision policy P in files and messages: fp32, bf16, fp16, fp64.
template <Precision P>
constexpr std::string_view precision_name() {
  switch (P::dtype) {
    case DType::bf16: return "bf16";
    case DType::f16: return "fp16";
    case DType::f64: return "fp64";
    default: return "fp32";
  }
}

/// What a trainer trains: the model's shape, the layout with its data degree, the device
/// and the precision.
struct TrainerFacts {
  BloomConfig model;
  std::int64_t parameter_count = 0;
  PlanDesc plan;
  DeviceKind device = DeviceKind::cpu;
  std::string_view precision;
};

/// The training stack of one rank for model `Model` under plan `Plan` (Replicated<N>,
/// Sharded<Zero1|2|3, N>, TensorSplit<N>, or a Hybrid of them). The constructor takes this
/// rank's world communicator; every rank calls step() with the same global batch and takes
/// its own slice of it.
template <BloomModel Model, ParallelPlan Plan, Device Dev = Cpu, Precision Prec = Fp32>
class Trainer {
  static_assert(CheckPlan<Model, Plan>::ok);
  using Traits = PlanTraits<Plan>;

 public:
  /// The storage type of weights, activations and gradients (float, double; bf16 or fp16).
  using T = ComputeType<Prec, Dev>;
  /// The type of the optimizer's master weights and moments, and of host-side weights
  /// given to write_params: float for 16-bit T, T otherwise.
  using Master = StatScalar<T>;
  using Arena = DeviceArena<Dev>;
  using Axis = std::conditional_t<Traits::tensor_degree == 1, NoTensorAxis, TensorGroup>;
  using Stack = BloomStack<Model, Dev, T, Axis>;
  /// The data axis of the plan's data policy (Replicated, ZeRO-1/2 or ZeRO-3).
  using Data = DataAxis<typename Traits::data, Stack, Dev, T>;
  /// The number of ranks the plan needs; 0 when a degree is dynamic.
  static constexpr int world_size = Traits::world_size;
  static constexpr std::int64_t parameter_count = Model::parameter_count;

  /// A single-rank trainer (plans whose every degree is 1).
  explicit Trainer(TrainOptions opts = {}) requires(world_size == 1) : Trainer(AnyComm(), opts) {}

  /// One rank of a multi-rank trainer; `world` is this rank's handle of the world.
  /// (AnyComm is tested first: nvcc's front end rejects the recursive Communicator<AnyComm>.)
  template <class C>
  requires(!std::same_as<std::remove_cvref_t<C>, AnyComm> && Communicator<C>)
      Trainer(C world, TrainOptions opts)
      : Trainer(AnyComm(std::move(world)), opts) {}

  Trainer(AnyComm world, TrainOptions opts)
      : opts_(opts),
        mesh_(Mesh::make<Plan>(std::move(world))),
        pipe_(Model::layers, mesh_.pipeline),
        model_(arena_, make_axis(mesh_), pipe_.layers(), mesh_.data_degree),
        runner_(model_, mesh_.pipeline),
        guard_(opts.loss_scale) {
    SEQPAR_CHECK(opts_.max_nonfinite_steps > 0, "TrainOptions::max_nonfinite_steps is ",
                 opts_.max_nonfinite_steps,
                 "; expected at least 1 (the faulty steps in a row that stop a run)");
    SEQPAR_CHECK(opts_.logits_bytes >= 0, "TrainOptions::logits_bytes is ", opts_.logits_bytes,
                 "; expected a byte count, or 0 for the device's default");
    SEQPAR_CHECK(opts_.recompute_every >= 1, "TrainOptions::recompute_every is ",
                 opts_.recompute_every, "; expected at least 1 (every block)");
    model_.set_options(
        {opts_.logits_bytes, opts_.recompute, opts_.recompute_every, opts_.attention});
    model_.initialize(opts_.seed, opts_.init_std);
    data_.emplace(model_, mesh_.data, opts_.offload);
    if (pipe_.sums_tied_gradients()) data_->defer_download(0);  // final after the tied sum
  }

  /// One optimizer step on a global batch: forward and backward over micro-batches, the
  /// gradients reduced, their norm, the step guard's verdict (loss scale, faults,
  /// clipping), AdamW. The loss is the token mean over the whole batch.
  StepStats step(const BatchView& batch) {
    const profile::Scope profiled(profile::Phase::step);
    const auto t0 = start_step(batch);
    const std::int64_t targets = batch.target_count();
    const auto scaling = guard_.template scaling<T>(targets);
    const double loss_sum = forward_backward(local_slice(batch), scaling.loss_gradient);
    reduce_gradients();
    const double loss = token_mean(global_sum(loss_sum), targets);
    const double norm = grad_norm() * scaling.unscale;
    const double lr = opts_.schedule.at(step_);
    const auto update = guard_.judge(loss, norm, scaling, opts_.max_grad_norm, step_ + 1,
                                     opts_.max_nonfinite_steps);
    if (update.take())
      optimizer_step(update, lr);
    else
      data_->skip_update();
    return step_stats(batch, t0, loss, norm, lr, scaling.scale, update.verdict);
  }

  /// Loss (token mean) of a batch without touching the weights.
  double evaluate(const BatchView& batch) {
    batch.validate(Model::vocab_size);
    const double loss_sum = runner_.evaluate(micro_batches(local_slice(batch)));
    return token_mean(global_sum(loss_sum), batch.target_count());
  }

  /// Logits [rows * seq, vocab] of a whole batch on every rank (materialised: for
  /// evaluation and tests; vocab shards are gathered over the tensor axis).
  std::vector<T> logits(const BatchView& batch) {
    batch.validate(Model::vocab_size);
    auto& acts = runner_.forward_only(batch);
    const std::int64_t rows = model_.vocab_shard().rows, n = batch.tokens(),
                       tp = mesh_.tensor_degree;
    // Made in device memory, exchanged between ranks as Master values on the host.
    std::vector<Master> local(static_cast<std::size_t>(n * rows)),
        all(static_cast<std::size_t>(n * rows * tp));
    if (runner_.last()) {
      Buffer<T, Arena> dev(arena_, local.size(), Memory::buffers);
      model_.logits(acts, dev.data());
      if constexpr (std::is_same_v<Master, T>) {
        Ops<Dev>::download(local.data(), dev.data(), n * rows);
      } else {
        std::vector<T> host(local.size());
        Ops<Dev>::download(host.data(), dev.data(), n * rows);
        std::copy(host.begin(), host.end(), local.begin());
      }
    }
    mesh_.pipeline.broadcast(local.data(), local.size(), mesh_.pipeline_degree - 1);
    mesh_.tensor.all_gather(local.data(), all.data(), local.size());
    std::vector<T> out(static_cast<std::size_t>(n * Model::vocab_size));
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t v = 0; v < Model::vocab_size; ++v)
        out[static_cast<std::size_t>(i * Model::vocab_size + v)] =
            static_cast<T>(all[static_cast<std::size_t>(((v / rows) * n + i) * rows + v % rows)]);
    return out;
  }

  /// Loads every parameter from a tensor file by Hugging Face names.
  void load_weights(const TensorLookup& lookup, const std::string& file) {
    // A unit at a time on the host, in the master type (exact for fp32 master weights).
    std::vector<Master> unit;
    for (std::size_t u = 0; u < model_.units().size(); ++u) {
      if (!model_.holds(u)) continue;
      unit.assign(static_cast<std::size_t>(model_.padded_numel(u)), Master(0));
      for (const auto& p : model_.units()[u].params)
        load_param_block(find_bloom_tensor(lookup, p.name, file), p, unit.data() + p.offset);
      data_->write_params(u, unit.data());
    }
  }

  /// Loads weights from a safetensors file or a pytorch_model.bin (Hugging Face names);
  /// a file with tensors this model does not have is refused, listing them.
  void load_weights(const std::filesystem::path& path) {
    const BloomWeightsFile<Model> f(path);
    load_weights(f.lookup(), f.name());
  }

  /// Collective. Writes every parameter, full-size, with its Hugging Face name
  /// ("transformer." prefix, the tied LM head omitted) as one safetensors file that
  /// transformers loads; world rank 0 writes it, atomically. Works under every plan and on
  /// every device; a mixed-precision model writes its fp32 master weights (rounded when
  /// `dtype` is BF16 or F16, which gives exactly the 16-bit working weights).
  void save_weights(const std::filesystem::path& path, DType dtype = DType::f32) {
    SEQPAR_CHECK(dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16, path.string(),
                 ": weights can be saved as F32, BF16 or F16, not ", dtype_name(dtype));
    state().write(path, StateKinds::weights, {}, dtype);
  }

  /// Collective. Saves the whole training state — weights (the fp32 master weights of a
  /// mixed-precision model), AdamW moments, the step and the seed, the step guard's skip
  /// counters and, when the loss is scaled, its scale, clean steps and hysteresis left, and
  /// `metadata` (e.g. the data position) — as one safetensors file written atomically by
  /// world rank 0. It loads under any plan, on any device, under any precision policy
  /// (load_checkpoint).
  void save_checkpoint(const std::filesystem::path& path,
                       const std::map<std::string, std::string>& metadata = {}) {
    state().write(path, StateKinds::weights | StateKinds::moments,
                  checkpoint_metadata(metadata, step_, opts_.seed, guard_.state(), guard_.scaled()),
                  DType::f32);
  }

  /// Restores a checkpoint written under any plan: every rank reads its own pieces. The
  /// skip counters resume; a dynamic loss scale resumes the saved scale, clean steps and
  /// hysteresis when the file has them (a static or absent scale is this run's own).
  /// Returns the file's metadata (the caller's entries included).
  std::map<std::string, std::string> load_checkpoint(const std::filesystem::path& path) {
    const SafetensorsFile f(path);
    const std::string file = path.string();
    const TrainingPosition at = read_training_position<Model>(f.metadata(), file, guard_.dynamic());
    load_weights([&f](std::string_view n) { return f.find(n); }, file);
    state().load_moments(f, file);
    step_ = at.step;
    LossScaleState guard = guard_.state();
    guard.skipped_steps = at.guard.skipped_steps;
    guard.faults_in_a_row = at.guard.faults_in_a_row;
    if (at.has_scale) {
      guard.scale = at.guard.scale;
      guard.clean_steps = at.guard.clean_steps;
      guard.hysteresis =
          at.guard.hysteresis > 0 ? at.guard.hysteresis : guard_.options().hysteresis;
    }
    guard_.restore(guard);
    return f.metadata();
  }

  /// Visits every parameter tensor of this rank as this rank holds it under the tensor
  /// split: fn(const ParamSpec&, T* values, T* grads). Under ZeRO the values are
  /// gathered for the call and grads is null (they exist only as shards).
  /// The pointers are host copies of the device's values; what fn writes through them is
  /// copied back (for 16-bit models the master weights of a changed unit are then reset
  /// to its new 16-bit values).
  template <class F>
  void for_each_param(F&& fn) {
    constexpr bool with_grads = Traits::zero_stage == 0;
    std::vector<T> values, grads, values_before, grads_before;
    for (std::size_t u = 0; u < model_.units().size(); ++u) {
      if (!model_.holds(u)) continue;
      const std::int64_t n = model_.padded_numel(u);
      values.resize(static_cast<std::size_t>(n));
      data_->read_params(u, values.data());
      values_before = values;
      if (with_grads) {
        grads.resize(static_cast<std::size_t>(n));
        Ops<Dev>::download(grads.data(), model_.grads(u), n);
        grads_before = grads;
      }
      for (const auto& p : model_.units()[u].params)
        fn(p, values.data() + p.offset, with_grads ? grads.data() + p.offset : nullptr);
      const auto changed = [](const std::vector<T>& a, const std::vector<T>& b) {
        return std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) != 0;
      };
      if (changed(values, values_before)) {
        if constexpr (std::is_same_v<Master, T>) {
          data_->write_params(u, values.data());
        } else {
          const std::vector<Master> wide(values.begin(), values.end());
          data_->write_params(u, wide.data());
        }
      }
      if (with_grads && changed(grads, grads_before))
        Ops<Dev>::upload(model_.grads(u), grads.data(), n);
    }
  }

  /// Forward and backward of a batch without an optimizer step: gradients of the token-mean
  /// loss are left in the gradient buffers; returns the loss.
  double compute_gradients(const BatchView& batch) {
    batch.validate(Model::vocab_size);
    const std::int64_t targets = batch.target_count();
    const double loss_sum = forward_backward(local_slice(batch), loss_gradient<T>(1.0, targets));
    reduce_gradients();
    return token_mean(global_sum(loss_sum), targets);
  }

  Stack& model() { return model_; }
  /// This rank's data axis (parallel/data_axis.hpp): its ranges, offload and counters.
  Data& data_axis() { return *data_; }
  const Mesh& mesh() const { return mesh_; }
  /// Counters of this rank's communicators, by axis.
  CommStats& data_stats() { return mesh_.data.stats(); }
  CommStats& tensor_stats() { return mesh_.tensor.stats(); }
  const CommStats& comm_stats(MeshAxis axis) const { return mesh_.group(axis).stats(); }
  /// The model, the layout (its data degree as the world made it), the device, the precision.
  TrainerFacts facts() const {
    return {
        Model::config, Model::parameter_count,
        PlanDesc{mesh_.data_degree, mesh_.tensor_degree, mesh_.pipeline_degree, Traits::zero_stage,
                 std::is_same_v<typename Traits::pipeline::schedule, GPipe>},
        Dev::kind, precision_name<Prec>()};
  }
  /// This rank's memory by category: the device arena's, with the host state offloaded
  /// to a pinned arena of its own (Cuda) counted in (its categories and the totals; the
  /// total peak is then the sum of both peaks, a bound).
  MemoryStats memory() const { return memory_stats(); }
  std::int64_t steps_taken() const { return step_; }
  /// The loss scale the next step uses (1 when the loss is not scaled).
  double loss_scale() const { return guard_.value(); }
  /// The step guard: the loss scaler's state and the skip counters.
  const StepGuard<Prec>& step_guard() const { return guard_; }
  const TrainOptions& options() const { return opts_; }

 private:
  MemoryStats memory_stats() const {
    MemoryStats m = arena_.stats();
    if (const MemoryStats* host = data_ ? data_->separate_host_stats() : nullptr) {
      for (std::size_t k = 0; k < memory_kinds; ++k) {
        m.current[k] += host->current[k];
        m.peak[k] += host->peak[k];
      }
      m.total_current += host->total_current;
      m.total_peak += host->total_peak;
    }
    return m;
  }

  // This rank's side of the saved state (checkpoint.hpp).
  RankState<Model, Stack, Data> state() { return {mesh_, pipe_, model_, *data_}; }

  static Axis make_axis(const Mesh& m) {
    if constexpr (std::is_same_v<Axis, TensorGroup>)
      return TensorGroup{m.tensor};
    else
      return {};
  }

  // This data rank's rows of the global batch.
  BatchView local_slice(const BatchView& b) const {
    const std::int64_t n = mesh_.data_degree;
    SEQPAR_CHECK(b.rows % n == 0, "rank ", mesh_.world.rank(), ": the global batch has ", b.rows,
                 " rows, not a multiple of the data-parallel degree ", n);
    return b.slice(mesh_.data_rank * (b.rows / n), b.rows / n);
  }

  std::vector<BatchView> micro_batches(const BatchView& b) const {
    const std::int64_t mb = opts_.micro_batch_rows > 0 ? opts_.micro_batch_rows : b.rows;
    std::vector<BatchView> out;
    for (std::int64_t r = 0; r < b.rows; r += mb)
      out.push_back(b.slice(r, std::min(mb, b.rows - r)));
    return out;
  }

  // Work queued before this step is not timed with it.
  std::chrono::steady_clock::time_point start_step(const BatchView& batch) {
    Ops<Dev>::synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    batch.validate(Model::vocab_size);
    arena_.reset_peaks();
    data_->reset_host_peaks();
    return t0;
  }

  // Forward and backward of every micro-batch of this data rank's rows through the
  // pipeline schedule, each token's loss gradient starting from `loss_gradient`; returns
  // this rank's share of the summed token loss (the last stage's).
  double forward_backward(const BatchView& slice, T loss_gradient) {
    const auto mbs = micro_batches(slice);
    data_->begin_step(static_cast<std::int64_t>(mbs.size()));
    return runner_.template train<typename Traits::pipeline::schedule>(mbs, loss_gradient);
  }

  // The gradients summed over the data axis, and the tied embedding's over the first and
  // last stage: every rank then holds the whole batch's gradients of its range.
  void reduce_gradients() {
    const profile::Scope p(profile::Phase::communication);
    data_->reduce_gradients();
    pipe_.sum_tied_gradients<Dev>(data_->grad_storage(0), data_->range_size(0), arena_);
    data_->gradients_final(0);
  }

  // A rank's share of a loss sum summed over the pipeline and data axes.
  double global_sum(double local) {
    const profile::Scope p(profile::Phase::communication);
    mesh_.pipeline.all_reduce(&local, 1, ReduceOp::sum);
    mesh_.data.all_reduce(&local, 1, ReduceOp::sum);
    return local;
  }
  static double token_mean(double sum, std::int64_t targets) {
    return targets > 0 ? sum / static_cast<double>(targets) : 0.0;
  }

  // The guard's factors on the gradients, then AdamW at rate lr.
  void optimizer_step(const GradientUpdate<T>& update, double lr) {
    {
      const profile::Scope p(profile::Phase::clipping, 0, 2.0 * update.factors * grad_bytes());
      for (int i = 0; i < update.factors; ++i) data_->scale_grads(update.factor[i]);
    }
    // master weights, m, v read and written, the gradients read, the working weights written
    const profile::Scope p(profile::Phase::optimizer, 0,
                           updated_numel() * (6.0 * sizeof(Master) + 2.0 * sizeof(T)));
    ++step_;
    const AdamWConfig adam{opts_.beta1, opts_.beta2, opts_.eps, opts_.weight_decay};
    data_->optimizer_step(adam_coeffs(adam, lr, step_), update.grad_factor);
  }

  StepStats step_stats(const BatchView& batch, std::chrono::steady_clock::time_point t0,
                       double loss, double norm, double lr, double loss_scale, StepVerdict v) {
    Ops<Dev>::synchronize();
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    StepStats st{step_,          loss,
                 norm,           lr,
                 batch.tokens(), batch.target_count(),
                 secs,           static_cast<double>(batch.tokens()) / secs,
                 memory_stats()};
    st.skipped = v != StepVerdict::take;
    st.overflow = v == StepVerdict::overflow;
    st.loss_scale = loss_scale;
    st.skipped_steps = guard_.skipped_steps();
    st.nonfinite_in_a_row = guard_.faults_in_a_row();
    st.attempt = step_ + guard_.skipped_steps();
    return st;
  }

  // The elements of the ranges this rank's optimizer updates, and their gradients' bytes
  // (the profile's counts).
  double updated_numel() const {
    double n = 0;
    for (std::size_t u = 0; u < model_.units().size(); ++u)
      if (model_.holds(u)) n += static_cast<double>(data_->range_size(u));
    return n;
  }
  double grad_bytes() const { return updated_numel() * sizeof(T); }

  // The global gradient norm: tensor-split pieces summed over the tensor group,
  // replicated tensors (identical on every tensor rank) counted once, each pipeline
  // stage's units as the pipeline axis weighs them (its copy of the tied table not at all).
  double grad_norm() {
    const profile::Scope p(profile::Phase::clipping, 0, grad_bytes());
    const double tp = mesh_.tensor_degree;
    double s = data_->grad_square_sum([&](std::size_t u, const ParamSpec& p) {
      return pipe_.norm_weight(u) * (p.split == Split::none ? 1.0 / tp : 1.0);
    });
    mesh_.tensor.all_reduce(&s, 1, ReduceOp::sum);
    mesh_.pipeline.all_reduce(&s, 1, ReduceOp::sum);
    return std::sqrt(s);
  }

  TrainOptions opts_;
  Arena arena_;
  Mesh mesh_;
  PipelineAxis pipe_;
  Stack model_;
  StageRunner<Stack> runner_;
  std::optional<Data> data_;
  std::int64_t step_ = 0;
  StepGuard<Prec> guard_;
};

}  // namespace seqpar::inline v0

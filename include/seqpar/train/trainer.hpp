#pragma once
// Trainer<Model, Plan, Device, Precision>: the whole training stack of one rank.

#include <chrono>
#include <cstring>
#include <filesystem>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "seqpar/backend/device.hpp"
#include "seqpar/config/bloom.hpp"
#include "seqpar/io/bloom_weights.hpp"
#include "seqpar/io/safetensors.hpp"
#include "seqpar/io/tensor_file.hpp"
#include "seqpar/nn/model.hpp"
#include "seqpar/optim/adamw.hpp"
#include "seqpar/optim/schedule.hpp"
#include "seqpar/parallel/policies.hpp"
#include "seqpar/train/batch.hpp"
#include "seqpar/train/precision.hpp"

namespace seqpar::inline v0 {

/// What a training run is asked to do (Hugging Face Trainer names in comments).
struct TrainOptions {
  double lr = 2e-5;                 // learning_rate (the peak)
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0.0;        // on matrices only
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 0;     // for the decay; 0 keeps the lr constant after warmup
  LrDecay decay = LrDecay::linear;
  double max_grad_norm = 1.0;       // <= 0: no clipping
  std::int64_t micro_batch_rows = 0;  // rows per micro-batch; 0: the whole local batch at once
  std::uint64_t seed = 42;          // initialisation and data order
  double init_std = 0.02;
};

/// What one optimizer step did.
struct StepStats {
  std::int64_t step = 0;        // 1-based count of optimizer steps taken
  double loss = 0;              // token mean over the global batch
  double grad_norm = 0;         // before clipping
  double lr = 0;                // the rate this step used
  std::int64_t tokens = 0;      // rows * seq of the global batch
  std::int64_t targets = 0;     // tokens that entered the loss
  double seconds = 0;
  double tokens_per_s = 0;
  MemoryStats memory;           // this rank's arena
};

template <BloomModel Model, class Plan, Device Dev = Cpu, Precision Prec = Fp32>
class Trainer {
  static_assert(std::is_same_v<Plan, Replicated<1>>,
                "Trainer: this build supports the single-rank plan Replicated<1>.");

 public:
  using T = typename Prec::compute;
  using Arena = DeviceArena<Dev>;
  using Stack = BloomStack<Model, Dev, T>;
  static constexpr int world_size = 1;
  static constexpr std::int64_t parameter_count = Model::parameter_count;

  explicit Trainer(TrainOptions opts = {})
      : opts_(opts), model_(arena_), schedule_{opts.lr, opts.warmup_steps, opts.total_steps, opts.decay} {
    model_.initialize(opts_.seed, opts_.init_std);
    for (std::size_t u = 0; u < model_.units().size(); ++u) {
      auto& s = adam_.emplace_back();
      if (!model_.holds(u)) continue;
      s.begin = 0;
      s.end = model_.units()[u].numel;
      s.m = Buffer<T, Arena>(arena_, static_cast<std::size_t>(s.end), Memory::optimizer);
      s.v = Buffer<T, Arena>(arena_, static_cast<std::size_t>(s.end), Memory::optimizer);
    }
  }

  /// One optimizer step on a global batch: forward and backward over micro-batches,
  /// a loss that is the token mean over the whole batch, clipping, AdamW.
  StepStats step(const BatchView& batch) {
    const auto t0 = std::chrono::steady_clock::now();
    batch.validate(Model::vocab_size);
    arena_.reset_peaks();
    model_.zero_grads();
    const std::int64_t targets = batch.target_count();
    const T scale = targets > 0 ? T(1) / static_cast<T>(targets) : T(0);
    const double loss_sum = accumulate(batch, scale);
    const double norm = grad_norm();
    const double lr = schedule_.at(step_);
    // As torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when that is below 1.
    if (const double coef = opts_.max_grad_norm / (norm + 1e-6); opts_.max_grad_norm > 0 && coef < 1.0)
      scale_grads(static_cast<T>(coef));
    ++step_;
    const auto c = adam_coeffs({opts_.beta1, opts_.beta2, opts_.eps, opts_.weight_decay}, lr, step_);
    for (std::size_t u = 0; u < model_.units().size(); ++u)
      if (model_.holds(u)) adamw_update<Dev>(model_.params(u), model_.grads(u), adam_[u], model_.units()[u], c);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return {step_, targets > 0 ? loss_sum / static_cast<double>(targets) : 0.0, norm, lr, batch.tokens(), targets,
            secs, static_cast<double>(batch.tokens()) / secs, arena_.stats()};
  }

  /// Loss (token mean) of a batch without touching the weights.
  double evaluate(const BatchView& batch) {
    batch.validate(Model::vocab_size);
    const std::int64_t targets = batch.target_count();
    double sum = 0;
    for_each_micro_batch(batch, [&](const BatchView& mb) {
      model_.forward(mb, acts_);
      sum += model_.loss(acts_, T(0), nullptr).sum;
    });
    return targets > 0 ? sum / static_cast<double>(targets) : 0.0;
  }

  /// Logits [rows * seq, vocab] of a batch (materialised: for evaluation and tests).
  std::vector<T> logits(const BatchView& batch) {
    batch.validate(Model::vocab_size);
    model_.forward(batch, acts_);
    const auto rows = model_.vocab_shard().rows;
    std::vector<T> padded(static_cast<std::size_t>(batch.tokens() * rows));
    model_.logits(acts_, padded.data());
    std::vector<T> out(static_cast<std::size_t>(batch.tokens() * Model::vocab_size));
    for (std::int64_t i = 0; i < batch.tokens(); ++i)
      std::copy_n(padded.data() + i * rows, Model::vocab_size, out.data() + i * Model::vocab_size);
    return out;
  }

  /// Loads every parameter from a tensor file by Hugging Face names.
  void load_weights(const TensorLookup& lookup, const std::string& file) {
    for (std::size_t u = 0; u < model_.units().size(); ++u) {
      if (!model_.holds(u)) continue;
      for (const auto& p : model_.units()[u].params) {
        const std::int64_t real = p.name == "word_embeddings.weight" ? Model::vocab_size : p.rows;
        load_param_block(find_bloom_tensor(lookup, p.name, file), p, real, model_.params(u) + p.offset);
      }
    }
  }

  /// Loads weights from a safetensors file or a pytorch_model.bin (Hugging Face names).
  void load_weights(const std::filesystem::path& path) {
    const TensorFile f(path);
    load_weights([&f](std::string_view n) { return f.find(n); }, path.string());
  }

  /// Writes every parameter with its Hugging Face name ("transformer." prefix, the tied
  /// LM head omitted) as one safetensors file that transformers loads; atomically.
  void save_weights(const std::filesystem::path& path, DType dtype = DType::f32) {
    SEQPAR_CHECK(dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16, path.string(),
                 ": weights can be saved as F32, BF16 or F16, not ", dtype_name(dtype));
    std::vector<std::vector<std::byte>> data;
    std::vector<TensorToWrite> tensors;
    for_each_param([&](const ParamSpec& p, T* values, T*) {
      const std::int64_t rows = p.name == "word_embeddings.weight" ? Model::vocab_size : p.rows;
      auto& bytes = data.emplace_back(static_cast<std::size_t>(rows * p.cols) * dtype_size(dtype));
      for (std::int64_t i = 0; i < rows * p.cols; ++i) {
        const auto v = static_cast<float>(values[i]);
        if (dtype == DType::f32) {
          std::memcpy(bytes.data() + i * 4, &v, 4);
        } else {
          const std::uint16_t h = dtype == DType::bf16 ? float_to_bf16(v) : float_to_f16(v);
          std::memcpy(bytes.data() + i * 2, &h, 2);
        }
      }
      tensors.push_back({"transformer." + p.name, dtype,
                         p.vector ? std::vector<std::int64_t>{rows} : std::vector<std::int64_t>{rows, p.cols}, bytes});
    });
    write_safetensors(path, tensors, {{"format", "pt"}});
  }

  /// Visits every parameter tensor of this rank: fn(const ParamSpec&, T* values, T* grads).
  template <class F>
  void for_each_param(F&& fn) {
    for (std::size_t u = 0; u < model_.units().size(); ++u)
      if (model_.holds(u))
        for (const auto& p : model_.units()[u].params) fn(p, model_.params(u) + p.offset, model_.grads(u) + p.offset);
  }

  /// Forward and backward of a batch without an optimizer step: gradients of the token-mean
  /// loss are left in the gradient buffers; returns the loss.
  double compute_gradients(const BatchView& batch) {
    batch.validate(Model::vocab_size);
    model_.zero_grads();
    const std::int64_t targets = batch.target_count();
    const double sum = accumulate(batch, targets > 0 ? T(1) / static_cast<T>(targets) : T(0));
    return targets > 0 ? sum / static_cast<double>(targets) : 0.0;
  }

  Stack& model() { return model_; }
  const MemoryStats& memory() const { return arena_.stats(); }
  std::int64_t steps_taken() const { return step_; }
  const TrainOptions& options() const { return opts_; }

 private:
  template <class F>
  void for_each_micro_batch(const BatchView& b, F&& fn) {
    const std::int64_t mb = opts_.micro_batch_rows > 0 ? opts_.micro_batch_rows : b.rows;
    for (std::int64_t r = 0; r < b.rows; r += mb) fn(b.slice(r, std::min(mb, b.rows - r)));
  }

  // Forward + backward of every micro-batch, gradients accumulating; returns the loss sum.
  double accumulate(const BatchView& batch, T scale) {
    double sum = 0;
    for_each_micro_batch(batch, [&](const BatchView& mb) {
      model_.forward(mb, acts_);
      if (d_.size() < static_cast<std::size_t>(mb.tokens() * Model::hidden))
        d_ = Buffer<T, Arena>(arena_, static_cast<std::size_t>(mb.tokens() * Model::hidden), Memory::buffers);
      sum += model_.loss(acts_, scale, d_.data()).sum;
      model_.backward(acts_, d_.data());
    });
    return sum;
  }

  double grad_norm() {
    double s = 0;
    for (std::size_t u = 0; u < model_.units().size(); ++u)
      if (model_.holds(u)) s += Ops<Dev>::sum_squares(model_.grads(u), model_.units()[u].numel);
    return std::sqrt(s);
  }

  void scale_grads(T f) {
    for (std::size_t u = 0; u < model_.units().size(); ++u)
      if (model_.holds(u)) Ops<Dev>::scale(model_.grads(u), f, model_.units()[u].numel);
  }

  TrainOptions opts_;
  Arena arena_;
  Stack model_;
  LrSchedule schedule_;
  std::vector<AdamState<T, Arena>> adam_;
  Activations<T, Arena> acts_;
  Buffer<T, Arena> d_;
  std::int64_t step_ = 0;
};

}  // namespace seqpar::inline v0

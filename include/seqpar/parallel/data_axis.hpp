#pragma once
// DataAxis: what the data-parallel ranks do with gradients, optimizer state and
// parameters. Stage 0 (Replicated) all-reduces full gradients; ZeRO-1 reduce-scatters
// them and updates a shard of the optimizer state; ZeRO-2 keeps only the gradient shard,
// reducing each unit as soon as its gradients are complete; ZeRO-3 also keeps only a
// parameter shard, gathering each unit just before it is used and freeing it after.
//
// Every unit's flat buffer is padded to a multiple of the degree N and cut into N equal
// shards; rank r owns elements [r s, (r + 1) s) of each unit.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "seqpar/backend/device.hpp"
#include "seqpar/nn/model.hpp"
#include "seqpar/optim/adamw.hpp"
#include "seqpar/parallel/any_comm.hpp"

namespace seqpar::inline v0 {

template <class Stack, Device D, class T>
class DataAxis final : public UnitHooks {
 public:
  using Arena = typename Stack::Arena;
  /// The type of the optimizer's master weights and moments (float for 16-bit T).
  using Master = typename AdamState<T, Arena>::Master;

  DataAxis(Stack& model, AnyComm comm, int zero_stage)
      : model_(&model), comm_(std::move(comm)), zero_(zero_stage), n_(comm_.size()), r_(comm_.rank()) {
    const auto units = model.units().size();
    shards_.resize(units);
    adam_.resize(units);
    grad_shard_.resize(units);
    param_shard_.resize(units);
    held_.assign(units, false);
    Arena& ar = model.arena();
    for (std::size_t u = 0; u < units; ++u) {
      if (!model.holds(u)) continue;
      const std::int64_t s = model.padded_numel(u) / n_;
      // Replicated ranks keep the whole unit's optimizer state; ZeRO ranks one shard.
      auto& sh = shards_[u];
      sh = zero_ == 0 ? Range{0, model.units()[u].numel} : Range{r_ * s, std::min((r_ + 1) * s, model.units()[u].numel)};
      sh.size = zero_ == 0 ? model.padded_numel(u) : s;
      adam_init<D>(adam_[u], ar, sh.begin, std::max(sh.begin, sh.end), sh.size,
                   model.params(u) + (zero_ == 0 ? 0 : sh.begin));
      if (zero_ == 1) grad_shard_[u] = Buffer<T, Arena>(ar, static_cast<std::size_t>(s), Memory::buffers);
      if (zero_ >= 2) {
        grad_shard_[u] = Buffer<T, Arena>(ar, static_cast<std::size_t>(s), Memory::gradients);
        model.grad_buffer(u).reset();
      }
      if (zero_ == 3) {
        param_shard_[u] = Buffer<T, Arena>(ar, static_cast<std::size_t>(s), Memory::parameters);
        Ops<D>::copy(param_shard_[u].data(), model.params(u) + r_ * s, s);
        model.param_buffer(u).reset();
      }
    }
    model.set_hooks(this);
  }
  ~DataAxis() override { model_->set_hooks(nullptr); }
  DataAxis(const DataAxis&) = delete;
  DataAxis& operator=(const DataAxis&) = delete;

  int degree() const { return n_; }
  int rank() const { return r_; }
  int zero_stage() const { return zero_; }
  AnyComm& comm() { return comm_; }

  /// Zeroes the gradients a step accumulates into.
  void begin_step() {
    if (zero_ < 2) return model_->zero_grads();
    for (auto& g : grad_shard_)
      if (!g.empty()) Ops<D>::fill(g.data(), T(0), static_cast<std::int64_t>(g.size()));
  }

  // --- the hooks the model calls -------------------------------------------------------
  void acquire(std::size_t u, bool grads) override {
    if (zero_ == 3 && !held_[u]) gather_params(u, model_->param_buffer(u));
    held_[u] = true;
    if (grads && zero_ >= 2 && model_->grad_buffer(u).empty())
      model_->grad_buffer(u) = Buffer<T, Arena>(model_->arena(), static_cast<std::size_t>(model_->padded_numel(u)), Memory::buffers);
  }
  void release(std::size_t u) override {
    if (zero_ == 3) model_->param_buffer(u).reset();
    held_[u] = false;
  }
  void grads_ready(std::size_t u) override {
    if (zero_ < 2) return;  // reduced once per step, after the last micro-batch
    reduce_scatter_into(u, grad_shard_[u].data(), /*accumulate=*/true);
    model_->grad_buffer(u).reset();
  }

  // --- once per step ------------------------------------------------------------------
  /// After the last micro-batch: sum the gradients over the data ranks. Every rank's
  /// gradient is already divided by the global token count, so the sum is the mean.
  void reduce_gradients() {
    for (std::size_t u = 0; u < shards_.size(); ++u) {
      if (!model_->holds(u)) continue;
      if (zero_ == 0) comm_.all_reduce(model_->grads(u), static_cast<std::size_t>(model_->padded_numel(u)), ReduceOp::sum);
      if (zero_ == 1) reduce_scatter_into(u, grad_shard_[u].data(), false);
    }
  }

  /// Sum over the data axis of weight(u, spec) x the squared gradients of each tensor,
  /// every element counted once (weights let a caller count replicated copies once).
  /// The sum is taken on the device and read once.
  template <class Weight>
  double grad_square_sum(Weight&& weight) {
    if (square_sum_.empty()) square_sum_ = Buffer<double, Arena>(model_->arena(), 1, Memory::buffers);
    double s = 0;
    Ops<D>::upload(square_sum_.data(), &s, 1);
    for (std::size_t u = 0; u < shards_.size(); ++u) {
      if (!model_->holds(u)) continue;
      const std::int64_t b = zero_ == 0 ? 0 : shards_[u].begin;
      const T* g = grad_of(u);
      for (const auto& spec : model_->units()[u].params) {
        const std::int64_t lo = std::max(b, spec.offset), hi = std::min(b + shards_[u].size, spec.offset + spec.numel());
        if (lo < hi) Ops<D>::sum_squares_accumulate(square_sum_.data(), g + (lo - b), hi - lo, weight(u, spec));
      }
    }
    Ops<D>::download(&s, square_sum_.data(), 1);
    if (zero_ > 0) comm_.all_reduce(&s, 1, ReduceOp::sum);
    return s;
  }

  void scale_grads(T f) {
    for (std::size_t u = 0; u < shards_.size(); ++u)
      if (model_->holds(u)) Ops<D>::scale(grad_of(u), f, shards_[u].size);
  }

  /// AdamW on this rank's range of every unit, then the parameters made whole again
  /// where the plan keeps them whole (ZeRO-1/2 all-gather; ZeRO-3 keeps the shard).
  /// `grad_factor` multiplies the gradients first (16-bit models: 1 / loss scale x clip).
  void optimizer_step(const kernels::AdamCoeffs& c, double grad_factor = 1.0) {
    for (std::size_t u = 0; u < shards_.size(); ++u) {
      if (!model_->holds(u)) continue;
      const auto& sh = shards_[u];
      T* p = zero_ == 3 ? param_shard_[u].data() : model_->params(u) + (zero_ == 0 ? 0 : sh.begin);
      adamw_update<D>(p, grad_of(u), adam_[u], model_->units()[u], c, grad_factor);
      if ((zero_ == 1 || zero_ == 2) && n_ > 1) {  // one rank updated the whole unit in place
        Buffer<T, Arena> mine(model_->arena(), static_cast<std::size_t>(sh.size), Memory::buffers);
        Ops<D>::copy(mine.data(), model_->params(u) + r_ * sh.size, sh.size);
        comm_.all_gather(mine.data(), model_->params(u), static_cast<std::size_t>(sh.size));
      }
    }
  }

  /// Unit u's full parameters (padded_numel(u) values) copied into host memory; ZeRO-3
  /// gathers them.
  void read_params(std::size_t u, T* host) {
    const std::int64_t n = model_->padded_numel(u);
    if (zero_ != 3) return Ops<D>::download(host, model_->params(u), n);
    Buffer<T, Arena> full;
    gather_params(u, full);
    Ops<D>::download(host, full.data(), n);
  }

  /// Sets unit u's full parameters from host memory (padded_numel(u) values of the master
  /// type: float for 16-bit models, else T): the model's copy (or ZeRO-3 shard) gets them
  /// rounded to T, the master weights of this rank's range get them exactly.
  void write_params(std::size_t u, const Master* host) {
    const std::int64_t n = model_->padded_numel(u);
    const auto& sh = shards_[u];
    Buffer<Master, Arena> full(model_->arena(), static_cast<std::size_t>(n), Memory::buffers);
    Ops<D>::upload(full.data(), host, n);
    if (zero_ == 3)
      Ops<D>::convert(param_shard_[u].data(), full.data() + r_ * sh.size, sh.size);
    else
      Ops<D>::convert(model_->params(u), full.data(), n);
    if constexpr (AdamState<T, Arena>::mixed)
      Ops<D>::copy(adam_[u].master.data(), full.data() + (zero_ == 0 ? 0 : sh.begin), sh.size);
  }

  /// The reduced gradients of unit u this rank updates (range_size(u) elements).
  T* grad_storage(std::size_t u) { return grad_of(u); }

  /// Moment buffers of unit u over this rank's range (checkpoints).
  AdamState<T, Arena>& adam_state(std::size_t u) { return adam_[u]; }
  /// Elements [begin, end) of unit u this rank updates; `size` is the padded shard length.
  std::int64_t range_begin(std::size_t u) const { return shards_[u].begin; }
  std::int64_t range_size(std::size_t u) const { return shards_[u].size; }

 private:
  struct Range {
    std::int64_t begin = 0, end = 0, size = 0;
  };

  T* grad_of(std::size_t u) { return zero_ == 0 ? model_->grads(u) : grad_shard_[u].data(); }

  // With one rank the collectives are device copies (device memory never passes through a
  // host communicator's copy).
  void gather_params(std::size_t u, Buffer<T, Arena>& full) {
    full = Buffer<T, Arena>(model_->arena(), static_cast<std::size_t>(model_->padded_numel(u)), Memory::buffers);
    if (n_ == 1) return Ops<D>::copy(full.data(), param_shard_[u].data(), shards_[u].size);
    comm_.all_gather(param_shard_[u].data(), full.data(), static_cast<std::size_t>(shards_[u].size));
  }

  // Sum of unit u's full gradients over the ranks, this rank's shard into `out`.
  void reduce_scatter_into(std::size_t u, T* out, bool accumulate) {
    const std::int64_t s = shards_[u].size;
    if (n_ == 1) return accumulate ? Ops<D>::add(out, model_->grads(u), s) : Ops<D>::copy(out, model_->grads(u), s);
    if (!accumulate) {
      comm_.reduce_scatter(model_->grads(u), out, static_cast<std::size_t>(s), ReduceOp::sum);
      return;
    }
    Buffer<T, Arena> part(model_->arena(), static_cast<std::size_t>(s), Memory::buffers);
    comm_.reduce_scatter(model_->grads(u), part.data(), static_cast<std::size_t>(s), ReduceOp::sum);
    Ops<D>::add(out, part.data(), s);
  }

  Stack* model_;
  AnyComm comm_;
  int zero_, n_, r_;
  std::vector<Range> shards_;
  std::vector<AdamState<T, Arena>> adam_;
  std::vector<Buffer<T, Arena>> grad_shard_, param_shard_;
  std::vector<bool> held_;
  Buffer<double, Arena> square_sum_;  // [1] the gradient norm's sum, on the device
};

}  // namespace seqpar::inline v0

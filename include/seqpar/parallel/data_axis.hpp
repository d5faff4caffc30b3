#pragma once
// DataAxis: what the data-parallel ranks do with gradients, optimizer state and
// parameters. Stage 0 (Replicated) all-reduces full gradients; ZeRO-1 reduce-scatters
// them and updates a shard of the optimizer state; ZeRO-2 keeps only the gradient shard,
// reducing each unit as soon as its gradients are complete; ZeRO-3 also keeps only a
// parameter shard, gathering each unit just before it is used and freeing it after.
//
// Reductions start as soon as a unit's gradients are complete: for Replicated and ZeRO-1
// in the last micro-batch's backward, for ZeRO-2/3 in every micro-batch's. They are the
// async collectives of AnyComm, so on a communicator with its own stream (NcclComm) they
// run while the backward goes on through the units before; reduce_gradients() joins them.
// On such a communicator ZeRO-2/3 keep one unit's reduction in flight: its gradient buffer
// is freed, and its result added into the shard, when the next unit is ready (or at the
// join), so two units' full gradients exist at once; and ZeRO-3 gathers the parameters of
// the unit expected next (the next one forward, the one before backward, the tied table
// after the last) while the current one computes, so two units' full parameters exist at
// once besides the tied table, which a stage with the embedding keeps from the loss to the
// end of its backward. Elsewhere each collective finishes at once and nothing is gathered
// ahead.
//
// Every unit's flat buffer is padded to a multiple of the degree N and cut into N equal
// shards; rank r owns elements [r s, (r + 1) s) of each unit.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <vector>

#include "seqpar/backend/device.hpp"
#include "seqpar/comm/any_comm.hpp"
#include "seqpar/config/units.hpp"
#include "seqpar/optim/adamw.hpp"
#include "seqpar/optim/segments.hpp"
#include "seqpar/parallel/unit_hooks.hpp"

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
  ~DataAxis() override {
    // A buffer a queued collective may still use (a gather ahead) goes back to the
    // allocator only behind it; a failing join here has nothing left to protect.
    try {
      if (std::uncaught_exceptions() == 0) comm_.join();
    } catch (...) {
    }
    model_->set_hooks(nullptr);
  }
  DataAxis(const DataAxis&) = delete;
  DataAxis& operator=(const DataAxis&) = delete;

  int degree() const { return n_; }
  int rank() const { return r_; }
  int zero_stage() const { return zero_; }
  AnyComm& comm() { return comm_; }

  /// Zeroes the gradients a step of `micro_batches` micro-batches accumulates into.
  void begin_step(std::int64_t micro_batches) {
    micro_batches_ = micro_batches;
    drop_gathered_ahead();
    ready_count_.assign(shards_.size(), 0);
    if (zero_ < 2) return model_->zero_grads();
    for (auto& g : grad_shard_)
      if (!g.empty()) Ops<D>::fill(g.data(), T(0), static_cast<std::int64_t>(g.size()));
  }

  // --- the hooks the model calls -------------------------------------------------------
  void acquire(std::size_t u, bool grads) override {
    if (zero_ == 3 && !held_[u]) take_params(u);
    held_[u] = true;
    if (zero_ == 3) gather_ahead(expected_after(u, grads));
    previous_ = u;
    if (grads && zero_ >= 2 && model_->grad_buffer(u).empty())
      model_->grad_buffer(u) = Buffer<T, Arena>(model_->arena(), static_cast<std::size_t>(model_->padded_numel(u)), Memory::buffers);
  }
  void release(std::size_t u) override {
    if (zero_ == 3) model_->param_buffer(u).reset();
    held_[u] = false;
  }
  void grads_ready(std::size_t u) override {
    const bool last = ++ready_count_[u] == micro_batches_;
    if (zero_ < 2) {
      if (last) start_reduction(u);  // the gradients are whole once per step
      return;
    }
    finish_in_flight();
    const std::int64_t s = shards_[u].size;
    if (n_ == 1) {
      Ops<D>::add(grad_shard_[u].data(), model_->grads(u), s);
      model_->grad_buffer(u).reset();
      return;
    }
    in_flight_.unit = u;
    in_flight_.grads = std::move(model_->grad_buffer(u));  // the model allocates anew when needed
    in_flight_.part = Buffer<T, Arena>(model_->arena(), static_cast<std::size_t>(s), Memory::buffers);
    in_flight_.ticket = comm_.reduce_scatter_async(in_flight_.grads.data(), in_flight_.part.data(),
                                                   static_cast<std::size_t>(s), ReduceOp::sum);
    if (!comm_.asynchronous()) finish_in_flight();  // it has run: free its buffers now
  }

  // --- once per step ------------------------------------------------------------------
  /// After the last micro-batch: the gradients summed over the data ranks (reductions not
  /// started during the backward start here), every reduction joined. Every rank's
  /// gradient is already divided by the global token count, so the sum is the mean.
  void reduce_gradients() {
    for (std::size_t u = 0; u < shards_.size(); ++u)
      if (model_->holds(u) && zero_ < 2 && ready_count_[u] < micro_batches_) start_reduction(u);
    comm_.join();
    finish_in_flight();
    drop_gathered_ahead();  // the optimizer is about to change the shards
  }

  /// Sum over the data axis of weight(u, spec) x the squared gradients of each tensor,
  /// every element counted once (weights let a caller count replicated copies once).
  /// The sum is taken on the device, a unit a call, and read once.
  template <class Weight>
  double grad_square_sum(Weight&& weight) {
    if (square_sum_.empty()) square_sum_ = Buffer<double, Arena>(model_->arena(), 1, Memory::buffers);
    double s = 0;
    Ops<D>::upload(square_sum_.data(), &s, 1);
    for (std::size_t u = 0; u < shards_.size(); ++u) {
      if (!model_->holds(u)) continue;
      const std::int64_t b = zero_ == 0 ? 0 : shards_[u].begin;
      const T* g = grad_of(u);
      for_each_segments<double>(
          model_->units()[u], b, b + shards_[u].size, [&](const ParamSpec& spec) { return weight(u, spec); },
          [&](std::int64_t k, const kernels::Segments<double>& w) {
            // A run of weight 0 (the last pipeline stage's copy of the tied table) is not read.
            if (std::any_of(w.value, w.value + w.count, [](double x) { return x != 0; }))
              Ops<D>::sum_squares_accumulate(square_sum_.data(), g + k, w);
          });
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
    drop_gathered_ahead();
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

  // Replicated and ZeRO-1: unit u's whole gradients summed over the ranks, in place or into
  // this rank's shard, queued behind the backward.
  void start_reduction(std::size_t u) {
    const auto total = static_cast<std::size_t>(model_->padded_numel(u));
    if (zero_ == 0) {
      comm_.all_reduce_async(model_->grads(u), total, ReduceOp::sum);
      return;
    }
    if (n_ == 1) return Ops<D>::copy(grad_shard_[u].data(), model_->grads(u), shards_[u].size);
    comm_.reduce_scatter_async(model_->grads(u), grad_shard_[u].data(), total / static_cast<std::size_t>(n_),
                               ReduceOp::sum);
  }

  // ZeRO-2/3: the reduction in flight joined, its shard added into the unit's gradient
  // shard and its buffers freed (after the join, so memory is reused only behind it).
  void finish_in_flight() {
    if (in_flight_.part.empty()) return;
    comm_.join(in_flight_.ticket);
    const std::size_t u = in_flight_.unit;
    Ops<D>::add(grad_shard_[u].data(), in_flight_.part.data(), shards_[u].size);
    in_flight_.part.reset();
    in_flight_.grads.reset();
  }

  // ZeRO-3: unit u's full parameters into the model, from the gather started ahead when it
  // is u's, else gathered now.
  void take_params(std::size_t u) {
    if (ahead_.unit == u && !ahead_.params.empty()) {
      comm_.join(ahead_.ticket);
      model_->param_buffer(u) = std::move(ahead_.params);
      return;
    }
    drop_gathered_ahead();
    gather_params(u, model_->param_buffer(u));
  }

  // The unit the model will most likely take after u: the next one in a forward (the tied
  // table after the last block, for the head), the one before in a backward. The table
  // taken right after the last unit is the head's, which a forward (evaluate, logits) or
  // the backward from the loss follows, not block 1: nothing is expected after it.
  std::size_t expected_after(std::size_t u, bool grads) const {
    const std::size_t last = held_.size() - 1;
    if (grads) return u > 0 ? u - 1 : no_unit;
    if (u == last) return 0;
    if (u == 0 && previous_ == last) return no_unit;
    return u + 1;
  }

  // ZeRO-3 on an asynchronous communicator: starts gathering unit u's parameters (unless
  // u is no unit, not on this stage, already present or another gather is ahead).
  void gather_ahead(std::size_t u) {
    if (!comm_.asynchronous() || u >= held_.size() || !model_->holds(u) || held_[u] || !ahead_.params.empty()) return;
    Buffer<T, Arena> params(model_->arena(), static_cast<std::size_t>(model_->padded_numel(u)), Memory::buffers);
    const CommTicket t = comm_.all_gather_async(param_shard_[u].data(), params.data(),
                                                static_cast<std::size_t>(shards_[u].size));
    ahead_.unit = u;
    ahead_.params = std::move(params);
    ahead_.ticket = t;
  }

  // A gather ahead that will not be used: joined (its memory is reused only behind it) and freed.
  void drop_gathered_ahead() {
    if (ahead_.params.empty()) return;
    comm_.join(ahead_.ticket);
    ahead_.params.reset();
  }

  // With one rank the collectives are device copies (device memory never passes through a
  // host communicator's copy).
  void gather_params(std::size_t u, Buffer<T, Arena>& full) {
    full = Buffer<T, Arena>(model_->arena(), static_cast<std::size_t>(model_->padded_numel(u)), Memory::buffers);
    if (n_ == 1) return Ops<D>::copy(full.data(), param_shard_[u].data(), shards_[u].size);
    comm_.all_gather(param_shard_[u].data(), full.data(), static_cast<std::size_t>(shards_[u].size));
  }

  Stack* model_;
  AnyComm comm_;
  int zero_, n_, r_;
  std::vector<Range> shards_;
  std::vector<AdamState<T, Arena>> adam_;
  std::vector<Buffer<T, Arena>> grad_shard_, param_shard_;
  std::vector<bool> held_;
  Buffer<double, Arena> square_sum_;  // [1] the gradient norm's sum, on the device
  std::int64_t micro_batches_ = 1;    // in this step
  std::vector<std::int64_t> ready_count_;  // per unit: micro-batches whose gradients are complete
  static constexpr std::size_t no_unit = static_cast<std::size_t>(-1);
  std::size_t previous_ = no_unit;  // the unit acquired last
  struct {
    std::size_t unit = 0;
    Buffer<T, Arena> grads, part;  // the unit's full gradients and this rank's reduced block
    CommTicket ticket;
  } in_flight_;  // ZeRO-2/3: the reduction not yet added into its shard
  struct {
    std::size_t unit = no_unit;
    Buffer<T, Arena> params;  // padded_numel(unit) values, being gathered
    CommTicket ticket;
  } ahead_;  // ZeRO-3 on an asynchronous communicator: the unit gathered ahead of its use
};

}  // namespace seqpar::inline v0

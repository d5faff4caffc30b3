#pragma once
// DataAxis<Sharded<Zero3, N>, ...>: ZeRO-2's gradient shards (ShardReduction), and only a
// shard of the parameters. Each use of a unit gathers its parameters and frees them after;
// on an asynchronous communicator the unit the stage uses next is gathered while the
// current one computes. "Next" is the stack's unit order (StageLayers::unit_order: the
// embedding, the blocks, ln_f, the tied table for the head), followed forward by a forward
// and backward from the head by a backward. With Offload::optimizer_and_params the
// parameter shards live in host memory, uploaded for each gather.

#ifndef SEQPAR_PARALLEL_DATA_AXIS_INCLUDED
#error \
    "parallel/data/zero3.hpp is a part of DataAxis: include seqpar/parallel/data_axis.hpp instead"
#endif

#include <algorithm>
#include <cstdint>
#include <vector>

#include "seqpar/parallel/data/axis_base.hpp"
#include "seqpar/parallel/data/shard_reduction.hpp"

namespace seqpar::inline v0 {

template <int N, UnitStore Stack, Device D, class T>
class DataAxis<Sharded<Zero3, N>, Stack, D, T> final
    : public detail::DataAxisBase<Stack, D, T, true> {
  using Base = detail::DataAxisBase<Stack, D, T, true>;
  using Arena = typename Base::Arena;
  using HostArenaT = typename Base::HostArenaT;
  using Reduction = detail::ShardReduction<Stack, D, T>;

 public:
  using typename Base::Master;
  static constexpr int zero_stage = 3;

  DataAxis(Stack& model, AnyComm comm, Offload offload = Offload::none)
      : Base(model, std::move(comm), Memory::gradients, offload),
        order_(model.unit_order()),
        params_offloaded_(offload == Offload::optimizer_and_params) {
    const auto units = model.units().size();
    param_shard_.resize(units);
    host_param_shard_.resize(units);
    held_.assign(units, false);
    for (std::size_t u = 0; u < units; ++u) {
      if (!model.holds(u)) continue;
      const std::int64_t s = this->range_size(u);
      const T* mine = model.params(u) + this->rank() * s;
      model.grad_buffer(u).reset();
      if (params_offloaded_) {
        host_param_shard_[u] = Buffer<T, HostArenaT>(
            this->host_arena(), static_cast<std::size_t>(s), Memory::host_parameters);
        Ops<D>::download(host_param_shard_[u].data(), mine, s);
      } else {
        param_shard_[u] =
            Buffer<T, Arena>(model.arena(), static_cast<std::size_t>(s), Memory::parameters);
        Ops<D>::copy(param_shard_[u].data(), mine, s);
      }
      model.param_buffer(u).reset();
    }
  }
  ~DataAxis() override { this->join_quietly(); }  // the gather ahead's buffer is freed behind it

  /// Zeroes the gradient shards a step of `micro_batches` micro-batches accumulates into.
  void begin_step(std::int64_t micro_batches) {
    drop_gathered_ahead();
    this->prepare_downloads();
    count_.begin_step(micro_batches, this->model().units().size());
    this->zero_grad_shards();
  }

  void acquire(std::size_t u, UnitUse use) override {
    if (!held_[u]) take_params(u);
    held_[u] = true;
    gather_ahead(expected_after(u, use));
    Reduction::provide_buffer(this->model(), u, use);
  }
  void release(std::size_t u) override {
    this->model().param_buffer(u).reset();
    held_[u] = false;
  }
  void grads_ready(std::size_t u) override {
    reduction_.add(this->model(), this->comm(), u, this->grad_storage(u), this->range_size(u),
                   count_.last(u), [this](std::size_t v) { this->gradients_complete(v); });
  }

  /// After the last micro-batch: every unit's gradients summed over the data ranks into
  /// this rank's shard, every collective joined.
  void reduce_gradients() {
    this->comm().join();
    reduction_.finish(this->comm(), [this](std::size_t v) { this->gradients_complete(v); });
    drop_gathered_ahead();  // the optimizer is about to change the shards
  }

  /// AdamW on this rank's shard of every unit (the parameters stay sharded). With the
  /// parameters offloaded the update stays on the host: the master weights rounded into
  /// the host shard.
  void optimizer_step(const kernels::AdamCoeffs& c, double grad_factor = 1.0) {
    for (std::size_t u = 0; u < param_shard_.size(); ++u) {
      if (!this->model().holds(u)) continue;
      if (!params_offloaded_) {
        this->update_range(u, param_shard_[u].data(), c, grad_factor);
        continue;
      }
      this->update_range(u, nullptr, c, grad_factor);
      this->master_to(u, host_param_shard_[u].data());
    }
  }

  /// Unit u's full parameters (padded_numel(u) values), gathered, copied into host memory.
  void read_params(std::size_t u, T* host) {
    Buffer<T, Arena> full;
    gather_params(u, full);
    Ops<D>::download(host, full.data(), this->model().padded_numel(u));
  }

  /// Sets unit u's parameters from its full values in host memory (padded_numel(u) values
  /// of the master type): this rank's shard gets them rounded to T, the master weights
  /// exactly.
  void write_params(std::size_t u, const Master* host) {
    const auto full = this->upload_full(u, host);
    drop_gathered_ahead();
    const std::int64_t s = this->range_size(u), at = this->rank() * s;
    if (params_offloaded_)
      std::transform(host + at, host + at + s, host_param_shard_[u].data(),
                     [](Master x) { return static_cast<T>(x); });
    else
      Ops<D>::convert(param_shard_[u].data(), full.data() + at, s);
    this->set_master(u, full.data(), host);
  }

 private:
  static constexpr std::size_t no_unit = static_cast<std::size_t>(-1);

  // Unit u's full parameters into the model, from the gather started ahead when it is
  // u's, else gathered now.
  void take_params(std::size_t u) {
    if (ahead_.unit == u && !ahead_.params.empty()) {
      this->comm().join(ahead_.ticket);
      this->model().param_buffer(u) = std::move(ahead_.params);
      ahead_.staging.reset();
      return;
    }
    drop_gathered_ahead();
    gather_params(u, this->model().param_buffer(u));
  }

  // The unit the stage uses after this use of u: the next one in the stack's unit order
  // for a forward (ln_f is followed by the tied table, for the head), the one before for
  // a use that writes gradients (the head's is followed by ln_f); nothing after a head
  // without a backward (an evaluation or the logits end there). The head's uses are the
  // order's last entry, every other use the unit's first one (unit 0 is at both ends on a
  // stage with the embedding and the head).
  std::size_t expected_after(std::size_t u, UnitUse use) const {
    const bool head = use == UnitUse::head || use == UnitUse::head_backward;
    const auto at = head ? order_.end() - 1 : std::find(order_.begin(), order_.end(), u);
    if (at == order_.end()) return no_unit;
    if (writes_grads(use)) return at == order_.begin() ? no_unit : *(at - 1);
    return at + 1 == order_.end() ? no_unit : *(at + 1);
  }

  // On an asynchronous communicator: starts gathering unit u's parameters (unless u is no
  // unit, not on this stage, already present or another gather is ahead).
  void gather_ahead(std::size_t u) {
    Stack& m = this->model();
    if (!this->comm().asynchronous() || u >= held_.size() || !m.holds(u) || held_[u] ||
        !ahead_.params.empty())
      return;
    Buffer<T, Arena> params(m.arena(), static_cast<std::size_t>(m.padded_numel(u)),
                            Memory::gathered_parameters);
    const CommTicket t =
        this->comm().all_gather_async(device_shard(u, ahead_.staging), params.data(),
                                      static_cast<std::size_t>(this->range_size(u)));
    ahead_.unit = u;
    ahead_.params = std::move(params);
    ahead_.ticket = t;
  }

  // A gather ahead that will not be used: joined (its memory is reused only behind it) and freed.
  void drop_gathered_ahead() {
    if (ahead_.params.empty()) return;
    this->comm().join(ahead_.ticket);
    ahead_.params.reset();
    ahead_.staging.reset();
  }

  // With one rank the collectives are device copies (device memory never passes through a
  // host communicator's copy).
  void gather_params(std::size_t u, Buffer<T, Arena>& full) {
    const std::int64_t s = this->range_size(u);
    full = Buffer<T, Arena>(this->model().arena(),
                            static_cast<std::size_t>(this->model().padded_numel(u)),
                            Memory::gathered_parameters);
    Buffer<T, Arena> staging;
    const T* shard = device_shard(u, staging);
    if (this->degree() == 1) return Ops<D>::copy(full.data(), shard, s);
    this->comm().all_gather(shard, full.data(), static_cast<std::size_t>(s));
  }

  // Unit u's parameter shard in device memory: the axis's own, or, offloaded, uploaded
  // from the host into `staging` (which must outlive the collective reading it).
  const T* device_shard(std::size_t u, Buffer<T, Arena>& staging) {
    if (!params_offloaded_) return param_shard_[u].data();
    const std::int64_t s = this->range_size(u);
    staging = Buffer<T, Arena>(this->model().arena(), static_cast<std::size_t>(s), Memory::buffers);
    Ops<D>::upload(staging.data(), host_param_shard_[u].data(), s);
    return staging.data();
  }

  const T* weights_range(std::size_t u) override { return param_shard_[u].data(); }

  std::vector<std::size_t> order_;  // the stack's units in forward order, the tied table last
  bool params_offloaded_;
  std::vector<Buffer<T, Arena>> param_shard_;            // [size] per unit, this rank's parameters
  std::vector<Buffer<T, HostArenaT>> host_param_shard_;  // the same in host memory, offloaded
  std::vector<bool> held_;  // per unit: its full parameters are in the model
  detail::MicroBatchCount count_;
  Reduction reduction_;
  struct {
    std::size_t unit = no_unit;
    Buffer<T, Arena> params;   // padded_numel(unit) values, being gathered
    Buffer<T, Arena> staging;  // parameters offloaded: the shard uploaded for the gather
    CommTicket ticket;
  } ahead_;  // on an asynchronous communicator: the unit gathered ahead of its use
};

}  // namespace seqpar::inline v0

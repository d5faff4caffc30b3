#pragma once
// DataAxis<Sharded<Zero1 | Zero2, N>, ...>: rank r updates shard r of every unit's
// optimizer state, then the parameters are all-gathered. ZeRO-1 keeps whole gradients in
// the model and reduce-scatters each unit's once per step, in the backward of its last
// micro-batch; ZeRO-2 keeps only the gradient shard, into which each micro-batch's
// gradients of a unit are reduced as soon as they are complete (ShardReduction).

#ifndef SEQPAR_PARALLEL_DATA_AXIS_INCLUDED
#error \
    "parallel/data/zero12.hpp is a part of DataAxis: include seqpar/parallel/data_axis.hpp instead"
#endif

#include <cstdint>

#include "seqpar/parallel/data/shard_reduction.hpp"
#include "seqpar/parallel/data/whole_params.hpp"

namespace seqpar::inline v0 {

template <class Z, int N, UnitStore Stack, Device D, class T>
requires(Z::stage == 1 || Z::stage == 2) class DataAxis<Sharded<Z, N>, Stack, D, T> final
    : public detail::WholeParamsAxis<Stack, D, T, true> {
  using Base = detail::WholeParamsAxis<Stack, D, T, true>;
  using Reduction = detail::ShardReduction<Stack, D, T>;

 public:
  static constexpr int zero_stage = Z::stage;

  // ZeRO-1's shard of the reduced gradients is a buffer beside the model's whole ones.
  DataAxis(Stack& model, AnyComm comm, Offload offload = Offload::none)
      : Base(model, std::move(comm), zero_stage == 1 ? Memory::buffers : Memory::gradients,
             offload) {
    if constexpr (zero_stage == 2)
      for (std::size_t u = 0; u < model.units().size(); ++u)
        if (model.holds(u)) model.grad_buffer(u).reset();
  }
  ~DataAxis() override { this->join_quietly(); }  // a reduction in flight is freed behind it

  /// Zeroes the gradients a step of `micro_batches` micro-batches accumulates into.
  void begin_step(std::int64_t micro_batches) {
    this->prepare_downloads();
    count_.begin_step(micro_batches, this->model().units().size());
    if constexpr (zero_stage == 1)
      this->model().zero_grads();
    else
      this->zero_grad_shards();
  }

  void acquire(std::size_t u, UnitUse use) override {
    if constexpr (zero_stage == 2) Reduction::provide_buffer(this->model(), u, use);
  }

  void grads_ready(std::size_t u) override {
    if constexpr (zero_stage == 1) {
      if (count_.last(u)) start_reduction(u);
    } else {
      reduction_.add(this->model(), this->comm(), u, this->grad_storage(u), this->range_size(u),
                     count_.last(u), [this](std::size_t v) { this->gradients_complete(v); });
    }
  }

  /// After the last micro-batch: every unit's gradients summed over the data ranks into
  /// this rank's shard, every reduction joined.
  void reduce_gradients() {
    if constexpr (zero_stage == 1)
      for (std::size_t u = 0; u < this->model().units().size(); ++u)
        if (this->model().holds(u) && !count_.whole(u)) start_reduction(u);
    this->comm().join();
    reduction_.finish(this->comm(), [this](std::size_t v) { this->gradients_complete(v); });
    this->downloads_after_join();
  }

 private:
  // ZeRO-1: unit u's whole gradients reduce-scattered into this rank's shard, queued
  // behind the backward.
  void start_reduction(std::size_t u) {
    Stack& m = this->model();
    const std::int64_t s = this->range_size(u);
    CommTicket t;
    if (this->degree() == 1)
      Ops<D>::copy(this->grad_storage(u), m.grads(u), s);
    else
      t = this->comm().reduce_scatter_async(m.grads(u), this->grad_storage(u),
                                            static_cast<std::size_t>(s), ReduceOp::sum);
    this->reduction_queued(u, t);
  }

  detail::MicroBatchCount count_;
  Reduction reduction_;  // ZeRO-2
};

}  // namespace seqpar::inline v0

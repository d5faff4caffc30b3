#pragma once
// DataAxis<Replicated<N>, ...>: every rank keeps and updates whole units; each unit's
// whole gradients are all-reduced in place once per step, as soon as its last
// micro-batch's are in (in the backward), queued behind it on an asynchronous communicator.

#ifndef SEQPAR_PARALLEL_DATA_AXIS_INCLUDED
#error \
    "parallel/data/replicated.hpp is a part of DataAxis: include seqpar/parallel/data_axis.hpp instead"
#endif

#include <cstdint>

#include "seqpar/parallel/data/shard_reduction.hpp"
#include "seqpar/parallel/data/whole_params.hpp"

namespace seqpar::inline v0 {

template <int N, UnitStore Stack, Device D, class T>
class DataAxis<Replicated<N>, Stack, D, T> final
    : public detail::WholeParamsAxis<Stack, D, T, false> {
  using Base = detail::WholeParamsAxis<Stack, D, T, false>;

 public:
  static constexpr int zero_stage = 0;

  DataAxis(Stack& model, AnyComm comm, Offload offload = Offload::none)
      : Base(model, std::move(comm), Memory::gradients, offload) {}

  /// Zeroes the gradients a step of `micro_batches` micro-batches accumulates into.
  void begin_step(std::int64_t micro_batches) {
    this->prepare_downloads();
    count_.begin_step(micro_batches, this->model().units().size());
    this->model().zero_grads();
  }

  void grads_ready(std::size_t u) override {
    if (count_.last(u)) start_reduction(u);
  }

  /// After the last micro-batch: the gradients summed over the data ranks (reductions not
  /// started during the backward start here), every reduction joined. Every rank's
  /// gradient is already divided by the global token count, so the sum is the mean.
  void reduce_gradients() {
    for (std::size_t u = 0; u < this->model().units().size(); ++u)
      if (this->model().holds(u) && !count_.whole(u)) start_reduction(u);
    this->comm().join();
    this->downloads_after_join();
  }

 private:
  void start_reduction(std::size_t u) {
    Stack& m = this->model();
    this->reduction_queued(
        u, this->comm().all_reduce_async(m.grads(u), static_cast<std::size_t>(m.padded_numel(u)),
                                         ReduceOp::sum));
  }

  detail::MicroBatchCount count_;
};

}  // namespace seqpar::inline v0

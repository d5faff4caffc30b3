#pragma once
// How a data axis reduces gradients over the micro-batches of a step: MicroBatchCount
// tells when a unit's gradients are whole for the step; ShardReduction (ZeRO-2/3) adds
// each micro-batch's gradients of a unit into this rank's shard as soon as they are
// complete, keeping one reduction in flight on an asynchronous communicator.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "seqpar/backend/device.hpp"
#include "seqpar/comm/any_comm.hpp"
#include "seqpar/core/arena.hpp"
#include "seqpar/parallel/unit_hooks.hpp"

namespace seqpar::inline v0::detail {

/// Which micro-batch completes each unit's gradients for the step.
class MicroBatchCount {
 public:
  void begin_step(std::int64_t micro_batches, std::size_t units) {
    micro_batches_ = micro_batches;
    ready_.assign(units, 0);
  }
  /// Unit u's gradients of one more micro-batch are in: whether they are whole now.
  bool last(std::size_t u) { return ++ready_[u] == micro_batches_; }
  /// Whether unit u's gradients were whole before the step's join (their reduction
  /// started in the backward).
  bool whole(std::size_t u) const { return ready_[u] >= micro_batches_; }

 private:
  std::int64_t micro_batches_ = 1;
  std::vector<std::int64_t> ready_;  // per unit: micro-batches whose gradients are complete
};

/// ZeRO-2/3: unit u's gradients of one micro-batch (the model's full buffer, which it
/// frees) reduce-scattered and added into this rank's shard. On an asynchronous
/// communicator the reduction stays in flight until the next unit's (or finish), so two
/// units' full gradients exist at once; elsewhere it is finished at once.
template <UnitStore Stack, Device D, class T>
class ShardReduction {
 public:
  using Arena = typename Stack::Arena;

  /// The model frees a unit's gradient buffer after each reduction; one is made again for
  /// a use that writes gradients.
  static void provide_buffer(Stack& model, std::size_t u, UnitUse use) {
    if (writes_grads(use) && model.grad_buffer(u).empty())
      model.grad_buffer(u) =
          Buffer<T, Arena>(model.arena(), static_cast<std::size_t>(model.padded_numel(u)),
                           Memory::unreduced_gradients);
  }

  /// Unit u's micro-batch gradients into `shard` (s values); `last`: the step's last
  /// micro-batch of u. complete(v) is called for each unit v whose shard has its last
  /// micro-batch's part added (the one in flight before, then u when it is done at once).
  template <class Complete>
  void add(Stack& model, AnyComm& comm, std::size_t u, T* shard, std::int64_t s, bool last,
           Complete&& complete) {
    finish(comm, complete);
    if (comm.size() == 1) {
      Ops<D>::add(shard, model.grads(u), s);
      model.grad_buffer(u).reset();
      if (last) complete(u);
      return;
    }
    in_flight_.unit = u;
    in_flight_.shard = shard;
    in_flight_.size = s;
    in_flight_.last = last;
    in_flight_.grads = std::move(model.grad_buffer(u));  // the model allocates anew when needed
    in_flight_.part =
        Buffer<T, Arena>(model.arena(), static_cast<std::size_t>(s), Memory::unreduced_gradients);
    in_flight_.ticket = comm.reduce_scatter_async(in_flight_.grads.data(), in_flight_.part.data(),
                                                  static_cast<std::size_t>(s), ReduceOp::sum);
    if (!comm.asynchronous()) finish(comm, complete);  // it has run: free its buffers now
  }

  /// The reduction in flight joined, its part added into its shard and its buffers freed
  /// (after the join, so memory is reused only behind it).
  template <class Complete>
  void finish(AnyComm& comm, Complete&& complete) {
    if (in_flight_.part.empty()) return;
    comm.join(in_flight_.ticket);
    Ops<D>::add(in_flight_.shard, in_flight_.part.data(), in_flight_.size);
    in_flight_.part.reset();
    in_flight_.grads.reset();
    if (in_flight_.last) complete(in_flight_.unit);
  }

 private:
  struct {
    std::size_t unit = 0;
    T* shard = nullptr;
    std::int64_t size = 0;
    Buffer<T, Arena> grads, part;  // the unit's full gradients and this rank's reduced block
    CommTicket ticket;
    bool last = false;  // the step's last micro-batch of the unit: its shard is then complete
  } in_flight_;
};

}  // namespace seqpar::inline v0::detail

#pragma once
// UnitHooks: the interface through which a data axis follows the model's use of each
// unit's buffers (parallel/data_axis.hpp implements it; nn/model.hpp calls it).

#include <cstddef>

namespace seqpar::inline v0 {

/// Called around each use of a unit's buffers, so that a data axis can gather sharded
/// parameters just in time (ZeRO-3) and reduce a unit's gradients as soon as they are
/// complete (ZeRO-2). The default does nothing: the buffers are always there.
struct UnitHooks {
  virtual ~UnitHooks() = default;
  /// Unit u's parameters (and, with `grads`, a gradient buffer) must be present.
  virtual void acquire(std::size_t /*u*/, bool /*grads*/) {}
  /// This use of unit u's parameters is over.
  virtual void release(std::size_t /*u*/) {}
  /// Unit u's gradients for this micro-batch are complete.
  virtual void grads_ready(std::size_t /*u*/) {}
};

}  // namespace seqpar::inline v0

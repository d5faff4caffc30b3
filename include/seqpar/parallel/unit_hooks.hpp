#pragma once
// UnitHooks: the interface through which a data axis follows the model's use of each
// unit's buffers (parallel/data_axis.hpp implements it; nn/model.hpp calls it).

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace seqpar::inline v0 {

/// Which use of a unit's parameters an acquire announces. A stage takes its units in
/// the order of StageLayers::unit_order: forward through them, the tied table as the LM
/// head, then backward through them in reverse; `head_backward` is the head of a loss
/// whose gradients follow, `head` one without (evaluation, logits).
enum class UnitUse : std::uint8_t { forward, head, head_backward, backward };

/// Whether a use writes the unit's gradients (a gradient buffer must be present).
constexpr bool writes_grads(UnitUse use) {
  return use == UnitUse::head_backward || use == UnitUse::backward;
}

/// Called around each use of a unit's buffers, so that a data axis can gather sharded
/// parameters just in time (ZeRO-3) and reduce a unit's gradients as soon as they are
/// complete (ZeRO-2). The default does nothing: the buffers are always there.
struct UnitHooks {
  virtual ~UnitHooks() = default;
  /// Unit u's parameters (and, for a use that writes gradients, a gradient buffer) must
  /// be present.
  virtual void acquire(std::size_t /*u*/, UnitUse /*use*/) {}
  /// This use of unit u's parameters is over.
  virtual void release(std::size_t /*u*/) {}
  /// Unit u's gradients for this micro-batch are complete.
  virtual void grads_ready(std::size_t /*u*/) {}
};

/// What a data axis uses of the stack whose units it serves: which units it holds, their
/// flat parameter and gradient buffers (padded to the data degree) in its arena, the order
/// it uses them in, and the hooks it calls.
template <class S>
concept UnitStore = requires(S& s, const S& cs, std::size_t u, UnitHooks* hooks) {
  typename S::Arena;
  typename S::Scalar;
  { cs.units().size() } -> std::convertible_to<std::size_t>;
  { cs.holds(u) } -> std::convertible_to<bool>;
  { cs.padded_numel(u) } -> std::convertible_to<std::int64_t>;
  { cs.unit_order() } -> std::convertible_to<std::vector<std::size_t>>;
  { s.params(u) } -> std::same_as<typename S::Scalar*>;
  { s.grads(u) } -> std::same_as<typename S::Scalar*>;
  s.param_buffer(u).reset();
  s.grad_buffer(u).reset();
  { s.arena() } -> std::same_as<typename S::Arena&>;
  s.set_hooks(hooks);
  s.zero_grads();
};

}  // namespace seqpar::inline v0

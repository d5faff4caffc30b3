#pragma once
// PipelineAxis: how S pipeline stages share a model of L blocks, and what the stages settle
// between them outside the micro-batch schedule. Stage p holds blocks [p L/S, (p + 1) L/S),
// the first stage also the embedding, the last ln_f and the LM head, which is tied to the
// embedding's table: with S > 1 the first and the last stage each hold a copy of the table,
// add each other's gradient of it (so both take the same step), and the copy of the last
// stage is counted neither in the gradient norm nor in a saved state.
//
// Units (the flat buffers of config/units.hpp): 0 the embedding (table + its layernorm),
// 1..L the blocks, L + 1 ln_f.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "seqpar/backend/device.hpp"
#include "seqpar/comm/any_comm.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::inline v0 {

/// The layers of one pipeline stage: blocks [first, last), the embedding on the first
/// stage, ln_f + the tied LM head + the loss on the last.
struct StageLayers {
  std::int64_t first = 0, last = 0;
  bool embedding = true, head = true;
  std::int64_t count() const { return last - first; }

  /// The layers stage p of `stages` holds of a model of `layers` blocks: layers / stages
  /// consecutive blocks, the embedding on stage 0, ln_f and the head on the last.
  static StageLayers of(std::int64_t layers, int stages, int p) {
    const std::int64_t per = layers / stages;
    return {p * per, (p + 1) * per, p == 0, p == stages - 1};
  }

  /// Whether the stage holds unit u of a model of `layers` blocks (the table of unit 0 is
  /// the head's too).
  bool holds(std::size_t u, std::int64_t layers) const {
    if (u == 0) return embedding || head;
    if (u == static_cast<std::size_t>(layers + 1)) return head;
    const auto l = static_cast<std::int64_t>(u) - 1;
    return l >= first && l < last;
  }

  /// The units the stage uses in the order of a forward: the embedding, the blocks, ln_f,
  /// then the tied table again for the head (unit 0 is at both ends on a stage with the
  /// embedding and the head). A backward takes them in reverse, from the head down.
  std::vector<std::size_t> unit_order(std::int64_t layers) const {
    std::vector<std::size_t> order;
    if (embedding) order.push_back(0);
    for (std::int64_t l = first; l < last; ++l) order.push_back(static_cast<std::size_t>(l + 1));
    if (head) {
      order.push_back(static_cast<std::size_t>(layers + 1));
      order.push_back(0);
    }
    return order;
  }
};

/// One rank's place on the pipeline axis: its stage of `stages`, the layers each stage
/// holds, and the exchange of the tied table's gradient between the first and last stage.
class PipelineAxis {
 public:
  /// Stage `comm.rank()` of `comm.size()` stages of a model of `layers` blocks; `comm`
  /// links the stages (a default AnyComm: one stage holding everything).
  PipelineAxis(std::int64_t layers, AnyComm comm) : layers_(layers), comm_(std::move(comm)) {
    SEQPAR_CHECK(layers_ % stages() == 0, "pipeline stage ", stage(), ": ", stages(),
                 " stages do not divide the model's ", layers_, " layers");
  }

  int stages() const { return comm_.size(); }
  int stage() const { return comm_.rank(); }
  bool first() const { return stage() == 0; }
  bool last() const { return stage() == stages() - 1; }

  /// The layers stage p holds (StageLayers::of).
  StageLayers layers_of(int p) const { return StageLayers::of(layers_, stages(), p); }
  /// This rank's layers.
  StageLayers layers() const { return layers_of(stage()); }

  /// Whether stage p contributes unit u to a saved state: every unit it holds, the tied
  /// table only from the first stage (the last stage's copy is the same values).
  bool sends(int p, std::size_t u) const {
    return layers_of(p).holds(u, layers_) && (u != 0 || p == 0);
  }

  /// Whether this stage holds the second copy of the tied table (the last of several stages).
  bool tied_copy() const { return stages() > 1 && last(); }
  /// The weight of unit u's gradients in the global norm's sum of squares on this stage:
  /// 0 for the second copy of the tied table (the first stage counts the table), else 1.
  double norm_weight(std::size_t u) const { return u == 0 && tied_copy() ? 0.0 : 1.0; }

  /// The first and the last stage each add the other's gradient of the tied table, `n`
  /// values at `grads` in device memory (this rank's range of unit 0). a + b == b + a
  /// exactly, so both copies take the same step and stay identical. Other stages, and a
  /// pipeline of one stage, do nothing.
  template <Device D, class T, class Arena>
  void sum_tied_gradients(T* grads, std::int64_t n, Arena& arena) {
    if (!sums_tied_gradients()) return;
    const int peer = first() ? stages() - 1 : 0;
    const auto count = static_cast<std::size_t>(n);
    Buffer<T, Arena> theirs(arena, count, Memory::buffers);
    // The first stage sends first and the last receives first, so that a communicator
    // whose send waits for the matching receive (NCCL) cannot deadlock here.
    if (first()) {
      comm_.send(grads, count, peer, tied_tag);
      comm_.recv(theirs.data(), count, peer, tied_tag);
    } else {
      comm_.recv(theirs.data(), count, peer, tied_tag);
      comm_.send(grads, count, peer, tied_tag);
    }
    Ops<D>::add(grads, theirs.data(), n);
  }

  /// Whether this stage's tied-table gradients change in sum_tied_gradients, after the
  /// backward (the first and last stage of a pipeline of several).
  bool sums_tied_gradients() const { return stages() > 1 && (first() || last()); }

  /// The message tag of the tied exchange (the schedules' activation tags stay below it).
  static constexpr int tied_tag = 32000;

 private:
  std::int64_t layers_;
  AnyComm comm_;
};

}  // namespace seqpar::inline v0

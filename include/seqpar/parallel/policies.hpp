#pragma once
// Parallel plans as types. A policy is an empty struct with a static degree and the tag
// of the axis it acts on; Hybrid composes them.

#include <cstdint>
#include <type_traits>

namespace seqpar::inline v0 {

/// A degree left to the communicator: the axis takes whatever size it is given.
inline constexpr int dynamic = 0;

struct DataAxisTag {};
struct TensorAxisTag {};
struct PipelineAxisTag {};

/// ZeRO stages: what the data-parallel ranks shard.
struct Zero1 {  // optimizer state
  static constexpr int stage = 1;
};
struct Zero2 {  // + gradients
  static constexpr int stage = 2;
};
struct Zero3 {  // + parameters
  static constexpr int stage = 3;
};

/// Data parallel: N full replicas, gradients all-reduced.
template <int N = dynamic>
struct Replicated {
  static_assert(N >= 0, "Replicated<N>: the degree must be positive (or dynamic).");
  using axis = DataAxisTag;
  static constexpr int degree = N;
  static constexpr int zero_stage = 0;
};

/// Data parallel with ZeRO sharding (Zero1, Zero2 or Zero3) over N ranks.
template <class Zero, int N = dynamic>
struct Sharded {
  static_assert(Zero::stage >= 1 && Zero::stage <= 3,
                "Sharded<Z, N>: Z must be Zero1, Zero2 or Zero3.");
  static_assert(N >= 0, "Sharded<Z, N>: the degree must be positive (or dynamic).");
  using axis = DataAxisTag;
  using zero = Zero;
  static constexpr int degree = N;
  static constexpr int zero_stage = Zero::stage;
};

/// Megatron-style tensor parallel over N ranks. (The degree may be spelled dynamic in a
/// plan, but a Trainer needs it static: it fixes every tensor's shape.)
template <int N>
struct TensorSplit {
  static_assert(N >= 0, "TensorSplit<N>: the degree must be positive.");
  using axis = TensorAxisTag;
  static constexpr int degree = N;
};

/// Pipeline schedules.
struct GPipe {};     // all forwards, then all backwards
struct OneFOneB {};  // one forward, one backward: at most S micro-batches in flight

/// Pipeline parallel over S stages (static in a Trainer: it fixes which layers a rank holds).
template <int S, class Schedule = OneFOneB>
struct Pipeline {
  static_assert(S >= 0, "Pipeline<S>: the number of stages must be positive.");
  static_assert(std::is_same_v<Schedule, GPipe> || std::is_same_v<Schedule, OneFOneB>,
                "Pipeline<S, Schedule>: the schedule must be GPipe or OneFOneB.");
  using axis = PipelineAxisTag;
  using schedule = Schedule;
  static constexpr int degree = S;
};

/// A composition of at most one axis of each kind.
template <class... Axes>
struct Hybrid {};

using DP2 = Replicated<2>;
using DP4 = Replicated<4>;
using TP2 = TensorSplit<2>;
using TP4 = TensorSplit<4>;
using PP2 = Pipeline<2>;
using PP4 = Pipeline<4>;

}  // namespace seqpar::inline v0

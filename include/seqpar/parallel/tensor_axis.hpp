#pragma once
// The collectives a tensor-split layer calls, as named hooks. A degree of one needs
// none: NoTensorAxis makes every hook a no-op the compiler removes.

#include <concepts>
#include <cstdint>

#include "seqpar/comm/any_comm.hpp"
#include "seqpar/core/profile.hpp"

namespace seqpar::inline v0 {

/// Tensor axis of size one: rank 0 of 1, every reduction the identity.
struct NoTensorAxis {
  static constexpr int degree = 1;
  int rank() const { return 0; }
  int size() const { return 1; }
  /// Sum of partial results over the tensor group (after a row-parallel linear).
  template <class T>
  void sum(T*, std::int64_t) {}
  /// Element-wise maximum over the tensor group (the vocab-parallel softmax).
  template <class T>
  void max(T*, std::int64_t) {}
};

/// A tensor-parallel group: the hooks are all-reduces over its communicator.
struct TensorGroup {
  AnyComm comm;
  int rank() const { return comm.rank(); }
  int size() const { return comm.size(); }
  template <class T>
  void sum(T* data, std::int64_t n) {
    const profile::Scope p(profile::Phase::communication);
    comm.all_reduce(data, static_cast<std::size_t>(n), ReduceOp::sum);
  }
  template <class T>
  void max(T* data, std::int64_t n) {
    const profile::Scope p(profile::Phase::communication);
    comm.all_reduce(data, static_cast<std::size_t>(n), ReduceOp::max);
  }
};

/// What a layer calls on the tensor axis: its rank and size, and the sum and maximum of
/// values over it (NoTensorAxis, TensorGroup).
template <class A>
concept TensorAxis = requires(A& a, float* f, double* d, std::int64_t n) {
  { a.rank() } -> std::convertible_to<int>;
  { a.size() } -> std::convertible_to<int>;
  a.sum(f, n);
  a.sum(d, n);
  a.max(f, n);
};
static_assert(TensorAxis<NoTensorAxis> && TensorAxis<TensorGroup>);

}  // namespace seqpar::inline v0

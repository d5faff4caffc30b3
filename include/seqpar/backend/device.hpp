#pragma once
// Device tags: where a trainer's tensors live and which backend runs its ops.

#include <concepts>

#include "seqpar/core/arena.hpp"

namespace seqpar::inline v0 {

/// Host memory, Eigen GEMMs, fp32 (fp64 for gradient checks).
struct Cpu {
  using allocator = HostAllocator;
  static constexpr const char* name = "cpu";
};

/// An NVIDIA GPU: cuBLAS(Lt) GEMMs and CUDA kernels (compiled only under nvcc).
struct Cuda;

/// A device tag names its allocator; the backend specialises Ops<Device>.
template <class D>
concept Device = requires {
  typename D::allocator;
  { D::name } -> std::convertible_to<const char*>;
};

template <class D>
using DeviceArena = BasicArena<typename D::allocator>;

/// The op set of a device; specialised in backend/<device>/ops.hpp.
template <class D>
struct Ops {
  static_assert(sizeof(D) == 0, "No backend for this device: include its ops header (backend/cpu/ops.hpp).");
};

}  // namespace seqpar::inline v0

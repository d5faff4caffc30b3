#pragma once
// Device tags: where a trainer's tensors live and which backend runs its ops.

#include <concepts>
#include <type_traits>

#include "seqpar/core/arena.hpp"
#include "seqpar/core/dtype.hpp"

namespace seqpar::inline v0 {

/// Which device a trainer runs on, where a program chooses it at run time.
enum class DeviceKind { cpu, cuda };

/// "cpu" or "cuda": the device's name in files and messages.
constexpr const char* device_name(DeviceKind d) { return d == DeviceKind::cuda ? "cuda" : "cpu"; }

/// Host memory: packed AVX2 / AVX-512 GEMMs (Eigen elsewhere); fp32, fp64 for gradient
/// checks, and bf16 or fp16 storage with fp32 arithmetic (Bf16Mixed, Fp16Mixed).
struct Cpu {
  using allocator = HostAllocator;
  using host_allocator = HostAllocator;  // offloaded state (its device memory is host memory)
  static constexpr DeviceKind kind = DeviceKind::cpu;
  static constexpr const char* name = device_name(kind);
};

/// An NVIDIA GPU: cuBLAS(Lt) GEMMs and CUDA kernels (compiled only under nvcc).
struct Cuda;

/// A device tag names its allocator; the backend specialises Ops<Device>.
template <class D>
concept Device = requires {
  typename D::allocator;
  { D::kind } -> std::convertible_to<DeviceKind>;
  { D::name } -> std::convertible_to<const char*>;
};

template <class D>
using DeviceArena = BasicArena<typename D::allocator>;
/// The arena of the host memory that device D's offloaded state lives in (pinned on Cuda);
/// on Cpu it is the type of the device arena itself, and a rank keeps one for both.
template <class D>
using HostArena = BasicArena<typename D::host_allocator>;

/// The op set of a device; specialised in backend/<device>/ops.hpp.
template <class D>
struct Ops {
  static_assert(
      sizeof(D) == 0,
      "No backend for this device: include its ops header (backend/cpu/ops.hpp); "
      "for Cpu link seqpar::cpu (find_package(seqpar COMPONENTS cpu)), which brings Eigen.");
};

/// The element type device D stores values of dtype `dt` in. float and double are
/// themselves everywhere; a backend with 16-bit storage specialises bf16 and f16 (the CPU
/// below: the host bit types of core/dtype.hpp; backend/cuda/device.hpp: __nv_bfloat16
/// and __half).
template <class D, DType dt>
struct StorageOf {
  static_assert(sizeof(D) == 0,
                "This device has no storage for this dtype: a model is stored in f32 or f64, "
                "or in bf16 or f16 (Bf16Mixed, Fp16Mixed) on Cpu and on Cuda (compiled by nvcc, "
                "or with SEQPAR_CUDA_BACKEND); include the device's backend header.");
};
template <class D>
struct StorageOf<D, DType::f32> {
  using type = float;
};
template <class D>
struct StorageOf<D, DType::f64> {
  using type = double;
};
/// 16-bit storage on the CPU: the bits of bf16 and fp16 values (Float16), widened to fp32
/// for every operation and rounded once to nearest even when stored.
template <>
struct StorageOf<Cpu, DType::bf16> {
  using type = Bf16Bits;
};
template <>
struct StorageOf<Cpu, DType::f16> {
  using type = F16Bits;
};

/// The dtype a storage type holds: the inverse of StorageOf. A backend with 16-bit storage
/// specialises it for its types (backend/cuda/device.hpp); the host's bit types are theirs.
template <class T>
struct StorageDType {
  static_assert(sizeof(T) == 0,
                "StorageDType<T>: T is not a storage type of any backend included here "
                "(float, double, Float16<bf16 or f16>, or a backend's 16-bit type).");
};
template <>
struct StorageDType<float> {
  static constexpr DType value = DType::f32;
};
template <>
struct StorageDType<double> {
  static constexpr DType value = DType::f64;
};
template <DType D>
struct StorageDType<Float16<D>> {
  static constexpr DType value = D;
};

/// The type of per-row statistics and optimizer state for storage type T: float for
/// 16-bit storage (layernorm mean and rstd, ALiBi positions and slopes, softmax maxima
/// and sums, master weights and moments), T itself for float and double.
template <class T>
using StatScalar = WideType<T>;

}  // namespace seqpar::inline v0

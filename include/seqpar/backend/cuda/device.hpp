#pragma once
// The Cuda device tag and its allocator: device memory from cudaMalloc (never managed
// memory), zeroed on the calling thread's stream. Seen where SEQPAR_CUDA_BACKEND is defined
// (core/separate_compilation.hpp).

#include "seqpar/core/separate_compilation.hpp"

#if defined(SEQPAR_CUDA_BACKEND)

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "seqpar/backend/cuda/context.hpp"
#include "seqpar/backend/cuda/error.hpp"
#include "seqpar/backend/device.hpp"

namespace seqpar::inline v0 {

/// Device memory of the current device: cudaMalloc'ed blocks (never managed memory)
/// through the calling thread's CudaContext, which keeps freed blocks for reuse; filling
/// (a Buffer's zeroing) queued on the calling thread's stream (so a Buffer is zero for
/// every op that thread queues after it).
struct CudaAllocator {
  static constexpr std::size_t alignment = 256;  // what cudaMalloc guarantees

  static void* allocate(std::size_t bytes) { return CudaContext::current().allocate(bytes); }

  // Called from destructors: nothing is thrown. A failure of an earlier kernel surfaces
  // at the next checked call.
  static void deallocate(void* p, std::size_t bytes) noexcept {
    CudaContext::current().deallocate(p, bytes);
  }

  static void fill(void* p, unsigned char byte, std::size_t bytes) {
    SEQPAR_CUDA_CHECK(cudaMemsetAsync(p, byte, bytes, CudaContext::current().stream()));
  }
};

/// Pinned (page-locked) host memory from cudaHostAlloc, for the state a rank offloads to
/// the host: copies between it and the device run at full PCIe speed and can be queued on
/// a stream. Its arena keeps freed blocks for reuse (pinning is slow); filled on the host.
struct PinnedHostAllocator {
  static constexpr std::size_t alignment = 64;
  static constexpr bool arena_caches = true;
  static void* allocate(std::size_t bytes) {
    void* p = nullptr;
    SEQPAR_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
    return p;
  }
  static void deallocate(void* p, std::size_t) noexcept { (void)cudaFreeHost(p); }
  static void fill(void* p, unsigned char byte, std::size_t bytes) {
    HostAllocator::fill(p, byte, bytes);
  }
};

/// An NVIDIA GPU: cuBLAS GEMMs and CUDA kernels, storage in float, bf16 or fp16 with fp32
/// accumulation. Ops<Cuda> is in backend/cuda/ops.hpp.
struct Cuda {
  using allocator = CudaAllocator;
  using host_allocator = PinnedHostAllocator;
  static constexpr DeviceKind kind = DeviceKind::cuda;
  static constexpr const char* name = device_name(kind);
};

static_assert(Device<Cuda>);

/// 16-bit storage on the GPU: bf16 as __nv_bfloat16, f16 as __half.
template <>
struct StorageOf<Cuda, DType::bf16> {
  using type = __nv_bfloat16;
};
template <>
struct StorageOf<Cuda, DType::f16> {
  using type = __half;
};

template <>
struct StorageDType<__nv_bfloat16> {
  static constexpr DType value = DType::bf16;
};
template <>
struct StorageDType<__half> {
  static constexpr DType value = DType::f16;
};

}  // namespace seqpar::inline v0

#endif  // SEQPAR_CUDA_BACKEND

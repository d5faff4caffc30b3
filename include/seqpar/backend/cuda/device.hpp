#pragma once
// The Cuda device tag and its allocator: device memory from cudaMalloc (never managed
// memory), zeroed on the calling thread's stream. Compiled only under nvcc.

#if defined(__CUDACC__)

#include <cuda_runtime.h>

#include <cstddef>

#include "seqpar/backend/cuda/context.hpp"
#include "seqpar/backend/cuda/error.hpp"
#include "seqpar/backend/device.hpp"

namespace seqpar::inline v0 {

/// Device memory of the current device: cudaMalloc / cudaFree, zeroing queued on the
/// calling thread's stream (so a Buffer is zero for every op that thread queues after it).
struct CudaAllocator {
  static constexpr std::size_t alignment = 256;  // what cudaMalloc guarantees

  static void* allocate(std::size_t bytes) {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      std::size_t free_bytes = 0, total_bytes = 0;
      int device = -1;
      (void)cudaGetDevice(&device);
      (void)cudaMemGetInfo(&free_bytes, &total_bytes);
      (void)cudaGetLastError();
      detail::fail(__FILE__, ":", __LINE__, ": cudaMalloc of ", bytes, " bytes on device ", device,
                   " failed: ", cudaGetErrorName(e), " (", cudaGetErrorString(e), "); ", free_bytes,
                   " of ", total_bytes, " bytes are free");
    }
    return p;
  }

  // Called from destructors: the status is not thrown. A failure here is a sticky error
  // of an earlier kernel, which the next checked call reports.
  static void deallocate(void* p, std::size_t) noexcept { (void)cudaFree(p); }

  static void zero(void* p, std::size_t bytes) {
    SEQPAR_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, CudaContext::current().stream()));
  }
};

/// An NVIDIA GPU: cuBLAS GEMMs and CUDA kernels, storage in float, bf16 or fp16 with fp32
/// accumulation. Ops<Cuda> is in backend/cuda/ops.hpp.
struct Cuda {
  using allocator = CudaAllocator;
  static constexpr const char* name = "cuda";
};

static_assert(Device<Cuda>);

}  // namespace seqpar::inline v0

#endif  // __CUDACC__

#pragma once
// AnyComm's collectives for the 16-bit CUDA storage types: a buffer of __nv_bfloat16 or
// __half crosses the communicator as Bf16Bits or F16Bits (the same 16 bits), so bf16 and
// fp16 models run every plan with the data-axis, tensor-axis and pipeline code of float
// ones. NcclComm reduces them natively; CudaThreadComm stages them through the host,
// where ThreadComm sums them in float and rounds each result once.
// Compiled only under nvcc.

#if defined(__CUDACC__)

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <type_traits>

#include "seqpar/backend/cuda/context.hpp"
#include "seqpar/backend/cuda/error.hpp"
#include "seqpar/core/dtype.hpp"
#include "seqpar/parallel/any_comm.hpp"

namespace seqpar::inline v0 {

static_assert(sizeof(__nv_bfloat16) == sizeof(Bf16Bits) && sizeof(__half) == sizeof(F16Bits));
static_assert(std::is_trivially_copyable_v<__nv_bfloat16> && std::is_trivially_copyable_v<__half>);

namespace detail {
// The group of no communicator (a default AnyComm): one rank's block is the whole input;
// the pointers may be device or host memory.
template <class T>
void copy_block(const T* in, T* out, std::size_t n) {
  if (n == 0 || in == out) return;
  SEQPAR_CUDA_CHECK(
      cudaMemcpyAsync(out, in, n * sizeof(T), cudaMemcpyDefault, CudaContext::current().stream()));
}
}  // namespace detail

#define SEQPAR_ANYCOMM_HALF(T, BITS)                                                     \
  template <>                                                                            \
  inline void AnyComm::all_reduce<T>(T * d, std::size_t n, ReduceOp op) {                \
    all_reduce(reinterpret_cast<BITS*>(d), n, op);                                       \
  }                                                                                      \
  template <>                                                                            \
  inline void AnyComm::reduce_scatter<T>(const T* in, T* out, std::size_t n, ReduceOp op) { \
    if (!impl_) return detail::copy_block(in, out, n);                                   \
    impl_->reduce_scatter(reinterpret_cast<const BITS*>(in), reinterpret_cast<BITS*>(out), n, op); \
  }                                                                                      \
  template <>                                                                            \
  inline void AnyComm::all_gather<T>(const T* in, T* out, std::size_t n) {               \
    if (!impl_) return detail::copy_block(in, out, n);                                   \
    impl_->all_gather(reinterpret_cast<const BITS*>(in), reinterpret_cast<BITS*>(out), n); \
  }                                                                                      \
  template <>                                                                            \
  inline void AnyComm::broadcast<T>(T * d, std::size_t n, int root) {                    \
    broadcast(reinterpret_cast<BITS*>(d), n, root);                                      \
  }                                                                                      \
  template <>                                                                            \
  inline void AnyComm::send<T>(const T* d, std::size_t n, int peer, int tag) {           \
    send(reinterpret_cast<const BITS*>(d), n, peer, tag);                                \
  }                                                                                      \
  template <>                                                                            \
  inline void AnyComm::recv<T>(T * d, std::size_t n, int peer, int tag) {                \
    recv(reinterpret_cast<BITS*>(d), n, peer, tag);                                      \
  }

SEQPAR_ANYCOMM_HALF(__nv_bfloat16, Bf16Bits)
SEQPAR_ANYCOMM_HALF(__half, F16Bits)
#undef SEQPAR_ANYCOMM_HALF

}  // namespace seqpar::inline v0

#endif  // __CUDACC__

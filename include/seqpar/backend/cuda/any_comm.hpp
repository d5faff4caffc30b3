#pragma once
// AnyComm's collectives for the 16-bit CUDA storage types (__nv_bfloat16, __half), so
// that a trainer of a bf16 or fp16 model compiles with the same data axis and pipeline
// code as a float one. The communicators move float, double and std::int64_t only:
// here a one-rank group does what any communicator does with one rank (nothing, or a
// copy), and a larger group refuses with a message. Compiled only under nvcc.

#if defined(__CUDACC__)

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "seqpar/backend/cuda/context.hpp"
#include "seqpar/backend/cuda/error.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/parallel/any_comm.hpp"

namespace seqpar::inline v0 {

namespace detail {
template <class T>
inline constexpr const char* half_name = "__half";
template <>
inline constexpr const char* half_name<__nv_bfloat16> = "__nv_bfloat16";

template <class T>
[[noreturn]] void no_half_collectives(const char* what, int size) {
  fail("AnyComm::", what, " of ", half_name<T>, " values on a group of ", size,
       " ranks: the communicators move float, double and int64 only, so plans with more than "
       "one rank on an axis do not run Bf16Mixed or Fp16Mixed models yet");
}

// One rank's block is the whole input; the pointers may be device or host memory.
template <class T>
void copy_block(const T* in, T* out, std::size_t n) {
  if (n == 0 || in == out) return;
  SEQPAR_CUDA_CHECK(
      cudaMemcpyAsync(out, in, n * sizeof(T), cudaMemcpyDefault, CudaContext::current().stream()));
}
}  // namespace detail

#define SEQPAR_ANYCOMM_HALF(T)                                                           \
  template <>                                                                            \
  inline void AnyComm::all_reduce<T>(T*, std::size_t, ReduceOp) {                        \
    if (size() > 1) detail::no_half_collectives<T>("all_reduce", size());                \
  }                                                                                      \
  template <>                                                                            \
  inline void AnyComm::reduce_scatter<T>(const T* in, T* out, std::size_t n, ReduceOp) { \
    if (size() > 1) detail::no_half_collectives<T>("reduce_scatter", size());            \
    detail::copy_block(in, out, n);                                                      \
  }                                                                                      \
  template <>                                                                            \
  inline void AnyComm::all_gather<T>(const T* in, T* out, std::size_t n) {               \
    if (size() > 1) detail::no_half_collectives<T>("all_gather", size());                \
    detail::copy_block(in, out, n);                                                      \
  }                                                                                      \
  template <>                                                                            \
  inline void AnyComm::broadcast<T>(T*, std::size_t, int) {                              \
    if (size() > 1) detail::no_half_collectives<T>("broadcast", size());                 \
  }                                                                                      \
  template <>                                                                            \
  inline void AnyComm::send<T>(const T*, std::size_t, int peer, int) {                   \
    SEQPAR_CHECK(size() > 1, "send to rank ", peer, " on a one-rank group");             \
    detail::no_half_collectives<T>("send", size());                                      \
  }                                                                                      \
  template <>                                                                            \
  inline void AnyComm::recv<T>(T*, std::size_t, int peer, int) {                         \
    SEQPAR_CHECK(size() > 1, "recv from rank ", peer, " on a one-rank group");           \
    detail::no_half_collectives<T>("recv", size());                                      \
  }

SEQPAR_ANYCOMM_HALF(__nv_bfloat16)
SEQPAR_ANYCOMM_HALF(__half)
#undef SEQPAR_ANYCOMM_HALF

}  // namespace seqpar::inline v0

#endif  // __CUDACC__

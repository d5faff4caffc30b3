#pragma once
// How the 16-bit CUDA storage types cross an AnyComm: a buffer of __nv_bfloat16 or __half
// goes as Bf16Bits or F16Bits (the same 16 bits), so bf16 and fp16 models run every plan
// with the data-axis, tensor-axis and pipeline code of float ones. NcclComm reduces them
// natively; CudaThreadComm stages them through the host, where ThreadComm sums them in
// float and rounds each result once. A one-rank group with no communicator copies a block
// with cudaMemcpyAsync (device or host memory). Seen where SEQPAR_CUDA_BACKEND is defined
// (core/separate_compilation.hpp).

#include "seqpar/core/separate_compilation.hpp"

#if defined(SEQPAR_CUDA_BACKEND)

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <type_traits>

#include "seqpar/backend/cuda/context.hpp"
#include "seqpar/backend/cuda/error.hpp"
#include "seqpar/comm/any_comm.hpp"
#include "seqpar/core/dtype.hpp"

namespace seqpar::inline v0 {

namespace detail {
template <class T, class Bits>
struct CudaHalfWire {
  static_assert(sizeof(T) == sizeof(Bits) && std::is_trivially_copyable_v<T>);
  using type = Bits;
  static void copy(const T* in, T* out, std::size_t n) {
    if (n == 0 || in == out) return;
    SEQPAR_CUDA_CHECK(cudaMemcpyAsync(out, in, n * sizeof(T), cudaMemcpyDefault,
                                      CudaContext::current().stream()));
  }
};
}  // namespace detail

template <>
struct CommWire<__nv_bfloat16> : detail::CudaHalfWire<__nv_bfloat16, Bf16Bits> {};
template <>
struct CommWire<__half> : detail::CudaHalfWire<__half, F16Bits> {};

}  // namespace seqpar::inline v0

#endif  // SEQPAR_CUDA_BACKEND

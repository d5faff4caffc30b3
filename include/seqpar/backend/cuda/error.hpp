#pragma once
// SEQPAR_CUDA_CHECK, SEQPAR_CUBLAS_CHECK and SEQPAR_CUDA_CHECK_LAUNCH: every CUDA runtime
// and cuBLAS call of the CUDA backend goes through them, and every kernel launch is
// followed by the launch check. A failure throws seqpar::Error naming file:line, the call
// and the runtime's own message. Seen where SEQPAR_CUDA_BACKEND is defined
// (core/separate_compilation.hpp).

#include "seqpar/core/separate_compilation.hpp"

#if defined(SEQPAR_CUDA_BACKEND)

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "seqpar/core/error.hpp"

namespace seqpar::inline v0::detail {

[[noreturn]] inline void cuda_fail(cudaError_t e, const char* call, const char* file, int line) {
  // Clear a non-sticky error, or the next launch check would report it a second time.
  (void)cudaGetLastError();
  fail(file, ":", line, ": CUDA call ", call, " failed: ", cudaGetErrorName(e), " (",
       cudaGetErrorString(e), ")");
}

[[noreturn]] inline void cublas_fail(cublasStatus_t s, const char* call, const char* file,
                                     int line) {
  fail(file, ":", line, ": cuBLAS call ", call, " failed: ", cublasGetStatusName(s), " (",
       cublasGetStatusString(s), ")");
}

}  // namespace seqpar::inline v0::detail

/// Evaluates `call` once and, when its status is not `ok`, throws by `fail` (one of the
/// *_fail functions of seqpar::detail) naming the call's `text`, file and line.
#define SEQPAR_STATUS_CHECK(call, text, ok, fail)                                                 \
  do {                                                                                            \
    const auto seqpar_status_ = (call);                                                           \
    if (seqpar_status_ != (ok)) ::seqpar::detail::fail(seqpar_status_, text, __FILE__, __LINE__); \
  } while (0)

/// Throws seqpar::Error when a CUDA runtime call does not return cudaSuccess.
#define SEQPAR_CUDA_CHECK(call) SEQPAR_STATUS_CHECK(call, #call, cudaSuccess, cuda_fail)
/// Throws seqpar::Error when a cuBLAS call does not return CUBLAS_STATUS_SUCCESS.
#define SEQPAR_CUBLAS_CHECK(call) \
  SEQPAR_STATUS_CHECK(call, #call, CUBLAS_STATUS_SUCCESS, cublas_fail)

/// After a kernel launch: throws when the launch itself failed (bad configuration, a
/// sticky error from an earlier kernel). Built with SEQPAR_CUDA_SYNC_LAUNCHES defined, it
/// also waits for the kernel, so that a fault inside one is reported at its own launch
/// (file and line) rather than at the next call that waits (slow: for debugging).
#if defined(SEQPAR_CUDA_SYNC_LAUNCHES)
#define SEQPAR_CUDA_CHECK_LAUNCH()              \
  do {                                          \
    SEQPAR_CUDA_CHECK(cudaGetLastError());      \
    SEQPAR_CUDA_CHECK(cudaDeviceSynchronize()); \
  } while (0)
#else
#define SEQPAR_CUDA_CHECK_LAUNCH() SEQPAR_CUDA_CHECK(cudaGetLastError())
#endif

#endif  // SEQPAR_CUDA_BACKEND

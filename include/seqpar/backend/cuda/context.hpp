#pragma once
// CudaContext: what one host thread (one rank) needs to run the CUDA ops: a stream, a
// cuBLAS handle with its own workspace, and grow-only scratch for multi-pass kernels.
// Each thread has its own (thread_local), so ThreadComm ranks never share a stream, a
// handle or scratch memory. Compiled only under nvcc.

#if defined(__CUDACC__)

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "seqpar/backend/cuda/error.hpp"

namespace seqpar::inline v0 {

/// The calling thread's CUDA state, created on first use on the device that is current
/// then (call cudaSetDevice first on a host with several GPUs). Every op of the thread is
/// queued on stream(), in call order; the host sees results after synchronize() or a
/// download. The stream is a blocking one: it also waits for work a program queues on the
/// legacy default stream (a plain cudaMemcpy, say).
class CudaContext {
 public:
  /// This thread's context.
  static CudaContext& current() {
    thread_local CudaContext context;
    return context;
  }

  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  cudaStream_t stream() {
    ensure();
    return active_;
  }
  cublasHandle_t blas() {
    ensure();
    return blas_;
  }
  int device() {
    ensure();
    return device_;
  }
  int multiprocessors() {
    ensure();
    return multiprocessors_;
  }

  /// Queues this thread's ops on `s` from now on: a stream the caller owns and keeps alive
  /// while it is in use (one a communicator shares, say); nullptr returns to the
  /// context's own stream.
  void set_stream(cudaStream_t s) {
    ensure();
    active_ = s ? s : own_stream_;
    bind_blas();
  }

  /// Whether fp32 GEMMs may run on TF32 tensor cores (about 1e-3 relative error instead
  /// of fp32's 1e-7). Off by default: fp32 results then match the CPU backend closely.
  bool allow_tf32() const { return allow_tf32_; }
  void set_allow_tf32(bool on) { allow_tf32_ = on; }

  /// Device scratch of at least `bytes`, shared by every op of this thread: stream order
  /// makes the reuse safe. Growing it first waits for the stream (work queued earlier may
  /// still read the old block); the contents do not survive a growth.
  void* scratch(std::size_t bytes) {
    ensure();
    if (bytes > scratch_bytes_) {
      synchronize();
      if (scratch_) SEQPAR_CUDA_CHECK(cudaFree(scratch_));
      scratch_ = nullptr;
      scratch_bytes_ = 0;
      const std::size_t grown = bytes + bytes / 2;
      SEQPAR_CUDA_CHECK(cudaMalloc(&scratch_, grown));
      scratch_bytes_ = grown;
    }
    return scratch_;
  }

  /// Pinned host memory of at least `bytes`, where reductions land for the host to read.
  void* host_scratch(std::size_t bytes) {
    ensure();
    if (bytes > host_bytes_) {
      synchronize();
      if (host_) SEQPAR_CUDA_CHECK(cudaFreeHost(host_));
      host_ = nullptr;
      host_bytes_ = 0;
      SEQPAR_CUDA_CHECK(cudaMallocHost(&host_, bytes));
      host_bytes_ = bytes;
    }
    return host_;
  }

  /// Waits until everything queued on the stream has run; throws on a kernel's failure.
  void synchronize() { SEQPAR_CUDA_CHECK(cudaStreamSynchronize(stream())); }

 private:
  // cuBLAS workspace per handle: the size cuBLAS documents for Hopper.
  static constexpr std::size_t blas_workspace_bytes = std::size_t{32} << 20;

  CudaContext() = default;
  ~CudaContext() { release(); }

  void ensure() {
    if (!ready_) init();
  }

  void init() {
    try {
      SEQPAR_CUDA_CHECK(cudaGetDevice(&device_));
      SEQPAR_CUDA_CHECK(
          cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount, device_));
      SEQPAR_CUDA_CHECK(cudaStreamCreateWithFlags(&own_stream_, cudaStreamDefault));
      active_ = own_stream_;
      SEQPAR_CUBLAS_CHECK(cublasCreate(&blas_));
      SEQPAR_CUDA_CHECK(cudaMalloc(&blas_workspace_, blas_workspace_bytes));
      bind_blas();
      ready_ = true;
    } catch (...) {
      release();
      throw;
    }
  }

  // cublasSetStream drops a user workspace, so the workspace is set again after it.
  void bind_blas() {
    SEQPAR_CUBLAS_CHECK(cublasSetStream(blas_, active_));
    SEQPAR_CUBLAS_CHECK(cublasSetWorkspace(blas_, blas_workspace_, blas_workspace_bytes));
  }

  // Also runs at thread exit, possibly after the program's last CUDA call failed: the
  // statuses are ignored, as a destructor must not throw.
  void release() noexcept {
    if (own_stream_) (void)cudaStreamSynchronize(own_stream_);
    if (blas_) (void)cublasDestroy(blas_);
    if (blas_workspace_) (void)cudaFree(blas_workspace_);
    if (scratch_) (void)cudaFree(scratch_);
    if (host_) (void)cudaFreeHost(host_);
    if (own_stream_) (void)cudaStreamDestroy(own_stream_);
    blas_ = nullptr;
    blas_workspace_ = scratch_ = host_ = nullptr;
    own_stream_ = active_ = nullptr;
    scratch_bytes_ = host_bytes_ = 0;
    ready_ = false;
  }

  bool ready_ = false;
  bool allow_tf32_ = false;
  int device_ = -1;
  int multiprocessors_ = 0;
  cudaStream_t own_stream_ = nullptr;
  cudaStream_t active_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  void* blas_workspace_ = nullptr;
  void* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
  void* host_ = nullptr;
  std::size_t host_bytes_ = 0;
};

}  // namespace seqpar::inline v0

#endif  // __CUDACC__

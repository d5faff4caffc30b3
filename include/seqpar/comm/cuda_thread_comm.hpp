#pragma once
// CudaThreadComm: ThreadComm for device data, for multi-rank plans on one GPU (NCCL refuses two
// ranks on one device). Blocks are staged through pinned host memory and combined in rank order:
// bit-reproducible, not fast (two PCIe copies and a stream synchronisation per collective).

#include "seqpar/core/separate_compilation.hpp"

#if defined(SEQPAR_CUDA_BACKEND)

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <utility>

#include "seqpar/backend/cuda/context.hpp"
#include "seqpar/backend/cuda/error.hpp"
#include "seqpar/comm/communicator.hpp"
#include "seqpar/comm/thread_comm.hpp"
#include "seqpar/comm/timeout.hpp"

namespace seqpar::inline v0 {

namespace detail {

/// Whether p points into device (or managed) memory rather than host memory.
inline bool is_device_pointer(const void* p) {
  if (!p) return false;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();  // an unknown host pointer on old drivers
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

/// Pinned host memory one rank's collectives stage device data through (grow-only). An
/// upload from it stays in flight on the rank's stream; the next use waits for it.
class PinnedStaging {
 public:
  PinnedStaging() = default;
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;
  ~PinnedStaging() {
    if (event_) (void)cudaEventDestroy(event_);
    if (data_) (void)cudaFreeHost(data_);
  }

  /// At least `bytes` of staging memory that no queued copy reads any more.
  std::byte* get(std::size_t bytes) {
    wait();
    if (bytes > bytes_) {
      if (data_) SEQPAR_CUDA_CHECK(cudaFreeHost(data_));
      data_ = nullptr;
      bytes_ = 0;
      SEQPAR_CUDA_CHECK(cudaMallocHost(&data_, bytes));
      bytes_ = bytes;
    }
    return static_cast<std::byte*>(data_);
  }

  /// staging[offset, offset + bytes) = device src; waits for the stream (the host reads it next).
  void download(std::size_t offset, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    CudaContext& ctx = CudaContext::current();
    SEQPAR_CUDA_CHECK(cudaMemcpyAsync(static_cast<std::byte*>(data_) + offset, src, bytes,
                                      cudaMemcpyDeviceToHost, ctx.stream()));
    ctx.synchronize();
  }

  /// device dst = staging[offset, offset + bytes), queued on the stream; the staging
  /// memory stays busy until the copy has run.
  void upload(void* dst, std::size_t offset, std::size_t bytes) {
    if (bytes == 0) return;
    CudaContext& ctx = CudaContext::current();
    SEQPAR_CUDA_CHECK(cudaMemcpyAsync(dst, static_cast<std::byte*>(data_) + offset, bytes,
                                      cudaMemcpyHostToDevice, ctx.stream()));
    if (!event_) SEQPAR_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    SEQPAR_CUDA_CHECK(cudaEventRecord(event_, ctx.stream()));
    pending_ = true;
  }

 private:
  void wait() {
    if (!pending_) return;
    SEQPAR_CUDA_CHECK(cudaEventSynchronize(event_));
    pending_ = false;
  }

  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  cudaEvent_t event_ = nullptr;
  bool pending_ = false;
};

}  // namespace detail

/// A ThreadComm rank whose collectives accept device memory (see the top of this file).
/// run_cuda_ranks (below) makes one per rank thread, on the calling thread's GPU. Copies share
/// the rank's staging memory and must be used by that rank's thread only; split() makes a
/// communicator with its own. Byte counters are ThreadComm's (the ring model).
class CudaThreadComm {
 public:
  explicit CudaThreadComm(ThreadComm host)
      : host_(std::move(host)), staging_(std::make_shared<detail::PinnedStaging>()) {}

  int rank() const { return host_.rank(); }
  int size() const { return host_.size(); }
  CommStats& stats() { return host_.stats(); }
  const CommStats& stats() const { return host_.stats(); }
  /// The host communicator underneath.
  ThreadComm& host() { return host_; }

  /// Returns once every rank has called barrier() with all its queued device work done.
  void barrier() {
    CudaContext::current().synchronize();
    host_.barrier();
  }

  CudaThreadComm split(int color, int key) { return CudaThreadComm(host_.split(color, key)); }

  template <CommElement T>
  void all_reduce(T* data, std::size_t n, ReduceOp op) {
    if (!detail::is_device_pointer(data)) return host_.all_reduce(data, n, op);
    T* h = reinterpret_cast<T*>(staging_->get(n * sizeof(T)));
    staging_->download(0, data, n * sizeof(T));
    host_.all_reduce(h, n, op);
    staging_->upload(data, 0, n * sizeof(T));
  }

  // in: n * size elements, out: n (this rank's block of the reduction).
  template <CommElement T>
  void reduce_scatter(const T* in, T* out, std::size_t n, ReduceOp op) {
    const std::size_t in_n = n * static_cast<std::size_t>(size());
    Staged<T> s(*this, in, in_n, out, n);
    host_.reduce_scatter(s.in, s.out, n, op);
    s.finish(out, n);
  }

  // in: n elements, out: n * size (block r from rank r).
  template <CommElement T>
  void all_gather(const T* in, T* out, std::size_t n) {
    const std::size_t out_n = n * static_cast<std::size_t>(size());
    Staged<T> s(*this, in, n, out, out_n);
    host_.all_gather(s.in, s.out, n);
    s.finish(out, out_n);
  }

  template <CommElement T>
  void broadcast(T* data, std::size_t n, int root) {
    if (!detail::is_device_pointer(data)) return host_.broadcast(data, n, root);
    T* h = reinterpret_cast<T*>(staging_->get(n * sizeof(T)));
    if (rank() == root) staging_->download(0, data, n * sizeof(T));
    host_.broadcast(h, n, root);
    if (rank() != root) staging_->upload(data, 0, n * sizeof(T));
  }

  template <CommElement T>
  void send(const T* data, std::size_t n, int peer, int tag) {
    if (!detail::is_device_pointer(data)) return host_.send(data, n, peer, tag);
    T* h = reinterpret_cast<T*>(staging_->get(n * sizeof(T)));
    staging_->download(0, data, n * sizeof(T));
    host_.send(static_cast<const T*>(h), n, peer, tag);  // ThreadComm copies the message
  }

  template <CommElement T>
  void recv(T* data, std::size_t n, int peer, int tag) {
    if (!detail::is_device_pointer(data)) return host_.recv(data, n, peer, tag);
    T* h = reinterpret_cast<T*>(staging_->get(n * sizeof(T)));
    host_.recv(h, n, peer, tag);
    staging_->upload(data, 0, n * sizeof(T));
  }

 private:
  // An input of in_n and an output of out_n elements for a host collective: device sides
  // staged (input downloaded), host sides used in place.
  template <class T>
  struct Staged {
    const T* in;
    T* out;
    bool out_device;
    detail::PinnedStaging& staging;
    std::size_t out_offset;

    Staged(CudaThreadComm& c, const T* in_ptr, std::size_t in_n, T* out_ptr, std::size_t out_n)
        : in(in_ptr),
          out(out_ptr),
          out_device(detail::is_device_pointer(out_ptr)),
          staging(*c.staging_) {
      const bool in_device = detail::is_device_pointer(in_ptr);
      out_offset = in_device ? (in_n * sizeof(T) + 255) / 256 * 256 : 0;
      const std::size_t bytes = out_offset + (out_device ? out_n * sizeof(T) : 0);
      std::byte* base = bytes ? staging.get(bytes) : nullptr;
      if (in_device) {
        staging.download(0, in_ptr, in_n * sizeof(T));
        in = reinterpret_cast<const T*>(base);
      }
      if (out_device) out = reinterpret_cast<T*>(base + out_offset);
    }
    void finish(T* dst, std::size_t out_n) {
      if (out_device) staging.upload(dst, out_offset, out_n * sizeof(T));
    }
  };

  ThreadComm host_;
  std::shared_ptr<detail::PinnedStaging> staging_;
};

static_assert(Communicator<CudaThreadComm>);

/// Runs fn(CudaThreadComm&) on every rank of an n-rank world, each rank a thread of its own
/// (run_ranks: a rank that fails makes the others fail promptly, the first failure is
/// rethrown) working on the GPU current in the calling thread, as a new thread would not (it
/// starts on device 0): run_cuda_ranks(n, [&](CudaThreadComm& comm) {
/// Trainer<M, Plan, Cuda> t(comm, opts); ... }).
template <class F>
void run_cuda_ranks(int n, F&& fn, CommSeconds timeout = comm_timeout()) {
  int device = 0;
  SEQPAR_CUDA_CHECK(cudaGetDevice(&device));
  run_ranks(
      n,
      [&](ThreadComm& host) {
        SEQPAR_CUDA_CHECK(cudaSetDevice(device));
        CudaThreadComm comm(host);
        std::invoke(fn, comm);
      },
      timeout);
}

}  // namespace seqpar::inline v0

#endif  // SEQPAR_CUDA_BACKEND

#pragma once
// CudaContext: what one host thread (one rank) needs to run the CUDA ops: a stream, a
// cuBLAS handle with its own workspace, grow-only scratch for multi-pass kernels, and a
// cache of freed device blocks. Each thread has its own (thread_local), so ThreadComm
// ranks never share a stream, a handle, scratch or cached memory; only an allocation that
// fails takes back what the other threads' caches hold on its device. Seen where
// SEQPAR_CUDA_BACKEND is defined (core/separate_compilation.hpp).

#include "seqpar/core/separate_compilation.hpp"

#if defined(SEQPAR_CUDA_BACKEND)

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_set>
#include <utility>
#include <vector>

#include "seqpar/backend/cuda/error.hpp"
#include "seqpar/core/error.hpp"

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
    return stream_;
  }
  /// The stream the copies behind the computation run on (optimizer offload's gradient
  /// downloads): made on first use, non-blocking, so that it is ordered against stream()
  /// only by the events the copies name.
  cudaStream_t copy_stream() {
    ensure();
    if (!copy_stream_)
      SEQPAR_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
    return copy_stream_;
  }
  cublasHandle_t blas() {
    ensure();
    return blas_;
  }
  int device() {
    ensure();
    return device_;
  }

  /// Whether this thread's context has started (picked its device, made its stream).
  bool initialized() const { return ready_; }

  /// Whether fp32 GEMMs may run on TF32 tensor cores (about 1e-3 relative error instead
  /// of fp32's 1e-7). Off by default: fp32 results then match the CPU backend closely.
  bool allow_tf32() const { return allow_tf32_; }
  void set_allow_tf32(bool on) { allow_tf32_ = on; }

  /// Device scratch of at least `bytes`, shared by every op of this thread: stream order
  /// makes the reuse safe. The contents do not survive a growth. Growing frees nothing: the
  /// old block joins the cache (allocate's), where only ops queued after this point can take
  /// it again, so a growth never waits (cudaFree would wait for the whole device).
  void* scratch(std::size_t bytes) {
    ensure();
    if (bytes > scratch_bytes_) {
      const std::size_t grown = rounded(bytes + bytes / 2);
      void* fresh = device_malloc(grown);
      if (scratch_) {
        std::lock_guard lock(cache_mutex_);
        cache_[scratch_bytes_].push_back(scratch_);
        cached_bytes_ += scratch_bytes_;
      }
      scratch_ = fresh;
      scratch_bytes_ = grown;
    }
    return scratch_;
  }

  /// Bytes of device scratch held (0 before the first scratch()).
  std::size_t scratch_bytes() const { return scratch_bytes_; }

  /// Pinned host memory of at least `bytes`, where reductions land for the host to read.
  /// The contents do not survive a growth. Growing frees nothing until the context ends
  /// (cudaFreeHost waits for every device): the old block is kept, and a copy still queued
  /// into it lands there harmlessly.
  void* host_scratch(std::size_t bytes) {
    ensure();
    if (bytes > host_bytes_) {
      void* fresh = nullptr;
      SEQPAR_CUDA_CHECK(cudaMallocHost(&fresh, bytes));
      if (host_) {
        try {
          retired_host_.push_back(host_);
        } catch (...) {
          (void)cudaFreeHost(fresh);
          throw;
        }
      }
      host_ = fresh;
      host_bytes_ = bytes;
    }
    return host_;
  }

  /// Waits until everything queued on the stream has run; throws on a kernel's failure.
  void synchronize() { SEQPAR_CUDA_CHECK(cudaStreamSynchronize(stream())); }

  /// Device memory of at least `bytes`: a block this thread freed before, of the same
  /// rounded size, or a new one from cudaMalloc. cudaFree waits for the whole device, so
  /// activations that are freed and taken again every micro-batch come from here. A
  /// cached block is reused only by ops queued after its free on this thread's stream,
  /// which stream order makes safe. When cudaMalloc fails, this thread's cache is returned
  /// to the device and the allocation tried again, then the caches of the other threads
  /// on the device (ThreadComm ranks sharing a GPU); a last failure throws, naming the size
  /// and the free and total memory of the device.
  void* allocate(std::size_t bytes) {
    ensure();
    const std::size_t size = rounded(bytes);
    void* p = nullptr;
    {
      std::lock_guard lock(cache_mutex_);
      if (auto it = cache_.find(size); it != cache_.end() && !it->second.empty()) {
        p = it->second.back();
        it->second.pop_back();
        cached_bytes_ -= size;
      }
    }
    if (!p) p = device_malloc(size);
    try {
      std::lock_guard lock(cache_mutex_);
      live_.insert(p);
    } catch (...) {
      (void)cudaFree(p);
      throw;
    }
    return p;
  }

  /// Keeps a block this thread's allocate(bytes) handed out for its next allocation of the
  /// same size. A block another thread's allocate handed out goes to that thread's cache,
  /// once this thread's stream has run what it queued (the owner's own work stays ordered by
  /// its stream); one whose thread has ended goes back to the device (cudaFree waits for the
  /// device). Called from destructors: never throws.
  void deallocate(void* p, std::size_t bytes) noexcept {
    if (!p) return;
    const std::size_t size = rounded(bytes);
    try {
      if (ready_) {
        {
          std::lock_guard lock(cache_mutex_);
          if (live_.erase(p) == 1) {
            cache_[size].push_back(p);
            cached_bytes_ += size;
            return;
          }
        }
        (void)cudaStreamSynchronize(stream_);
      }
      if (give_to_owner(p, size)) return;
    } catch (...) {
    }
    (void)cudaFree(p);
  }

  /// Bytes of device memory held in the cache (freed by Buffers, not yet returned).
  std::size_t cached_bytes() const {
    std::lock_guard lock(cache_mutex_);
    return cached_bytes_;
  }

  /// Returns every cached block to the device (waits for the stream first).
  void release_cache() {
    if (ready_) (void)cudaStreamSynchronize(stream_);
    free_blocks(take_cache());
  }

 private:
  // cuBLAS workspace per handle: the size cuBLAS documents for Hopper.
  static constexpr std::size_t blas_workspace_bytes = std::size_t{32} << 20;
  // Cached blocks are told apart by their size rounded up to this granule.
  static constexpr std::size_t block_granule = 512;

  static std::size_t rounded(std::size_t bytes) {
    return (bytes + block_granule - 1) / block_granule * block_granule;
  }

  CudaContext() = default;
  ~CudaContext() { release(); }

  // Every started context of the process, so that a failed allocation can take back the
  // blocks the other threads' caches hold on its device. A function-local static outlives
  // every thread's context (thread-local objects end before static ones).
  struct Registry {
    std::mutex mutex;
    std::vector<CudaContext*> contexts;
  };
  static Registry& registry() {
    static Registry r;
    return r;
  }

  // The cache's blocks, taken out of it.
  std::vector<void*> take_cache() {
    std::vector<void*> blocks;
    std::lock_guard lock(cache_mutex_);
    for (auto& [size, list] : cache_) blocks.insert(blocks.end(), list.begin(), list.end());
    cache_.clear();
    cached_bytes_ = 0;
    return blocks;
  }
  // A block another thread's allocate handed out goes into that thread's cache; false when
  // no live context handed it out.
  static bool give_to_owner(void* p, std::size_t size) {
    std::lock_guard lock(registry().mutex);
    for (CudaContext* c : registry().contexts) {
      std::lock_guard cache_lock(c->cache_mutex_);
      if (c->live_.erase(p) == 1) {
        c->cache_[size].push_back(p);
        c->cached_bytes_ += size;
        return true;
      }
    }
    return false;
  }
  static void free_blocks(const std::vector<void*>& blocks) noexcept {
    for (void* p : blocks) (void)cudaFree(p);
  }

  // cudaMalloc; on failure this thread's cache goes back to the device, then the other
  // threads' caches on the device (after the whole device is idle: their streams may
  // still use blocks they freed), retrying after each.
  void* device_malloc(std::size_t bytes) {
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes);
    for (int attempt = 0; e != cudaSuccess && attempt < 2; ++attempt) {
      (void)cudaGetLastError();
      if (attempt == 0) {
        release_cache();
      } else {
        std::vector<void*> others;
        {
          std::lock_guard lock(registry().mutex);
          for (CudaContext* c : registry().contexts)
            if (c != this && c->device_ == device_) {
              auto taken = c->take_cache();
              others.insert(others.end(), taken.begin(), taken.end());
            }
        }
        (void)cudaDeviceSynchronize();
        free_blocks(others);
      }
      e = cudaMalloc(&p, bytes);
    }
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      std::size_t free_bytes = 0, total_bytes = 0;
      (void)cudaMemGetInfo(&free_bytes, &total_bytes);
      (void)cudaGetLastError();
      detail::fail(__FILE__, ":", __LINE__, ": cudaMalloc of ", bytes, " bytes on device ", device_,
                   " failed: ", cudaGetErrorName(e), " (", cudaGetErrorString(e), "); ", free_bytes,
                   " of ", total_bytes, " bytes are free");
    }
    return p;
  }

  void ensure() {
    if (!ready_) init();
  }

  void init() {
    try {
      SEQPAR_CUDA_CHECK(cudaGetDevice(&device_));
      SEQPAR_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamDefault));
      SEQPAR_CUBLAS_CHECK(cublasCreate(&blas_));
      SEQPAR_CUDA_CHECK(cudaMalloc(&blas_workspace_, blas_workspace_bytes));
      bind_blas();
      {
        std::lock_guard lock(registry().mutex);
        registry().contexts.push_back(this);
      }
      ready_ = true;
    } catch (...) {
      release();
      throw;
    }
  }

  // cublasSetStream drops a user workspace, so the workspace is set again after it.
  void bind_blas() {
    SEQPAR_CUBLAS_CHECK(cublasSetStream(blas_, stream_));
    SEQPAR_CUBLAS_CHECK(cublasSetWorkspace(blas_, blas_workspace_, blas_workspace_bytes));
  }

  // Also runs at thread exit, possibly after the program's last CUDA call failed: the
  // statuses are ignored, as a destructor must not throw.
  void release() noexcept {
    if (ready_) {
      std::lock_guard lock(registry().mutex);
      auto& all = registry().contexts;
      all.erase(std::remove(all.begin(), all.end(), this), all.end());
    }
    if (stream_) (void)cudaStreamSynchronize(stream_);
    if (copy_stream_) (void)cudaStreamSynchronize(copy_stream_);
    try {
      free_blocks(take_cache());
    } catch (...) {  // no memory for the list: the blocks go with the process
    }
    {
      std::lock_guard lock(cache_mutex_);
      live_.clear();  // blocks still out go back to the device when they are freed
      ready_ = false;
    }
    if (blas_) (void)cublasDestroy(blas_);
    if (blas_workspace_) (void)cudaFree(blas_workspace_);
    if (scratch_) (void)cudaFree(scratch_);
    if (host_) (void)cudaFreeHost(host_);
    for (void* p : retired_host_) (void)cudaFreeHost(p);
    retired_host_.clear();
    if (stream_) (void)cudaStreamDestroy(stream_);
    if (copy_stream_) (void)cudaStreamDestroy(copy_stream_);
    blas_ = nullptr;
    copy_stream_ = nullptr;
    blas_workspace_ = scratch_ = host_ = nullptr;
    stream_ = nullptr;
    scratch_bytes_ = host_bytes_ = 0;
    ready_ = false;
  }

  bool ready_ = false;
  bool allow_tf32_ = false;
  int device_ = -1;
  cudaStream_t stream_ = nullptr;
  cudaStream_t copy_stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  void* blas_workspace_ = nullptr;
  void* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
  void* host_ = nullptr;
  std::size_t host_bytes_ = 0;
  std::vector<void*> retired_host_;  // host scratch outgrown, freed when the context ends
  mutable std::mutex
      cache_mutex_;  // cache_, cached_bytes_ and live_ (another thread may take the cache)
  std::map<std::size_t, std::vector<void*>> cache_;  // rounded size -> free blocks
  std::size_t cached_bytes_ = 0;
  std::unordered_set<void*> live_;  // blocks handed out and not yet freed
};

}  // namespace seqpar::inline v0

#endif  // SEQPAR_CUDA_BACKEND

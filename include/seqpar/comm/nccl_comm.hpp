#pragma once
// NcclComm: one process per GPU, NCCL on the communicator's own stream, ordered with the
// caller's stream by events so that compute and the *_async collectives overlap.

#include "seqpar/core/separate_compilation.hpp"

#if defined(SEQPAR_CUDA_BACKEND) && __has_include(<nccl.h>)
#include "seqpar/comm/mpi_comm.hpp"  // NcclComm(MpiComm&) where <mpi.h> is found
#endif

#if defined(SEQPAR_CUDA_BACKEND) && __has_include(<nccl.h>)

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "seqpar/backend/cuda/context.hpp"
#include "seqpar/backend/cuda/error.hpp"
#include "seqpar/comm/any_comm.hpp"
#include "seqpar/comm/communicator.hpp"
#include "seqpar/comm/cuda_thread_comm.hpp"
#include "seqpar/comm/timeout.hpp"
#include "seqpar/core/error.hpp"

#define SEQPAR_HAS_NCCL_COMM 1

namespace seqpar::inline v0 {

namespace detail {

[[noreturn]] inline void nccl_fail(ncclResult_t r, const char* call, const char* file, int line) {
  fail(file, ":", line, ": NCCL call ", call, " failed: ", ncclGetErrorString(r));
}

template <CommElement T>
constexpr ncclDataType_t nccl_type() {
  if constexpr (std::same_as<T, float>)
    return ncclFloat32;
  else if constexpr (std::same_as<T, double>)
    return ncclFloat64;
  else if constexpr (std::same_as<T, Bf16Bits>)
    return ncclBfloat16;
  else if constexpr (std::same_as<T, F16Bits>)
    return ncclFloat16;
  else
    return ncclInt64;
}

inline ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::sum ? ncclSum : ncclMax; }

// Where NcclComm's results for host memory land: pinned blocks of nccl_pinned_bytes, shared
// by the process's communicators. A communicator that ends gives its block back here instead
// of to cudaFreeHost, which waits for every device, and so for NCCL work that other
// communicators have queued and that may wait for peers that wait for this rank (NCCL's
// documentation: "Using multiple NCCL communicators concurrently"). The blocks go with the
// process.
inline constexpr std::size_t nccl_pinned_bytes = 4096;

class NcclPinnedBlocks {
 public:
  static void* take() {
    {
      std::lock_guard lock(mutex());
      if (!spare().empty()) {
        void* p = spare().back();
        spare().pop_back();
        return p;
      }
    }
    void* p = nullptr;
    SEQPAR_CUDA_CHECK(cudaMallocHost(&p, nccl_pinned_bytes));
    return p;
  }
  // Called from a destructor: never throws (a block that cannot be kept stays allocated).
  static void give(void* p) noexcept {
    try {
      std::lock_guard lock(mutex());
      spare().push_back(p);
    } catch (...) {
    }
  }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::vector<void*>& spare() {
    static std::vector<void*> blocks;
    return blocks;
  }
};

// The NCCL communicator of this process's rank, its stream and events, and its counters;
// destroyed with the last handle.
struct NcclState {
  ncclComm_t comm = nullptr;
  int rank = 0, size = 1;
  CommStats stats;
  cudaStream_t stream = nullptr;  // the collectives run here
  cudaEvent_t ready = nullptr;    // recorded on the caller's stream before a collective
  cudaEvent_t done = nullptr;     // recorded on `stream` after the latest blocking collective
  // Recorded on `stream` after async collective `seq` in slot seq % 4. A slot re-recorded by
  // a later collective still orders after the earlier one: the stream runs them in order.
  std::array<cudaEvent_t, 4> marks{};
  std::uint64_t issued = 0, joined = 0;  // async collectives queued / known joined
  CommSeconds timeout = comm_timeout();  // longest wait() before the communicator is aborted
  // Where results for host memory land (a copy into pageable memory would return only when
  // done: a dead peer would hang the host inside it, before wait() polls).
  void* pinned = nullptr;  // nccl_pinned_bytes, from NcclPinnedBlocks

  explicit NcclState(ncclComm_t c) : comm(c) {}
  NcclState(const NcclState&) = delete;
  NcclState& operator=(const NcclState&) = delete;
  ~NcclState() {
    if (std::uncaught_exceptions() > 0) {
      // Unwinding toward an abort: the peers may never finish the queued collectives or
      // join a destroy (a collective call), so the communicator is aborted instead; the
      // stream and events go with the process.
      if (comm) (void)ncclCommAbort(comm);
      return;
    }
    if (stream) (void)cudaStreamSynchronize(stream);
    if (pinned) NcclPinnedBlocks::give(pinned);
    for (cudaEvent_t e : marks)
      if (e) (void)cudaEventDestroy(e);
    if (done) (void)cudaEventDestroy(done);
    if (ready) (void)cudaEventDestroy(ready);
    if (stream) (void)cudaStreamDestroy(stream);
    if (comm) (void)ncclCommDestroy(comm);
  }
};

}  // namespace detail

/// Throws seqpar::Error when an NCCL call does not return ncclSuccess.
#define SEQPAR_NCCL_CHECK(call) SEQPAR_STATUS_CHECK(call, #call, ncclSuccess, nccl_fail)

/// A rank of an NCCL communicator (see the top of this file). A cheap handle: copies share
/// the NCCL communicator and the counters; use it from one thread.
class NcclComm {
 public:
#if defined(SEQPAR_HAS_MPI_COMM)
  /// Collective over `mpi`: selects this process's GPU (call it before any other CUDA
  /// work of the process) and makes an NCCL communicator of mpi's ranks.
  explicit NcclComm(MpiComm& mpi) {
    int devices = 0;
    SEQPAR_CUDA_CHECK(cudaGetDeviceCount(&devices));
    SEQPAR_CHECK(devices > 0, "NcclComm: rank ", mpi.rank(), " sees no CUDA device");
    const int local = node_local_rank(mpi), gpu = local % devices;
    CudaContext& ctx = CudaContext::current();
    SEQPAR_CHECK(!ctx.initialized() || ctx.device() == gpu, "NcclComm: rank ", mpi.rank(),
                 " already ran CUDA work on GPU ", ctx.device(), " but its node-local rank ", local,
                 " selects GPU ", gpu, "; make the NcclComm before any other CUDA work");
    SEQPAR_CUDA_CHECK(cudaSetDevice(gpu));
    // The 128-byte id crosses MPI as 16 int64 values.
    std::array<std::int64_t, (NCCL_UNIQUE_ID_BYTES + 7) / 8> words{};
    ncclUniqueId id{};
    if (mpi.rank() == 0) {
      SEQPAR_NCCL_CHECK(ncclGetUniqueId(&id));
      std::memcpy(words.data(), &id, sizeof id);
    }
    mpi.broadcast(words.data(), words.size(), 0);
    std::memcpy(&id, words.data(), sizeof id);
    init(mpi.size(), id, mpi.rank());
  }
#endif

  /// A group of one rank on the current GPU, without MPI (one process alone).
  static NcclComm single() { return NcclComm(unique_id(), 1, 0); }

  /// A new group's id (ncclGetUniqueId), for ranks that meet without MPI.
  static ncclUniqueId unique_id() {
    ncclUniqueId id{};
    SEQPAR_NCCL_CHECK(ncclGetUniqueId(&id));
    return id;
  }

  /// Rank `rank` of a group of `nranks` whose ranks share `id` (unique_id(), passed to each by
  /// other means: the threads of one process, each on its own GPU), on the calling thread's
  /// current GPU. Collective: returns once every rank has come.
  NcclComm(const ncclUniqueId& id, int nranks, int rank) { init(nranks, id, rank); }

  int rank() const { return state_->rank; }
  int size() const { return state_->size; }
  ncclComm_t native() const { return state_->comm; }

  /// How long a blocking call waits for its collectives before the communicator is aborted
  /// and the call throws naming this rank (starts at comm_timeout()).
  void set_timeout(CommSeconds timeout) {
    state_->timeout = detail::checked_timeout("NcclComm", timeout);
  }
  CommSeconds timeout() const { return state_->timeout; }

  CommStats& stats() { return state_->stats; }
  const CommStats& stats() const { return state_->stats; }

  template <CommElement T>
  void all_reduce(T* data, std::size_t n, ReduceOp op) {
    all_reduce_on(data, n, op, false);
  }

  /// As all_reduce, but the calling thread's later work does not wait for it: `data` must
  /// not be touched until it is joined.
  template <CommElement T>
  CommTicket all_reduce_async(T* data, std::size_t n, ReduceOp op) {
    return all_reduce_on(data, n, op, true);
  }

  // in: n * size elements, out: n (this rank's block of the reduction).
  template <CommElement T>
  void reduce_scatter(const T* in, T* out, std::size_t n, ReduceOp op) {
    reduce_scatter_on(in, out, n, op, false);
  }

  /// As reduce_scatter, but the calling thread's later work does not wait for it: `in`
  /// and `out` must not be touched until it is joined.
  template <CommElement T>
  CommTicket reduce_scatter_async(const T* in, T* out, std::size_t n, ReduceOp op) {
    return reduce_scatter_on(in, out, n, op, true);
  }

  // in: n elements, out: n * size (block r from rank r).
  template <CommElement T>
  void all_gather(const T* in, T* out, std::size_t n) {
    all_gather_on(in, out, n, false);
  }

  /// As all_gather, but the calling thread's later work does not wait for it: `in` and
  /// `out` must not be touched until it is joined.
  template <CommElement T>
  CommTicket all_gather_async(const T* in, T* out, std::size_t n) {
    return all_gather_on(in, out, n, true);
  }

  /// Orders the calling thread's later work after async collective `t` (and every one
  /// queued before it); the host does not wait.
  void join(CommTicket t) {
    detail::NcclState& st = *state_;
    if (t.seq <= st.joined) return;
    SEQPAR_CHECK(t.seq <= st.issued, "NcclComm join: rank ", rank(), " was given ticket ", t.seq,
                 " but has queued ", st.issued, " async collectives");
    SEQPAR_CUDA_CHECK(
        cudaStreamWaitEvent(CudaContext::current().stream(), st.marks[t.seq % st.marks.size()], 0));
    st.joined = t.seq;
  }
  /// Orders the calling thread's later work after every collective queued so far.
  void join() { join(CommTicket{state_->issued}); }

  template <CommElement T>
  void broadcast(T* data, std::size_t n, int root) {
    check_rank(root, "broadcast root");
    state_->stats.record(CollectiveKind::broadcast,
                         ring_bytes(CollectiveKind::broadcast, n, sizeof(T), size(), rank(), root));
    OnDevice<T> d(data, n, rank() == root);
    enqueue(false, [&](cudaStream_t s) {
      return ncclBroadcast(d.ptr, d.ptr, n, detail::nccl_type<T>(), root, native(), s);
    });
    d.finish(*this, data, n);
  }

  template <CommElement T>
  void send(const T* data, std::size_t n, int peer, int /*tag*/) {
    check_peer(peer, "send peer");
    record(CollectiveKind::send, n, sizeof(T));
    // A staged message's device copy goes back to the cache when d does, reused only by
    // work the calling thread queues later, which waits for the send: the host does not.
    OnDevice<T> d(const_cast<T*>(data), n, true);
    enqueue(false, [&](cudaStream_t s) {
      return ncclSend(d.ptr, n, detail::nccl_type<T>(), peer, native(), s);
    });
  }

  template <CommElement T>
  void recv(T* data, std::size_t n, int peer, int /*tag*/) {
    check_peer(peer, "recv peer");
    record(CollectiveKind::recv, n, sizeof(T));
    OnDevice<T> d(data, n, false);
    enqueue(false, [&](cudaStream_t s) {
      return ncclRecv(d.ptr, n, detail::nccl_type<T>(), peer, native(), s);
    });
    d.finish(*this, data, n);
  }

  /// Sends to `peer` and receives from it in one NCCL group, so that two ranks exchanging
  /// with each other (a pipeline's 1F1B steady state) cannot deadlock.
  template <CommElement T>
  void sendrecv(const T* send, std::size_t send_n, int /*send_tag*/, T* recv, std::size_t recv_n,
                int /*recv_tag*/, int peer) {
    check_peer(peer, "sendrecv peer");
    record(CollectiveKind::send, send_n, sizeof(T));
    record(CollectiveKind::recv, recv_n, sizeof(T));
    OnDevice<T> ds(const_cast<T*>(send), send_n, true);
    OnDevice<T> dr(recv, recv_n, false);
    enqueue(false, [&](cudaStream_t s) {
      ncclResult_t r = ncclGroupStart();
      if (r != ncclSuccess) return r;
      const ncclResult_t a = ncclSend(ds.ptr, send_n, detail::nccl_type<T>(), peer, native(), s);
      const ncclResult_t b = ncclRecv(dr.ptr, recv_n, detail::nccl_type<T>(), peer, native(), s);
      r = ncclGroupEnd();
      return a != ncclSuccess ? a : b != ncclSuccess ? b : r;
    });
    dr.finish(*this, recv, recv_n);
  }

  /// Returns once every rank has called barrier() with all its queued device work done.
  void barrier() {
    state_->stats.record(CollectiveKind::barrier, {});
    CudaContext& ctx = CudaContext::current();
    auto* one = static_cast<float*>(ctx.allocate(sizeof(float)));
    enqueue(false, [&](cudaStream_t s) {
      return ncclAllReduce(one, one, 1, ncclFloat32, ncclSum, native(), s);
    });
    ctx.deallocate(one, sizeof(float));  // reused only by work ordered after the barrier
    wait();
  }

  /// Collective: ranks with the same color (>= 0) form a new communicator, ranked by (key,
  /// old rank) (ncclCommSplit).
  NcclComm split(int color, int key) {
    SEQPAR_CHECK(color >= 0, "NcclComm split: rank ", rank(), " passed color ", color,
                 "; colors must be >= 0");
    ncclComm_t sub = nullptr;
    SEQPAR_NCCL_CHECK(ncclCommSplit(native(), color, key, &sub, nullptr));
    NcclComm c;
    c.adopt(sub);
    return c;
  }

 private:
  NcclComm() = default;

  void init(int nranks, const ncclUniqueId& id, int rank) {
    ncclComm_t comm = nullptr;
    SEQPAR_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
    adopt(comm);
  }
  void adopt(ncclComm_t comm) {
    state_ = std::make_shared<detail::NcclState>(comm);
    SEQPAR_NCCL_CHECK(ncclCommUserRank(comm, &state_->rank));
    SEQPAR_NCCL_CHECK(ncclCommCount(comm, &state_->size));
    SEQPAR_CUDA_CHECK(cudaStreamCreateWithFlags(&state_->stream, cudaStreamNonBlocking));
    SEQPAR_CUDA_CHECK(cudaEventCreateWithFlags(&state_->ready, cudaEventDisableTiming));
    SEQPAR_CUDA_CHECK(cudaEventCreateWithFlags(&state_->done, cudaEventDisableTiming));
    for (cudaEvent_t& e : state_->marks)
      SEQPAR_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    state_->pinned = detail::NcclPinnedBlocks::take();
  }

  // Queues call(stream) (an NCCL call) on the communicator's stream after the work queued
  // so far on the calling thread's stream. Unless `async`, the calling thread's later work
  // waits for it (and so for every collective before it: the stream runs them in order);
  // an async one gets a ticket to join it by.
  template <class Call>
  CommTicket enqueue(bool async, Call&& call) {
    detail::NcclState& st = *state_;
    const cudaStream_t caller = CudaContext::current().stream();
    SEQPAR_CUDA_CHECK(cudaEventRecord(st.ready, caller));
    SEQPAR_CUDA_CHECK(cudaStreamWaitEvent(st.stream, st.ready, 0));
    SEQPAR_NCCL_CHECK(call(st.stream));
    if (!async) {
      SEQPAR_CUDA_CHECK(cudaEventRecord(st.done, st.stream));
      SEQPAR_CUDA_CHECK(cudaStreamWaitEvent(caller, st.done, 0));
      st.joined = st.issued;
      return {};
    }
    const std::uint64_t seq = ++st.issued;
    SEQPAR_CUDA_CHECK(cudaEventRecord(st.marks[seq % st.marks.size()], st.stream));
    return {seq};
  }

  template <class T>
  CommTicket all_reduce_on(T* data, std::size_t n, ReduceOp op, bool async) {
    record(CollectiveKind::all_reduce, n, sizeof(T));
    OnDevice<T> d(data, n, true);
    const CommTicket t = enqueue(async && !d.staged, [&](cudaStream_t s) {
      return ncclAllReduce(d.ptr, d.ptr, n, detail::nccl_type<T>(), detail::nccl_op(op), native(),
                           s);
    });
    d.finish(*this, data, n);
    return t;
  }

  template <class T>
  CommTicket reduce_scatter_on(const T* in, T* out, std::size_t n, ReduceOp op, bool async) {
    record(CollectiveKind::reduce_scatter, n, sizeof(T));
    OnDevice<T> din(const_cast<T*>(in), n * static_cast<std::size_t>(size()), true);
    OnDevice<T> dout(out, n, false);
    const CommTicket t = enqueue(async && !din.staged && !dout.staged, [&](cudaStream_t s) {
      return ncclReduceScatter(din.ptr, dout.ptr, n, detail::nccl_type<T>(), detail::nccl_op(op),
                               native(), s);
    });
    dout.finish(*this, out, n);
    return t;
  }

  template <class T>
  CommTicket all_gather_on(const T* in, T* out, std::size_t n, bool async) {
    record(CollectiveKind::all_gather, n, sizeof(T));
    OnDevice<T> din(const_cast<T*>(in), n, true);
    OnDevice<T> dout(out, n * static_cast<std::size_t>(size()), false);
    const CommTicket t = enqueue(async && !din.staged && !dout.staged, [&](cudaStream_t s) {
      return ncclAllGather(din.ptr, dout.ptr, n, detail::nccl_type<T>(), native(), s);
    });
    dout.finish(*this, out, n * static_cast<std::size_t>(size()));
    return t;
  }

  void record(CollectiveKind k, std::size_t n, std::size_t elem) {
    state_->stats.record(k, ring_bytes(k, n, elem, size(), rank()));
  }
  void check_rank(int r, const char* what) const {
    SEQPAR_CHECK(r >= 0 && r < size(), "NcclComm: ", what, " ", r, " is not a rank of a group of ",
                 size());
  }
  void check_peer(int peer, const char* what) const {
    check_rank(peer, what);
    SEQPAR_CHECK(peer != rank(), "NcclComm: rank ", rank(), " named itself as its ", what);
  }

  // Pinned memory where results for host memory land, taken with the communicator and never
  // grown nor freed (detail::NcclPinnedBlocks). Host operands are scalars; longer ones come
  // back in pieces of this size.
  static constexpr std::size_t pinned_bytes = detail::nccl_pinned_bytes;
  void* pinned() const { return state_->pinned; }

  // Waits for the calling thread's stream; fails instead of waiting for ever when NCCL
  // reports an error on this communicator (a peer gone, a network failure) or when the
  // stream is not done within the timeout (a peer stopped or hung): the communicator is
  // then aborted (ncclCommAbort), so that its kernels end and the other ranks' NCCL
  // reports the error in turn, and this rank throws.
  void wait() const {
    const cudaStream_t s = CudaContext::current().stream();
    const auto deadline = detail::comm_deadline(state_->timeout);
    detail::PollBackoff backoff;
    for (;;) {
      const cudaError_t e = cudaStreamQuery(s);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) SEQPAR_CUDA_CHECK(e);
      ncclResult_t async = ncclSuccess;
      SEQPAR_NCCL_CHECK(ncclCommGetAsyncError(native(), &async));
      if (async != ncclSuccess)
        detail::fail("NcclComm: rank ", rank(), " of ", size(),
                     ": a queued collective failed: ", ncclGetErrorString(async));
      if (std::chrono::steady_clock::now() > deadline) {
        (void)ncclCommAbort(state_->comm);
        state_->comm = nullptr;  // aborted: neither destroyed nor aborted again
        detail::fail(
            "NcclComm: rank ", rank(), " of ", size(), " waited more than ",
            detail::seconds_text(state_->timeout),
            " s for its queued collectives: a rank did not come (stopped, hung or making "
            "other calls); the communicator was aborted (SEQPAR_COMM_TIMEOUT_S sets the limit)");
      }
      backoff.pause();
    }
  }

  // Device memory for a collective's argument: the pointer itself when it is device
  // memory, else a device copy of the host data (`in`: copied there first) whose result
  // goes back to the host in finish(), which waits for the stream.
  template <class T>
  struct OnDevice {
    T* ptr;
    bool staged;

    OnDevice(T* p, std::size_t n, bool in)
        : ptr(p), staged(n > 0 && !detail::is_device_pointer(p)) {
      if (!staged) return;
      CudaContext& ctx = CudaContext::current();
      ptr = static_cast<T*>(ctx.allocate(n * sizeof(T)));
      bytes = n * sizeof(T);
      if (in)
        SEQPAR_CUDA_CHECK(cudaMemcpyAsync(ptr, p, bytes, cudaMemcpyHostToDevice, ctx.stream()));
    }
    OnDevice(const OnDevice&) = delete;
    OnDevice& operator=(const OnDevice&) = delete;
    ~OnDevice() {
      if (staged) CudaContext::current().deallocate(ptr, bytes);
    }
    void finish(const NcclComm& comm, T* host, std::size_t n) {
      if (!staged) return;
      if (!host || n == 0) return comm.wait();
      const std::size_t bytes = n * sizeof(T);
      for (std::size_t at = 0; at < bytes; at += pinned_bytes) {
        const std::size_t piece = std::min(pinned_bytes, bytes - at);
        SEQPAR_CUDA_CHECK(cudaMemcpyAsync(comm.pinned(), reinterpret_cast<const char*>(ptr) + at,
                                          piece, cudaMemcpyDeviceToHost,
                                          CudaContext::current().stream()));
        comm.wait();
        std::memcpy(reinterpret_cast<char*>(host) + at, comm.pinned(), piece);
      }
    }

   private:
    std::size_t bytes = 0;
  };

  std::shared_ptr<detail::NcclState> state_;
};

static_assert(Communicator<NcclComm> && AsyncCommunicator<NcclComm>);

}  // namespace seqpar::inline v0

#endif  // SEQPAR_CUDA_BACKEND && NCCL

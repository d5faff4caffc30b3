#pragma once
// MpiComm: ranks are processes started by mpirun/srun. Collectives poll nonblocking calls and throw
// past comm_timeout(), so that mpi_main's MPI_Abort ends a job with a hung rank instead of leaving
// the others spinning. Defined only where <mpi.h> is found (SEQPAR_HAS_MPI_COMM is then 1).

#if defined(SEQPAR_WITH_MPI) || __has_include(<mpi.h>)

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1  // the C API is all MpiComm uses
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "seqpar/comm/communicator.hpp"
#include "seqpar/comm/fingerprint.hpp"
#include "seqpar/comm/local_rank.hpp"
#include "seqpar/comm/timeout.hpp"
#include "seqpar/core/error.hpp"

#define SEQPAR_HAS_MPI_COMM 1

namespace seqpar::inline v0 {

namespace detail {

template <CommElement T>
MPI_Datatype mpi_datatype() {
  if constexpr (std::is_same_v<T, float>)
    return MPI_FLOAT;
  else if constexpr (std::is_same_v<T, double>)
    return MPI_DOUBLE;
  else if constexpr (is_float16<T>)
    return MPI_UINT16_T;  // moved as bits; reductions go through float (MpiComm::widened)
  else
    return MPI_INT64_T;
}

inline MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::sum ? MPI_SUM : MPI_MAX; }

inline std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(len));
}

// Turns a failed MPI call into an Error naming the call and the rank.
inline void mpi_check(int code, const char* call, int rank) {
  if (code != MPI_SUCCESS)
    fail("MpiComm rank ", rank, ": ", call, " failed: ", mpi_error_string(code));
}

inline int mpi_count(std::size_t n, const char* call, int rank) {
  SEQPAR_CHECK(n <= static_cast<std::size_t>(INT_MAX), "MpiComm rank ", rank, ": ", call, " of ", n,
               " elements exceeds MPI's count limit of ", INT_MAX);
  return static_cast<int>(n);
}

inline bool mpi_finalized() {
  int done = 0;
  MPI_Finalized(&done);
  return done != 0;
}

// The world ranks of `comm`'s members, in its rank order.
inline std::vector<int> mpi_world_ranks(MPI_Comm comm, int size) {
  if (comm == MPI_COMM_WORLD) {
    std::vector<int> all(static_cast<std::size_t>(size));
    std::iota(all.begin(), all.end(), 0);
    return all;
  }
  MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  std::vector<int> mine(static_cast<std::size_t>(size)), out(static_cast<std::size_t>(size), -1);
  std::iota(mine.begin(), mine.end(), 0);
  if (MPI_Comm_group(comm, &group) == MPI_SUCCESS &&
      MPI_Comm_group(MPI_COMM_WORLD, &world) == MPI_SUCCESS)
    MPI_Group_translate_ranks(group, size, mine.data(), world, out.data());
  if (group != MPI_GROUP_NULL) MPI_Group_free(&group);
  if (world != MPI_GROUP_NULL) MPI_Group_free(&world);
  return out;
}

inline bool byte_ranges_overlap(const void* a, std::size_t a_bytes, const void* b,
                                std::size_t b_bytes) {
  const auto pa = reinterpret_cast<std::uintptr_t>(a);
  const auto pb = reinterpret_cast<std::uintptr_t>(b);
  return a_bytes && b_bytes && pa < pb + b_bytes && pb < pa + a_bytes;
}

// Where each process of the job stands, readable by the others without its help (one slot a
// world rank in an MPI window, read with MPI_Rget): the last collective it began on each
// communicator (up to `comms` of them). A rank that times out reads it to name the ranks
// that did not come, as a flight recorder does. MpiSession makes it (collective) and hangs it
// on MPI_COMM_WORLD; MpiState finds it there.
class MpiProgress {
 public:
  static constexpr int comms = 8;
  static constexpr int words = 1 + comms * 5;  // count, then (communicator id, call) each

  explicit MpiProgress(MPI_Comm world) : world_(world) {
    mpi_check(MPI_Win_allocate(words * sizeof(std::int64_t), sizeof(std::int64_t), MPI_INFO_NULL,
                               world, &base_, &win_),
              "MPI_Win_allocate", -1);
    std::fill(base_, base_ + words, 0);
    mpi_check(MPI_Win_lock_all(MPI_MODE_NOCHECK, win_), "MPI_Win_lock_all", -1);
  }
  MpiProgress(const MpiProgress&) = delete;
  MpiProgress& operator=(const MpiProgress&) = delete;
  ~MpiProgress() {  // collective: MpiSession's, before MPI_Finalize
    // A rank done long before the others (eval's) waits for them in a polled barrier that
    // sleeps, not in MPI_Win_free's, which may spin.
    MPI_Request req = MPI_REQUEST_NULL;
    PollBackoff backoff;
    if (MPI_Ibarrier(world_, &req) == MPI_SUCCESS)
      for (int done = 0; MPI_Test(&req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done;)
        backoff.pause();
    MPI_Win_unlock_all(win_);
    MPI_Win_free(&win_);
  }

  // The attribute of MPI_COMM_WORLD holding the session's MpiProgress.
  static int keyval() {
    static const int key = [] {
      int k = MPI_KEYVAL_INVALID;
      MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &k, nullptr);
      return k;
    }();
    return key;
  }
  static MpiProgress* of_world() {
    void* p = nullptr;
    int found = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, keyval(), &p, &found);
    return found ? static_cast<MpiProgress*>(p) : nullptr;
  }

  // This process began `call` on the communicator `id`.
  void began(std::int64_t id, const CommCall& call) {
    std::int64_t* e = base_ + 1;
    int i = 0;
    while (i < base_[0] && e[5 * i] != id) ++i;
    if (i == comms) return;  // more communicators than slots: the rest go unrecorded
    if (i == base_[0]) base_[0] = i + 1;
    const auto c = call.encode();
    e[5 * i] = id;
    std::copy(c.begin(), c.end(), e + 5 * i + 1);
    MPI_Win_sync(win_);
  }

  // World rank `r`'s last call on communicator `id`: none when it made none there; unknown
  // (nullopt) when its slot could not be read within a second.
  struct Seen {
    bool read = false;
    std::optional<CommCall> call;
  };
  Seen last_call(int r, std::int64_t id) {
    std::int64_t slot[words];
    MPI_Request req = MPI_REQUEST_NULL;
    if (MPI_Rget(slot, words, MPI_INT64_T, r, 0, words, MPI_INT64_T, win_, &req) != MPI_SUCCESS)
      return {};
    const auto deadline = comm_deadline(CommSeconds(1));
    PollBackoff backoff;
    for (int done = 0; !done; backoff.pause()) {
      if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return {};
      if (!done && std::chrono::steady_clock::now() > deadline) return {};
    }
    Seen seen{true, std::nullopt};
    for (int i = 0; i < std::min<std::int64_t>(slot[0], comms); ++i)
      if (slot[1 + 5 * i] == id) seen.call = CommCall::decode(slot + 2 + 5 * i);
    return seen;
  }

 private:
  MPI_Comm world_;
  std::int64_t* base_ = nullptr;
  MPI_Win win_ = MPI_WIN_NULL;
};

// An MPI communicator, the counters of this process's rank in it, its collectives' count
// and the history this process's communicators share.
struct MpiState {
  MPI_Comm comm = MPI_COMM_NULL;
  bool owned = false;  // made by split(): freed with the last handle
  int rank = 0;
  int size = 1;
  CommStats stats;
  CommSeconds timeout = comm_timeout();
  bool checks = true;     // exchange fingerprints before each collective
  std::uint64_t seq = 0;  // collectives started
  CommHistory::Label label;
  std::vector<int> world_ranks;  // of the members, in rank order
  std::shared_ptr<CommHistory> history;
  MpiProgress* progress = MpiProgress::of_world();  // none without an MpiSession
  std::int64_t id = 0;                              // the label's hash, for `progress`

  MpiState(MPI_Comm c, bool own, std::shared_ptr<CommHistory> h, bool check)
      : comm(c), owned(own), checks(check), history(std::move(h)) {
    // errors come back as codes and become seqpar::Error instead of aborting in MPI
    mpi_check(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", -1);
    mpi_check(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank", -1);
    mpi_check(MPI_Comm_size(comm, &size), "MPI_Comm_size", rank);
    int world_size = 0;
    mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &world_size), "MPI_Comm_size", rank);
    world_ranks = mpi_world_ranks(comm, size);
    label = comm_label(world_ranks, world_size);
    id = static_cast<std::int64_t>(std::hash<std::string>{}(*label) >> 1);
  }

  // "rank 2", or "rank 1 (world rank 3)" in a communicator other than the world.
  std::string who(int r) const {
    std::string s = "rank " + std::to_string(r);
    if (*label != "world") s += " (world rank " + std::to_string(world_ranks[r]) + ")";
    return s;
  }
  MpiState(const MpiState&) = delete;
  MpiState& operator=(const MpiState&) = delete;
  ~MpiState() {
    if (mpi_finalized()) return;
    if (std::uncaught_exceptions() > 0) {
      // Unwinding toward MPI_Abort: a peer may never receive these sends, nor free the
      // communicator with us; their bytes stay allocated for MPI, which may still read them.
      if (!pending.empty()) (void)new std::deque<PendingSend>(std::move(pending));
      return;
    }
    complete_sends(true);
    if (owned && comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }

  // Buffered sends still in flight, and their copies of the data.
  struct PendingSend {
    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<std::byte> bytes;
  };
  std::deque<PendingSend> pending;

  // Drops finished sends; with `wait`, waits for all of them.
  void complete_sends(bool wait) {
    while (!pending.empty()) {
      int done = 0;
      if (wait)
        MPI_Wait(&pending.front().request, MPI_STATUS_IGNORE), done = 1;
      else
        MPI_Test(&pending.front().request, &done, MPI_STATUS_IGNORE);
      if (!done) return;
      pending.pop_front();
    }
  }
};

}  // namespace detail

/// A communicator over an MPI communicator (OpenMPI or any MPI 3 library). Collectives map to
/// MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Allgather, MPI_Bcast, MPI_Send/MPI_Recv,
/// MPI_Barrier and MPI_Comm_split; failed MPI calls throw Error with MPI's message and the
/// rank. Byte counters follow the ring model of ring_bytes(), whatever MPI does inside. A
/// cheap value type: copies share the MPI communicator and the counters.
class MpiComm {
 public:
  /// MPI_COMM_WORLD; MPI must be initialised (MpiSession, mpi_main).
  static MpiComm world() {
    int ready = 0;
    MPI_Initialized(&ready);
    SEQPAR_CHECK(ready && !detail::mpi_finalized(),
                 "MpiComm::world(): MPI is not initialised; create an MpiSession or use mpi_main");
    return MpiComm(MPI_COMM_WORLD, false);
  }

  /// Wraps `comm`; with `take_ownership` the last copy frees it with MPI_Comm_free.
  explicit MpiComm(MPI_Comm comm, bool take_ownership = false)
      : state_(std::make_shared<detail::MpiState>(
            comm, take_ownership, std::make_shared<CommHistory>(), comm_checks())) {}

  int rank() const { return state_->rank; }
  int size() const { return state_->size; }
  MPI_Comm native() const { return state_->comm; }

  /// How long this rank waits in one collective or recv before it throws an Error naming
  /// the call (mpi_main then aborts the job). Per handle's communicator: splits start from
  /// comm_timeout() (SEQPAR_COMM_TIMEOUT_S).
  void set_timeout(CommSeconds timeout) {
    state_->timeout = detail::checked_timeout("MpiComm", timeout);
  }
  CommSeconds timeout() const { return state_->timeout; }

  /// Whether the ranks exchange each collective's fingerprint before it (comm_checks(): on
  /// unless SEQPAR_COMM_CHECKS=0), so that ranks that call different collectives, or one
  /// with another size, type, reduction or root, fail at once naming each rank's call
  /// instead of corrupting memory or waiting out the timeout. One small all-reduce more per
  /// collective (docs/communicators.md has its cost). Every rank must set the same. Splits
  /// start from this handle's setting.
  void set_checks(bool on) { state_->checks = on; }
  bool checks() const { return state_->checks; }

  /// The calls this process made on this communicator and the others of its family (its
  /// splits and the one it was split from), newest last, as a failure prints them.
  std::string history() const {
    return state_->history->describe("world rank " +
                                     std::to_string(state_->world_ranks[state_->rank]));
  }

  /// Collective: this rank is done with the communicator. With checks on, its fingerprint
  /// `finish` meets the others' calls: a rank still making collectives here is named at
  /// once (mpi_main calls it when the function returns).
  void finish() { begin({CommOp::finish}, "finish", "finish"); }
  CommStats& stats() { return state_->stats; }
  const CommStats& stats() const { return state_->stats; }

  /// Sums or maxes `data` (n elements) over all ranks, in place. The reduction order is
  /// MPI's; every rank gets the same result (see docs/communicators.md).
  template <CommElement T>
  void all_reduce(T* data, std::size_t n, ReduceOp op) {
    const int count = detail::mpi_count(n, "MPI_Allreduce", rank());
    const CommCall call =
        begin({CommOp::all_reduce, comm_dtype<T>(), n, 0, op}, "MPI_Allreduce", "all_reduce");
    if (size() > 1 && n) {
      Widened<T> w(data, n);
      MPI_Request req = MPI_REQUEST_NULL;
      check(MPI_Iallreduce(MPI_IN_PLACE, w.data(), count, w.type(), detail::mpi_op(op), native(),
                           &req),
            "MPI_Allreduce");
      wait(req, "MPI_Allreduce", "all_reduce (MPI_Iallreduce)", call);
      w.narrow_into(data, n);
    }
    record(CollectiveKind::all_reduce, n, sizeof(T));
  }

  /// in: n * size elements; out: n elements, block `rank` of the reduction. out may overlap in.
  template <CommElement T>
  void reduce_scatter(const T* in, T* out, std::size_t n, ReduceOp op) {
    const int count = detail::mpi_count(n, "MPI_Reduce_scatter_block", rank());
    const std::size_t total = n * static_cast<std::size_t>(size());
    const CommCall call = begin({CommOp::reduce_scatter, comm_dtype<T>(), n, 0, op},
                                "MPI_Reduce_scatter_block", "reduce_scatter");
    if (size() == 1) {
      if (n && out != in) std::memmove(out, in, n * sizeof(T));
    } else {
      std::vector<T> copy;  // a 16-bit input is copied by Widened anyway
      if (!is_float16<T> &&
          detail::byte_ranges_overlap(in, total * sizeof(T), out, n * sizeof(T))) {
        copy.assign(in, in + total);  // MPI forbids aliased buffers
        in = copy.data();
      }
      Widened<T> win(in, total), wout(out, n);
      MPI_Request req = MPI_REQUEST_NULL;
      check(MPI_Ireduce_scatter_block(win.data(), wout.data(), count, win.type(),
                                      detail::mpi_op(op), native(), &req),
            "MPI_Reduce_scatter_block");
      wait(req, "MPI_Reduce_scatter_block", "reduce_scatter (MPI_Ireduce_scatter_block)", call);
      wout.narrow_into(out, n);
    }
    record(CollectiveKind::reduce_scatter, n, sizeof(T));
  }

  /// in: n elements; out: n * size elements, block r from rank r. in may overlap out.
  template <CommElement T>
  void all_gather(const T* in, T* out, std::size_t n) {
    const int count = detail::mpi_count(n, "MPI_Allgather", rank());
    const std::size_t total = n * static_cast<std::size_t>(size());
    const CommCall call =
        begin({CommOp::all_gather, comm_dtype<T>(), n}, "MPI_Allgather", "all_gather");
    if (size() == 1) {
      if (n && out != in) std::memmove(out, in, n * sizeof(T));
    } else if (in == out + static_cast<std::size_t>(rank()) * n) {
      MPI_Request req = MPI_REQUEST_NULL;
      check(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out, count,
                           detail::mpi_datatype<T>(), native(), &req),
            "MPI_Allgather");
      wait(req, "MPI_Allgather", "all_gather (MPI_Iallgather)", call);
    } else {
      std::vector<T> copy;
      if (detail::byte_ranges_overlap(in, n * sizeof(T), out, total * sizeof(T))) {
        copy.assign(in, in + n);
        in = copy.data();
      }
      MPI_Request req = MPI_REQUEST_NULL;
      check(MPI_Iallgather(in, count, detail::mpi_datatype<T>(), out, count,
                           detail::mpi_datatype<T>(), native(), &req),
            "MPI_Allgather");
      wait(req, "MPI_Allgather", "all_gather (MPI_Iallgather)", call);
    }
    record(CollectiveKind::all_gather, n, sizeof(T));
  }

  /// Copies root's n elements into every rank's `data`.
  template <CommElement T>
  void broadcast(T* data, std::size_t n, int root) {
    SEQPAR_CHECK(root >= 0 && root < size(), "MpiComm broadcast: root ", root,
                 " is out of range for a ", size(), "-rank communicator (rank ", rank(), ")");
    const int count = detail::mpi_count(n, "MPI_Bcast", rank());
    const CommCall call =
        begin({CommOp::broadcast, comm_dtype<T>(), n, root}, "MPI_Bcast", "broadcast");
    if (size() > 1 && n) {
      MPI_Request req = MPI_REQUEST_NULL;
      check(MPI_Ibcast(data, count, detail::mpi_datatype<T>(), root, native(), &req), "MPI_Bcast");
      wait(req, "MPI_Bcast", "broadcast (MPI_Ibcast)", call);
    }
    record(CollectiveKind::broadcast, n, sizeof(T), root);
  }

  /// Buffered send of n elements to `peer` with `tag`: the data is copied and handed to
  /// MPI_Isend, so the call returns at once, as ThreadComm's does. Two neighbours that send
  /// to each other before receiving (a pipeline's forward and backward) cannot deadlock.
  template <CommElement T>
  void send(const T* data, std::size_t n, int peer, int tag) {
    check_peer(peer, tag, "send");
    const int count = detail::mpi_count(n, "MPI_Isend", rank());
    note({CommOp::send, comm_dtype<T>(), n, peer, ReduceOp::sum, 0, tag});
    state_->complete_sends(false);
    auto& p = state_->pending.emplace_back();
    p.bytes.resize(n * sizeof(T));
    if (n) std::memcpy(p.bytes.data(), data, n * sizeof(T));
    check(MPI_Isend(p.bytes.data(), count, detail::mpi_datatype<T>(), peer, tag, native(),
                    &p.request),
          "MPI_Isend");
    record(CollectiveKind::send, n, sizeof(T));
  }

  /// Receives exactly n elements from `peer` with `tag`.
  template <CommElement T>
  void recv(T* data, std::size_t n, int peer, int tag) {
    check_peer(peer, tag, "recv");
    const int count = detail::mpi_count(n, "MPI_Recv", rank());
    const CommCall call{CommOp::recv, comm_dtype<T>(), n, peer, ReduceOp::sum, 0, tag};
    note(call);
    MPI_Status status;
    MPI_Request req = MPI_REQUEST_NULL;
    check(MPI_Irecv(data, count, detail::mpi_datatype<T>(), peer, tag, native(), &req), "MPI_Recv");
    wait(req, "MPI_Recv", "recv (MPI_Irecv)", call, &status);
    int got = 0;
    MPI_Get_count(&status, detail::mpi_datatype<T>(), &got);
    SEQPAR_CHECK(got == count, "MpiComm: rank ", rank(), " receives ", n, " ",
                 dtype_name(comm_dtype<T>()), " from rank ", peer, " (tag ", tag,
                 ") but that rank sent ", got);
    record(CollectiveKind::recv, n, sizeof(T));
  }

  void barrier() {
    const CommCall call = begin({CommOp::barrier}, "MPI_Barrier", "barrier");
    if (size() > 1) {
      MPI_Request req = MPI_REQUEST_NULL;
      check(MPI_Ibarrier(native(), &req), "MPI_Barrier");
      wait(req, "MPI_Barrier", "barrier (MPI_Ibarrier)", call);
    }
    record(CollectiveKind::barrier, 0, 0);
  }

  /// Collective: ranks with the same color (>= 0) form a new communicator, ranked by
  /// (key, old rank). It has its own counters.
  MpiComm split(int color, int key) {
    SEQPAR_CHECK(color >= 0, "MpiComm split: rank ", rank(), " passed color ", color,
                 "; colors must be >= 0");
    begin({CommOp::split}, "MPI_Comm_split", "split");
    MPI_Comm sub = MPI_COMM_NULL;
    check(MPI_Comm_split(native(), color, key, &sub), "MPI_Comm_split");
    return MpiComm(std::make_shared<detail::MpiState>(sub, true, state_->history, state_->checks));
  }

 private:
  explicit MpiComm(std::shared_ptr<detail::MpiState> state) : state_(std::move(state)) {}

  void check(int code, const char* call) const { detail::mpi_check(code, call, rank()); }

  // Records point-to-point `call` in the history.
  void note(const CommCall& call) { state_->history->record(state_->label, call); }

  // Numbers and records collective `call`; with checks on, exchanges its fingerprint with
  // the other ranks (`mpi_call` and `what` name it in errors) and throws on every rank,
  // naming each rank's call, when they differ. Returns the numbered call.
  CommCall begin(CommCall call, const char* mpi_call, const char* what) {
    call.seq = ++state_->seq;
    note(call);
    if (state_->progress) state_->progress->began(state_->id, call);
    if (!state_->checks || size() == 1) return call;
    const auto mine = call.encode();
    // The max of (v, -v) over the ranks is (v, -v) only where every rank has v.
    std::int64_t both[6] = {mine[1], mine[2], mine[3], -mine[1], -mine[2], -mine[3]};
    const std::string exchange = std::string(what) + "'s fingerprint (MPI_Iallreduce)";
    MPI_Request req = MPI_REQUEST_NULL;
    check(MPI_Iallreduce(MPI_IN_PLACE, both, 6, MPI_INT64_T, MPI_MAX, native(), &req), mpi_call);
    wait(req, mpi_call, exchange.c_str(), call);
    bool same = true;
    for (int i = 0; i < 3; ++i)
      same = same && both[i] == mine[i + 1] && -both[i + 3] == mine[i + 1];
    if (same) return call;
    // Every rank learns every rank's call and throws the same message.
    std::vector<std::int64_t> all(4 * static_cast<std::size_t>(size()));
    check(MPI_Iallgather(mine.data(), 4, MPI_INT64_T, all.data(), 4, MPI_INT64_T, native(), &req),
          mpi_call);
    wait(req, mpi_call, exchange.c_str(), call);
    std::vector<CommCall> calls(static_cast<std::size_t>(size()));
    for (int k = 0; k < size(); ++k) calls[k] = CommCall::decode(all.data() + 4 * k);
    detail::fail("MpiComm: mismatched collectives in a ", size(), "-rank communicator (",
                 *state_->label,
                 "): ", detail::describe_calls(calls, [this](int k) { return state_->who(k); }),
                 " (its collective #", call.seq, ")\n", history());
  }

  // Polls `req` with a backoff until it completes or the timeout passes; an MPI error is
  // reported under `mpi_call`, the blocking call it stands for, and a timeout names `what`
  // and `call`. MPI cannot say which rank is missing from a collective; a recv names its
  // peer. The request is left to MPI_Abort (cancelling a collective is not allowed).
  void wait(MPI_Request& req, const char* mpi_call, const char* what, const CommCall& call,
            MPI_Status* status = MPI_STATUS_IGNORE) const {
    const auto deadline = detail::comm_deadline(state_->timeout);
    detail::PollBackoff backoff;
    for (;;) {
      int done = 0;
      check(MPI_Test(&req, &done, status), mpi_call);
      if (done) return;
      if (std::chrono::steady_clock::now() > deadline) break;
      backoff.pause();
    }
    const std::string limit = detail::seconds_text(state_->timeout);
    if (call.op == CommOp::recv)
      detail::fail("MpiComm: rank ", call.root, " did not send within ", limit,
                   " s the message (tag ", call.tag, ") that rank ", rank(), " waits for in ", what,
                   "; it is stopped, hung or making other calls (SEQPAR_COMM_TIMEOUT_S sets the "
                   "limit)\n",
                   history());
    detail::fail("MpiComm: ", absent(call), " rank ", rank(), " waited more than ", limit, " s in ",
                 what, " of a ", size(), "-rank communicator (", *state_->label,
                 ", its collective #", call.seq,
                 ") (stopped, hung or making other calls; SEQPAR_COMM_TIMEOUT_S sets the limit)\n",
                 history());
  }

  // "rank 3 did not come to all_reduce (its last call here: #1 all_reduce<F32>(n=4, sum));":
  // the members whose progress shows they did not begin `call`, read from their slots.
  std::string absent(const CommCall& call) const {
    const std::string op(comm_op_name(call.op));
    if (!state_->progress) return "a rank did not come to " + op + ":";
    std::string named;
    int unread = 0;
    for (int m = 0; m < size(); ++m) {
      if (m == rank()) continue;
      const auto seen = state_->progress->last_call(state_->world_ranks[m], state_->id);
      if (!seen.read) {
        ++unread;
        continue;
      }
      if (seen.call && seen.call->seq >= call.seq) continue;
      named += (named.empty() ? "" : "; ") + state_->who(m) + " (its last call here: " +
               (seen.call ? "#" + std::to_string(seen.call->seq) + " " + seen.call->describe()
                          : std::string("none")) +
               ")";
    }
    if (named.empty())
      return unread ? "a rank did not come to " + op + " (" + std::to_string(unread) +
                          " rank(s) could not be asked where they are):"
                    : "every rank began " + op + " but it did not complete:";
    return named + " did not come to " + op + ":";
  }

  // A reduction's buffer as MPI sees it. MPI has no 16-bit float type: a bf16 or f16 buffer
  // becomes a float copy (narrow_into rounds each result once); other types pass through.
  template <CommElement T>
  class Widened {
   public:
    Widened(const T* p, std::size_t n) : p_(p) {
      if constexpr (is_float16<T>) {
        wide_.resize(n);
        for (std::size_t i = 0; i < n; ++i) wide_[i] = widen(p[i]);
      }
    }
    void* data() {
      if constexpr (is_float16<T>)
        return wide_.data();
      else
        return const_cast<T*>(p_);
    }
    MPI_Datatype type() const { return is_float16<T> ? MPI_FLOAT : detail::mpi_datatype<T>(); }
    void narrow_into(T* out, std::size_t n) const {
      if constexpr (is_float16<T>)
        for (std::size_t i = 0; i < n; ++i) out[i] = narrow<T>(wide_[i]);
    }

   private:
    const T* p_;
    std::vector<float> wide_;
  };

  void record(CollectiveKind kind, std::size_t n, std::size_t elem, int root = 0) {
    state_->stats.record(kind, ring_bytes(kind, n, elem, size(), rank(), root));
  }

  void check_peer(int peer, int tag, const char* what) const {
    SEQPAR_CHECK(peer >= 0 && peer < size() && peer != rank(), "MpiComm ", what, ": rank ", rank(),
                 " names peer ", peer, "; a peer must be another rank of this ", size(),
                 "-rank communicator");
    SEQPAR_CHECK(tag >= 0 && tag <= 32767, "MpiComm ", what, ": tag ", tag,
                 " is outside [0, 32767]");
  }

  std::shared_ptr<detail::MpiState> state_;
};

static_assert(Communicator<MpiComm>);

/// The ranks of `comm` on this process's node (shared memory), in `comm`'s order.
inline MpiComm node_comm(const MpiComm& comm) {
  MPI_Comm local = MPI_COMM_NULL;
  detail::mpi_check(
      MPI_Comm_split_type(comm.native(), MPI_COMM_TYPE_SHARED, comm.rank(), MPI_INFO_NULL, &local),
      "MPI_Comm_split_type", comm.rank());
  return MpiComm(local, true);
}
/// This process's rank on its node, the GPU it takes: its rank in node_comm, checked against
/// the launcher's node-local rank where the launcher sets one (comm/local_rank.hpp).
inline int node_local_rank(const MpiComm& comm) {
  return checked_local_rank(node_comm(comm).rank(), launcher_local_rank(), comm.rank());
}
inline int node_local_size(const MpiComm& comm) { return node_comm(comm).size(); }

/// MPI_Init_thread on construction, MPI_Finalize on destruction; does neither if MPI was
/// already initialised by someone else.
class MpiSession {
 public:
  MpiSession(int& argc, char**& argv, int required = MPI_THREAD_FUNNELED) {
    int ready = 0;
    MPI_Initialized(&ready);
    if (ready) return;
    int provided = MPI_THREAD_SINGLE;
    detail::mpi_check(MPI_Init_thread(&argc, &argv, required, &provided), "MPI_Init_thread", -1);
    owns_ = true;
    progress_ = std::make_unique<detail::MpiProgress>(MPI_COMM_WORLD);
    MPI_Comm_set_attr(MPI_COMM_WORLD, detail::MpiProgress::keyval(), progress_.get());
  }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  ~MpiSession() {
    if (!owns_ || detail::mpi_finalized()) return;
    MPI_Comm_delete_attr(MPI_COMM_WORLD, detail::MpiProgress::keyval());
    progress_.reset();
    MPI_Finalize();
  }

 private:
  bool owns_ = false;
  std::unique_ptr<detail::MpiProgress> progress_;  // the ranks' progress, for timeouts
};

/// Runs fn(MpiComm& world) under an MpiSession and returns its result (0 if it returns void),
/// after world.finish(): a rank that returns while others still make collectives on the
/// world is named at once (with checks on). If fn throws on any rank, that rank prints
/// "seqpar: rank R failed: <message>" to stderr and calls MPI_Abort, which ends every
/// process of the job with a non-zero exit.
template <class F>
int mpi_main(int argc, char** argv, F&& fn) {
  MpiSession session(argc, argv);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  try {
    MpiComm world = MpiComm::world();
    int result = 0;
    if constexpr (std::is_void_v<std::invoke_result_t<F&, MpiComm&>>)
      std::invoke(fn, world);
    else
      result = static_cast<int>(std::invoke(fn, world));
    world.finish();  // a rank still in a collective of the world is named, not waited for
    return result;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "seqpar: rank %d failed: %s\n", rank, e.what());
  } catch (...) {
    std::fprintf(stderr, "seqpar: rank %d failed: unknown exception\n", rank);
  }
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;
}

}  // namespace seqpar::inline v0

#endif

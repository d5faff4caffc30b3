#pragma once
// ThreadComm: ranks are threads of one process, collectives run over shared memory and
// reduce in rank order, so results are bit-reproducible and identical on every rank.
// run_ranks() starts the threads; a rank that throws makes every other rank fail promptly,
// and a rank that waits in one call longer than the timeout (comm_timeout()) fails the run
// naming the ranks that did not come. Every rendezvous compares the ranks' calls
// (comm/fingerprint.hpp), and a failed collective prints the ranks' last calls.

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "seqpar/comm/communicator.hpp"
#include "seqpar/comm/fingerprint.hpp"
#include "seqpar/comm/timeout.hpp"
#include "seqpar/core/dtype.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::inline v0 {

namespace detail {

struct ThreadGroup;

// One rank's part of the collective in flight.
struct ThreadSlot {
  CommCall call;
  const void* in = nullptr;
  void* out = nullptr;
  int color = 0;
  int key = 0;
  std::shared_ptr<ThreadGroup> made;  // split: the new group, set by its lowest old rank
};

struct ThreadMessage {
  int tag = 0;
  DType dtype = DType::f32;
  std::size_t n = 0;
  std::vector<std::byte> bytes;
};

// What all groups of one run share: the failure of the first rank that failed, and which
// ranks have returned from their function.
struct ThreadWorld {
  ThreadWorld(int n, CommSeconds t)
      : size(n),
        finished(new std::atomic<bool>[n]),
        history(new CommHistory[n]),
        timeout_s(t.count()) {
    for (int r = 0; r < n; ++r) finished[r] = false;
  }

  int size;
  std::atomic<bool> aborted{false};
  std::unique_ptr<std::atomic<bool>[]> finished;
  std::unique_ptr<CommHistory[]> history;  // per world rank: its last calls
  std::atomic<bool> keep_history{comm_checks()};
  std::atomic<double> timeout_s;  // how long one call waits for the other ranks

  std::mutex mutex;  // guards the fields below
  int failed_rank = -1;
  std::string failure_message;
  std::exception_ptr failure;
  std::vector<std::weak_ptr<ThreadGroup>> groups;

  void add_group(const std::shared_ptr<ThreadGroup>& g) {
    std::lock_guard lock(mutex);
    std::erase_if(groups, [](const auto& w) { return w.expired(); });
    groups.push_back(g);
  }

  // Records the failure if it is the first; returns whether it was.
  bool fail(int world_rank, std::exception_ptr e) {
    if (!e) e = std::make_exception_ptr(Error("aborted without an exception"));
    std::string message = "unknown exception";
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      message = x.what();
    } catch (...) {
    }
    {
      std::lock_guard lock(mutex);
      if (failure) return false;
      failed_rank = world_rank;
      failure_message = std::move(message);
      failure = std::move(e);
      aborted = true;
    }
    wake_all();
    return true;
  }

  void mark_finished(int world_rank) {
    finished[world_rank] = true;
    wake_all();
  }

  // Fails the run with `message` for world rank `world_rank` (a wait that timed out) and
  // throws it on this rank; called without any group's mutex held (fail takes them all).
  [[noreturn]] void time_out(int world_rank, const std::string& message) {
    fail(world_rank, std::make_exception_ptr(Error(message)));
    throw Error(message);
  }

  CommSeconds timeout() const { return CommSeconds(timeout_s.load()); }

  [[noreturn]] void throw_aborted() {
    std::lock_guard lock(mutex);
    throw Error("rank " + std::to_string(failed_rank) + " failed: " + failure_message);
  }

  std::exception_ptr first_failure() {
    std::lock_guard lock(mutex);
    return failure;
  }

  void wake_all();
};

// One communicator's shared state: the rendezvous of its collectives, its mailboxes and the
// counters of each of its ranks.
struct ThreadGroup {
  ThreadGroup(std::shared_ptr<ThreadWorld> w, std::vector<int> ranks_in_world)
      : world(std::move(w)),
        world_ranks(std::move(ranks_in_world)),
        size(static_cast<int>(world_ranks.size())),
        label(comm_label(world_ranks, world->size)),
        calls(world_ranks.size(), 0),
        mailbox(world_ranks.size() * world_ranks.size()),
        here(world_ranks.size(), 0),
        stats(world_ranks.size()) {
    for (auto& s : slots) s.resize(world_ranks.size());
  }

  std::shared_ptr<ThreadWorld> world;
  std::vector<int> world_ranks;  // group rank -> world rank
  int size;
  bool is_world = false;     // made by make_world, not by split (messages name world ranks)
  CommHistory::Label label;  // "world", "world ranks {0, 2}": for the histories

  std::mutex mutex;
  std::condition_variable cv;  // rendezvous and mailbox waits
  int arrived = 0;
  std::uint64_t generation = 0;
  std::vector<std::uint64_t> calls;                // per rank: collectives started (seq)
  std::array<std::vector<ThreadSlot>, 2> slots;    // by parity of the call number
  std::vector<std::deque<ThreadMessage>> mailbox;  // [src * size + dst]
  std::vector<char> here;                          // per rank: waits at the entry rendezvous
  std::vector<CommStats> stats;                    // per rank

  std::string who(int r) const {
    std::string s = "rank " + std::to_string(r);
    if (!is_world) s += " (world rank " + std::to_string(world_ranks[r]) + ")";
    return s;
  }

  void check_alive() {
    if (world->aborted) world->throw_aborted();
  }

  // Numbers rank r's collective `call` and records it in r's history.
  CommCall start(int r, CommCall call) {
    call.seq = ++calls[r];
    note(r, call);
    return call;
  }
  void note(int r, const CommCall& call) {
    if (world->keep_history) world->history[world_ranks[r]].record(label, call);
  }

  // The last calls of members `ms`, one block each, after a newline.
  std::string histories(std::vector<int> ms) const {
    if (!world->keep_history) return "";
    std::sort(ms.begin(), ms.end());
    ms.erase(std::unique(ms.begin(), ms.end()), ms.end());
    std::string s;
    for (const int m : ms) {
      s += "\n" + world->history[world_ranks[m]].describe(who(m));
      s.pop_back();  // describe's last newline
    }
    return s;
  }
  std::string all_histories() const {
    std::vector<int> ms(size);
    for (int m = 0; m < size; ++m) ms[m] = m;
    return histories(ms);
  }

  // A member that returned from its function can never arrive: report it instead of hanging.
  int finished_member() const {
    for (int m = 0; m < size; ++m)
      if (world->finished[world_ranks[m]]) return m;
    return -1;
  }

  // Publishes this rank's call (numbered by start); returns the slot array it went to.
  std::vector<ThreadSlot>& publish(int r, const CommCall& call, const void* in, void* out) {
    check_alive();
    auto& row = slots[call.seq % 2];
    ThreadSlot& s = row[r];
    s.call = call;
    s.in = in;
    s.out = out;
    s.made.reset();
    return row;
  }

  // Waits until every member reached this point of the same operation. Only the entry
  // rendezvous may abort: after it every member is inside the operation and reads or writes
  // the others' buffers, so the later ones always complete (nothing between them throws).
  void rendezvous(int r, const CommCall& call, bool entry) {
    std::unique_lock lock(mutex);
    if (entry) check_alive();
    const std::uint64_t gen = generation;
    if (++arrived == size) {
      arrived = 0;
      ++generation;
      std::fill(here.begin(), here.end(), 0);
      cv.notify_all();
      return;
    }
    if (!entry) {
      cv.wait(lock, [&] { return generation != gen; });
      return;
    }
    here[r] = 1;
    int gone = -1;
    const CommSeconds timeout = world->timeout();
    const bool woken = cv.wait_until(lock, detail::comm_deadline(timeout), [&] {
      if (generation != gen || world->aborted) return true;
      gone = finished_member();
      return gone >= 0;
    });
    if (!woken) {
      std::string missing;
      std::vector<int> involved{r};
      for (int m = 0; m < size; ++m)
        if (!here[m]) {
          missing += (involved.size() > 1 ? ", " : "") + who(m);
          involved.push_back(m);
        }
      const bool many = involved.size() > 2;
      const std::string message =
          "ThreadComm: " + missing + " did not come to " + std::string(comm_op_name(call.op)) +
          " within " + detail::seconds_text(timeout) + " s (" + who(r) + " waited for " +
          (many ? "them" : "it") + " in a " + std::to_string(size) +
          "-rank group at its collective #" + std::to_string(call.seq) + ", " + call.describe() +
          "; SEQPAR_COMM_TIMEOUT_S sets the limit)" + histories(involved);
      lock.unlock();
      world->time_out(world_ranks[r], message);
    }
    if (generation != gen) return;
    if (world->aborted) {
      lock.unlock();
      world->throw_aborted();
    }
    const std::string last = histories({gone, r});
    lock.unlock();
    fail("ThreadComm: ", who(gone), " returned from its function while ", who(r), " waits in ",
         comm_op_name(call.op), " of a ", size, "-rank group (every rank must make the same ",
         "collective calls)", last);
  }

  // After the first rendezvous: every rank checks that all asked for the same thing.
  void check_same(const std::vector<ThreadSlot>& row) const {
    bool same = true;
    for (int m = 1; m < size; ++m) same = same && same_call(row[m].call, row[0].call);
    if (same) return;
    std::vector<CommCall> calls(size);
    for (int m = 0; m < size; ++m) calls[m] = row[m].call;
    throw Error("ThreadComm: mismatched collectives in a " + std::to_string(size) +
                "-rank group: " + describe_calls(calls, [this](int m) { return who(m); }) +
                " (its collective #" + std::to_string(row[0].call.seq) + ")" + all_histories());
  }
};

inline void ThreadWorld::wake_all() {
  std::vector<std::shared_ptr<ThreadGroup>> live;
  {
    std::lock_guard lock(mutex);
    for (const auto& w : groups)
      if (auto g = w.lock()) live.push_back(std::move(g));
  }
  // Taking each group's mutex orders this wake-up after any waiter's predicate check.
  for (const auto& g : live) {
    std::lock_guard lock(g->mutex);
    g->cv.notify_all();
  }
}

template <class T>
void combine(T& acc, T x, ReduceOp op) {
  if (op == ReduceOp::sum) {
    if constexpr (std::is_integral_v<T>)  // wraps like two's complement instead of UB
      acc = static_cast<T>(static_cast<std::uint64_t>(acc) + static_cast<std::uint64_t>(x));
    else
      acc += x;
  } else if (x > acc || x != x) {  // x != x: a NaN wins the max
    acc = x;
  }
}

// out[i] = the reduction over ranks 0..size-1, in that order, of element off + i of each
// rank's input (row[k].in), for i < n; 16-bit floats are combined in float and rounded once.
template <CommElement T, class Row>
void reduce_rows(const Row& row, std::size_t off, std::size_t n, ReduceOp op, T* out) {
  using A = CommAccum<T>;
  const auto src = [&](std::size_t k) { return static_cast<const T*>(row[k].in) + off; };
  if constexpr (std::is_same_v<A, T>) {
    if (n) std::memcpy(out, src(0), n * sizeof(T));
    for (std::size_t k = 1; k < row.size(); ++k) {
      const T* x = src(k);
      for (std::size_t i = 0; i < n; ++i) combine(out[i], x[i], op);
    }
  } else {
    std::vector<A> acc(n);
    for (std::size_t i = 0; i < n; ++i) acc[i] = widen(src(0)[i]);
    for (std::size_t k = 1; k < row.size(); ++k) {
      const T* x = src(k);
      for (std::size_t i = 0; i < n; ++i) combine(acc[i], widen(x[i]), op);
    }
    for (std::size_t i = 0; i < n; ++i) out[i] = narrow<T>(acc[i]);
  }
}

inline bool overlaps(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  const auto pa = reinterpret_cast<std::uintptr_t>(a);
  const auto pb = reinterpret_cast<std::uintptr_t>(b);
  return a_bytes && b_bytes && pa < pb + b_bytes && pb < pa + a_bytes;
}

}  // namespace detail

/// A communicator whose ranks are threads of one process (made by run_ranks or make_world).
/// Reductions add in rank order 0..size-1, so every rank gets the same bits and they equal a
/// serial rank-order loop. A cheap value type: copies share the group and its counters. Once
/// any rank of the run fails, every call on any of its communicators throws
/// Error("rank R failed: <message>").
class ThreadComm {
 public:
  /// One communicator per rank of a new n-rank world; rank r's thread uses element r. A
  /// rank that waits longer than `timeout` in one call fails the run (see set_timeout).
  static std::vector<ThreadComm> make_world(int n, CommSeconds timeout = comm_timeout()) {
    SEQPAR_CHECK(n >= 1, "ThreadComm: a world needs at least one rank, got ", n);
    auto world =
        std::make_shared<detail::ThreadWorld>(n, detail::checked_timeout("ThreadComm", timeout));
    std::vector<int> ranks(n);
    for (int r = 0; r < n; ++r) ranks[r] = r;
    auto group = std::make_shared<detail::ThreadGroup>(world, std::move(ranks));
    group->is_world = true;
    world->add_group(group);
    std::vector<ThreadComm> comms;
    for (int r = 0; r < n; ++r) comms.push_back(ThreadComm(group, r));
    return comms;
  }

  /// A one-rank world.
  ThreadComm() : ThreadComm(std::move(make_world(1)[0])) {}

  int rank() const { return rank_; }
  int size() const { return group_->size; }
  /// This rank's rank in the world the communicator was split from.
  int world_rank() const { return group_->world_ranks[rank_]; }

  CommStats& stats() { return group_->stats[rank_]; }
  const CommStats& stats() const { return group_->stats[rank_]; }

  /// Sums or maxes `data` (n elements) over all ranks, in place.
  template <CommElement T>
  void all_reduce(T* data, std::size_t n, ReduceOp op) {
    auto& g = *group_;
    const CommCall call = g.start(rank_, {CommOp::all_reduce, comm_dtype<T>(), n, 0, op});
    if (g.size > 1) {
      const auto [b, e] = slice(n);
      std::vector<T> part(e - b);  // this rank reduces elements [b, e) of every buffer
      auto& row = g.publish(rank_, call, data, data);
      g.rendezvous(rank_, call, true);
      g.check_same(row);
      detail::reduce_rows<T>(row, b, e - b, op, part.data());
      g.rendezvous(rank_, call, false);  // nobody reads inputs any more
      for (int k = 0; k < g.size; ++k)
        if (e > b) std::memcpy(static_cast<T*>(row[k].out) + b, part.data(), (e - b) * sizeof(T));
      g.rendezvous(rank_, call, false);
    } else {
      g.check_alive();
    }
    stats().record(CollectiveKind::all_reduce,
                   ring_bytes(CollectiveKind::all_reduce, n, sizeof(T), g.size, rank_));
  }

  /// in: n * size elements; out: n elements, block `rank` of the reduction. out may be
  /// in + rank * n, and must not overlap in otherwise.
  template <CommElement T>
  void reduce_scatter(const T* in, T* out, std::size_t n, ReduceOp op) {
    auto& g = *group_;
    const std::size_t total = n * g.size;
    SEQPAR_CHECK(
        out == in + rank_ * n || !detail::overlaps(in, total * sizeof(T), out, n * sizeof(T)),
        "ThreadComm reduce_scatter: ", g.who(rank_),
        " passed an output that overlaps its input other than at block ", rank_);
    const CommCall call = g.start(rank_, {CommOp::reduce_scatter, comm_dtype<T>(), n, 0, op});
    if (g.size > 1) {
      std::vector<T> part(n);  // out may be this rank's input block, which is read below
      auto& row = g.publish(rank_, call, in, out);
      g.rendezvous(rank_, call, true);
      g.check_same(row);
      detail::reduce_rows<T>(row, rank_ * n, n, op, part.data());
      g.rendezvous(rank_, call, false);  // nobody reads this rank's input any more
      if (n) std::memcpy(out, part.data(), n * sizeof(T));
    } else {
      g.check_alive();
      if (n && out != in) std::memmove(out, in, n * sizeof(T));
    }
    stats().record(CollectiveKind::reduce_scatter,
                   ring_bytes(CollectiveKind::reduce_scatter, n, sizeof(T), g.size, rank_));
  }

  /// in: n elements; out: n * size elements, block r from rank r. in may be
  /// out + rank * n, and must not overlap out otherwise.
  template <CommElement T>
  void all_gather(const T* in, T* out, std::size_t n) {
    auto& g = *group_;
    const std::size_t total = n * g.size;
    SEQPAR_CHECK(
        in == out + rank_ * n || !detail::overlaps(in, n * sizeof(T), out, total * sizeof(T)),
        "ThreadComm all_gather: ", g.who(rank_),
        " passed an input that overlaps its output other than at block ", rank_);
    const CommCall call = g.start(rank_, {CommOp::all_gather, comm_dtype<T>(), n, 0});
    if (g.size > 1) {
      auto& row = g.publish(rank_, call, in, out);
      g.rendezvous(rank_, call, true);
      g.check_same(row);
      for (int k = 0; k < g.size; ++k) {
        const T* src = static_cast<const T*>(row[k].in);
        T* dst = out + k * n;
        if (n && src != dst) std::memcpy(dst, src, n * sizeof(T));
      }
      g.rendezvous(rank_, call, false);
    } else {
      g.check_alive();
      if (n && out != in) std::memmove(out, in, n * sizeof(T));
    }
    stats().record(CollectiveKind::all_gather,
                   ring_bytes(CollectiveKind::all_gather, n, sizeof(T), g.size, rank_));
  }

  /// Copies root's n elements into every rank's `data`.
  template <CommElement T>
  void broadcast(T* data, std::size_t n, int root) {
    auto& g = *group_;
    SEQPAR_CHECK(root >= 0 && root < g.size, "ThreadComm broadcast: root ", root,
                 " is out of range for a ", g.size, "-rank communicator (", g.who(rank_), ")");
    const CommCall call = g.start(rank_, {CommOp::broadcast, comm_dtype<T>(), n, root});
    if (g.size > 1) {
      auto& row = g.publish(rank_, call, data, data);
      g.rendezvous(rank_, call, true);
      g.check_same(row);
      if (rank_ != root && n) std::memcpy(data, row[root].in, n * sizeof(T));
      g.rendezvous(rank_, call, false);
    } else {
      g.check_alive();
    }
    stats().record(CollectiveKind::broadcast,
                   ring_bytes(CollectiveKind::broadcast, n, sizeof(T), g.size, rank_, root));
  }

  /// Copies n elements into peer's mailbox for `tag` and returns.
  template <CommElement T>
  void send(const T* data, std::size_t n, int peer, int tag) {
    auto& g = *group_;
    check_peer(peer, tag, "send");
    g.note(rank_, {CommOp::send, comm_dtype<T>(), n, peer, ReduceOp::sum, 0, tag});
    detail::ThreadMessage m{tag, comm_dtype<T>(), n, std::vector<std::byte>(n * sizeof(T))};
    if (n) std::memcpy(m.bytes.data(), data, n * sizeof(T));
    {
      std::lock_guard lock(g.mutex);
      g.check_alive();
      g.mailbox[rank_ * g.size + peer].push_back(std::move(m));
      g.cv.notify_all();
    }
    stats().record(CollectiveKind::send,
                   ring_bytes(CollectiveKind::send, n, sizeof(T), g.size, rank_));
  }

  /// Waits for the oldest message from peer with `tag`; it must hold n elements of T.
  template <CommElement T>
  void recv(T* data, std::size_t n, int peer, int tag) {
    auto& g = *group_;
    check_peer(peer, tag, "recv");
    g.note(rank_, {CommOp::recv, comm_dtype<T>(), n, peer, ReduceOp::sum, 0, tag});
    auto& box = g.mailbox[peer * g.size + rank_];
    std::unique_lock lock(g.mutex);
    auto it = box.end();
    bool peer_gone = false;
    const CommSeconds timeout = g.world->timeout();
    const bool woken = g.cv.wait_until(lock, detail::comm_deadline(timeout), [&] {
      if (g.world->aborted) return true;
      it = std::find_if(box.begin(), box.end(), [&](const auto& m) { return m.tag == tag; });
      if (it != box.end()) return true;
      peer_gone = g.world->finished[g.world_ranks[peer]];
      return peer_gone;
    });
    if (!woken) {
      const std::string message =
          "ThreadComm: " + g.who(peer) + " did not send within " + detail::seconds_text(timeout) +
          " s the message (tag " + std::to_string(tag) + ") that " + g.who(rank_) +
          " waits for in recv (SEQPAR_COMM_TIMEOUT_S sets the limit)" + g.histories({peer, rank_});
      lock.unlock();
      g.world->time_out(world_rank(), message);
    }
    if (g.world->aborted) {
      lock.unlock();
      g.world->throw_aborted();
    }
    if (peer_gone) {
      lock.unlock();
      detail::fail("ThreadComm: ", g.who(peer),
                   " returned from its function without sending the message (tag ", tag, ") that ",
                   g.who(rank_), " waits for", g.histories({peer, rank_}));
    }
    detail::ThreadMessage m = std::move(*it);
    box.erase(it);
    lock.unlock();
    SEQPAR_CHECK(m.n == n && m.dtype == comm_dtype<T>(), "ThreadComm: ", g.who(rank_), " receives ",
                 n, " ", dtype_name(comm_dtype<T>()), " from ", g.who(peer), " (tag ", tag,
                 ") but that rank sent ", m.n, " ", dtype_name(m.dtype));
    if (n) std::memcpy(data, m.bytes.data(), n * sizeof(T));
    stats().record(CollectiveKind::recv,
                   ring_bytes(CollectiveKind::recv, n, sizeof(T), g.size, rank_));
  }

  /// Returns once every rank has called barrier().
  void barrier() {
    auto& g = *group_;
    const CommCall call = g.start(rank_, {CommOp::barrier});
    if (g.size > 1) {
      auto& row = g.publish(rank_, call, nullptr, nullptr);
      g.rendezvous(rank_, call, true);
      g.check_same(row);
    } else {
      g.check_alive();
    }
    stats().record(CollectiveKind::barrier, {});
  }

  /// Collective: ranks with the same color (>= 0) form a new communicator, ranked by
  /// (key, old rank). It has its own counters and shares this world's failure state.
  ThreadComm split(int color, int key) {
    auto& g = *group_;
    SEQPAR_CHECK(color >= 0, "ThreadComm split: ", g.who(rank_), " passed color ", color,
                 "; colors must be >= 0");
    if (g.size == 1) {
      g.start(rank_, {CommOp::split});
      g.check_alive();
      auto sub = std::make_shared<detail::ThreadGroup>(g.world, std::vector<int>{world_rank()});
      g.world->add_group(sub);
      return ThreadComm(std::move(sub), 0);
    }
    const CommCall call = g.start(rank_, {CommOp::split});
    auto& row = g.publish(rank_, call, nullptr, nullptr);
    row[rank_].color = color;
    row[rank_].key = key;
    g.rendezvous(rank_, call, true);
    g.check_same(row);
    std::vector<std::pair<int, int>> members;  // (key, old rank) of my color
    for (int k = 0; k < g.size; ++k)
      if (row[k].color == color) members.emplace_back(row[k].key, k);
    std::sort(members.begin(), members.end());
    int leader = g.size;
    for (const auto& m : members) leader = std::min(leader, m.second);
    if (leader == rank_) {
      std::vector<int> ranks;
      for (const auto& m : members) ranks.push_back(g.world_ranks[m.second]);
      row[rank_].made = std::make_shared<detail::ThreadGroup>(g.world, std::move(ranks));
      g.world->add_group(row[rank_].made);
    }
    // may abort: no user buffers are shared here, and the leader's allocation may throw
    g.rendezvous(rank_, call, true);
    const auto pos = std::find(members.begin(), members.end(), std::pair{key, rank_});
    return ThreadComm(row[leader].made, static_cast<int>(pos - members.begin()));
  }

  /// How long any rank of this world waits in one collective or recv before it fails the
  /// run with an error naming the call and the ranks that did not come (all ranks then
  /// fail). Shared by the whole world and its splits; calls already waiting keep theirs.
  void set_timeout(CommSeconds timeout) {
    group_->world->timeout_s = detail::checked_timeout("ThreadComm", timeout).count();
  }
  CommSeconds timeout() const { return group_->world->timeout(); }

  /// Whether the ranks keep the histories that failures print (comm_checks(): on unless
  /// SEQPAR_COMM_CHECKS=0). Every rendezvous compares the ranks' calls either way. Shared by
  /// the whole world and its splits.
  void set_checks(bool on) { group_->world->keep_history = on; }
  bool checks() const { return group_->world->keep_history; }

  /// Marks this rank's run as failed with `e` (the first failure wins) and wakes every rank
  /// waiting in any communicator of the world. run_ranks calls it for a rank that throws.
  void abort(std::exception_ptr e) { group_->world->fail(world_rank(), std::move(e)); }

  /// Says this rank is done: ranks still waiting for it fail instead of hanging.
  void finish() { group_->world->mark_finished(world_rank()); }

  /// The exception of the first rank that failed, or null.
  std::exception_ptr failure() const { return group_->world->first_failure(); }

 private:
  ThreadComm(std::shared_ptr<detail::ThreadGroup> g, int rank)
      : group_(std::move(g)), rank_(rank) {}

  // Elements [b, e) reduced by this rank in all_reduce.
  std::pair<std::size_t, std::size_t> slice(std::size_t n) const {
    const auto size = static_cast<std::size_t>(group_->size);
    const auto r = static_cast<std::size_t>(rank_);
    return {n / size * r + std::min(r, n % size), n / size * (r + 1) + std::min(r + 1, n % size)};
  }

  void check_peer(int peer, int tag, const char* what) const {
    const auto& g = *group_;
    SEQPAR_CHECK(peer >= 0 && peer < g.size && peer != rank_, "ThreadComm ", what, ": ",
                 g.who(rank_), " names peer ", peer, "; a peer must be another rank of this ",
                 g.size, "-rank communicator");
    SEQPAR_CHECK(tag >= 0 && tag <= 32767, "ThreadComm ", what, ": tag ", tag,
                 " is outside [0, 32767]");
  }

  std::shared_ptr<detail::ThreadGroup> group_;
  int rank_ = 0;
};

static_assert(Communicator<ThreadComm>);

/// Runs fn(ThreadComm&) on n threads, one per rank, and waits for all. If a rank throws, the
/// others fail promptly in their next or current communicator call, and run_ranks rethrows
/// the original exception of the first rank that failed.
template <class F>
void run_ranks(int n, F&& fn, CommSeconds timeout = comm_timeout()) {
  std::vector<ThreadComm> comms = ThreadComm::make_world(n, timeout);
  std::vector<std::thread> threads;
  threads.reserve(n);
  try {
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&fn, &comms, r] {
        ThreadComm& c = comms[r];
        try {
          std::invoke(fn, c);
          c.finish();
        } catch (...) {
          c.abort(std::current_exception());
        }
      });
    }
  } catch (...) {  // no thread for a rank: release the ranks already running
    comms[0].abort(std::current_exception());
  }
  for (auto& t : threads) t.join();
  if (auto e = comms[0].failure()) std::rethrow_exception(e);
}

}  // namespace seqpar::inline v0

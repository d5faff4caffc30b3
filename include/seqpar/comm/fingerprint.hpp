#pragma once
// What a rank asks of a communicator, as its peers check it and as a failure reports it:
// CommCall, the fingerprint of one call (operation, element type, count, root, reduction,
// and its number among the communicator's collectives), and CommHistory, a rank's flight
// recorder of its last calls on every communicator it holds. ThreadComm compares the
// ranks' fingerprints at every rendezvous; MpiComm exchanges them before each collective
// (comm_checks()); both print the histories when a collective fails, so the first place
// where the ranks' calls parted is on the screen.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/comm/communicator.hpp"
#include "seqpar/core/dtype.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::inline v0 {

/// The operations a fingerprint names: the collectives, `finish` (a rank that returned from
/// its function: mpi_main's last exchange) and the point-to-point calls.
enum class CommOp : std::uint8_t {
  all_reduce,
  reduce_scatter,
  all_gather,
  broadcast,
  barrier,
  split,
  finish,
  send,
  recv
};

constexpr std::string_view comm_op_name(CommOp op) {
  switch (op) {
    case CommOp::all_reduce: return "all_reduce";
    case CommOp::reduce_scatter: return "reduce_scatter";
    case CommOp::all_gather: return "all_gather";
    case CommOp::broadcast: return "broadcast";
    case CommOp::barrier: return "barrier";
    case CommOp::split: return "split";
    case CommOp::finish: return "finish";
    case CommOp::send: return "send";
    case CommOp::recv: return "recv";
  }
  return "?";
}

/// One call's fingerprint. Every rank of a communicator must make the same collective
/// calls in the same order: same_call() on the op, dtype, n, root and reduction. `seq`, the
/// call's 1-based number among the collectives of its communicator (0 for send and recv),
/// is reported, not compared (an MPI communicator may have several handles).
struct CommCall {
  CommOp op = CommOp::barrier;
  DType dtype = DType::f32;
  std::size_t n = 0;
  int root = 0;  // broadcast: the root; send and recv: the peer
  ReduceOp reduce = ReduceOp::sum;
  std::uint64_t seq = 0;
  int tag = 0;  // send and recv

  /// all_reduce<F32>(n=4, sum), broadcast<F64>(n=2, root=1), barrier, send<F32>(n=8, to
  /// rank 1, tag 3).
  std::string describe() const {
    std::string s(comm_op_name(op));
    if (op == CommOp::barrier || op == CommOp::split) return s;
    if (op == CommOp::finish) return s + " (it returned from its function)";
    s += "<";
    s += dtype_name(dtype);
    s += ">(n=" + std::to_string(n);
    if (op == CommOp::all_reduce || op == CommOp::reduce_scatter) {
      s += ", ";
      s += reduce_op_name(reduce);
    }
    if (op == CommOp::broadcast) s += ", root=" + std::to_string(root);
    if (op == CommOp::send) s += ", to rank " + std::to_string(root);
    if (op == CommOp::recv) s += ", from rank " + std::to_string(root);
    if (op == CommOp::send || op == CommOp::recv) s += ", tag " + std::to_string(tag);
    return s + ")";
  }

  /// As four integers for an exchange over MPI (seq, op | dtype << 8 | reduce << 16, n,
  /// root); decode() inverts it.
  std::array<std::int64_t, 4> encode() const {
    return {static_cast<std::int64_t>(seq),
            static_cast<std::int64_t>(op) | static_cast<std::int64_t>(dtype) << 8 |
                static_cast<std::int64_t>(reduce) << 16,
            static_cast<std::int64_t>(std::min<std::size_t>(n, std::size_t{1} << 62)), root};
  }
  static CommCall decode(const std::int64_t* v) {
    CommCall c;
    c.seq = static_cast<std::uint64_t>(v[0]);
    c.op = static_cast<CommOp>(v[1] & 0xff);
    c.dtype = static_cast<DType>((v[1] >> 8) & 0xff);
    c.reduce = static_cast<ReduceOp>((v[1] >> 16) & 0xff);
    c.n = static_cast<std::size_t>(v[2]);
    c.root = static_cast<int>(v[3]);
    return c;
  }
};

/// Whether two ranks' calls are the same collective (seq and tag aside).
inline bool same_call(const CommCall& a, const CommCall& b) {
  return a.op == b.op && a.dtype == b.dtype && a.n == b.n && a.root == b.root &&
         a.reduce == b.reduce;
}

/// How many calls a CommHistory keeps.
inline constexpr std::size_t comm_history_length = 16;

/// Whether communicators check their ranks' calls against each other and keep histories,
/// by default: SEQPAR_COMM_CHECKS=0 turns it off, 1 (or unset) on; anything else is refused
/// naming the variable. MpiComm's check is an exchange of fingerprints before every
/// collective; ThreadComm always compares its ranks' calls (its rendezvous holds them) and
/// the switch leaves out only its history.
inline bool comm_checks() {
  const char* text = std::getenv("SEQPAR_COMM_CHECKS");
  if (text == nullptr || *text == '\0') return true;
  const std::string_view v(text);
  SEQPAR_CHECK(v == "0" || v == "1", "SEQPAR_COMM_CHECKS is '", v,
               "'; expected 1 (check every collective's fingerprint) or 0 (do not)");
  return v == "1";
}

/// A rank's flight recorder: its last comm_history_length calls on every communicator it
/// holds, each with the communicator's label ("world", "world ranks {0, 2}"). Thread-safe:
/// the rank records, a failure on another thread may read it.
class CommHistory {
 public:
  using Label = std::shared_ptr<const std::string>;

  void record(const Label& comm, const CommCall& call) {
    std::lock_guard lock(mutex_);
    ring_[count_ % ring_.size()] = {comm, call};
    ++count_;
  }

  /// "rank 1's last 3 calls, oldest first:\n  world #1 all_reduce<F32>(n=3, sum)\n ...";
  /// `who` names the rank.
  std::string describe(const std::string& who) const {
    std::lock_guard lock(mutex_);
    const std::size_t kept = std::min<std::size_t>(count_, ring_.size());
    if (kept == 0) return who + " made no communicator call\n";
    std::string s = who + "'s last " + (kept > 1 ? std::to_string(kept) + " calls" : "call") +
                    (count_ > kept ? " of " + std::to_string(count_) : std::string()) +
                    ", oldest first:\n";
    for (std::size_t i = count_ - kept; i < count_; ++i) {
      const Entry& e = ring_[i % ring_.size()];
      s += "  " + (e.comm ? *e.comm : std::string("?"));
      if (e.call.seq) s += " #" + std::to_string(e.call.seq);
      s += " " + e.call.describe() + "\n";
    }
    return s;
  }

 private:
  struct Entry {
    Label comm;
    CommCall call;
  };
  mutable std::mutex mutex_;
  std::array<Entry, comm_history_length> ring_{};
  std::uint64_t count_ = 0;
};

namespace detail {

/// A communicator's label from its members' world ranks: "world" for all of them in order,
/// else "world ranks {0, 2, 4}" (the first eight and a count past them).
inline std::shared_ptr<const std::string> comm_label(const std::vector<int>& world_ranks,
                                                     int world_size) {
  bool whole = static_cast<int>(world_ranks.size()) == world_size;
  for (std::size_t i = 0; whole && i < world_ranks.size(); ++i)
    whole = world_ranks[i] == static_cast<int>(i);
  if (whole) return std::make_shared<const std::string>("world");
  std::string s = "world ranks {";
  for (std::size_t i = 0; i < world_ranks.size() && i < 8; ++i)
    s += (i ? ", " : "") + std::to_string(world_ranks[i]);
  if (world_ranks.size() > 8) s += ", ... (" + std::to_string(world_ranks.size()) + " ranks)";
  return std::make_shared<const std::string>(s + "}");
}

/// "rank 0, rank 2 called all_reduce<F32>(n=4, sum); rank 1 called barrier": the ranks
/// grouped by the call they made, `who(r)` naming rank r.
template <class Who>
std::string describe_calls(const std::vector<CommCall>& calls, Who&& who) {
  std::string out;
  std::vector<bool> done(calls.size(), false);
  for (std::size_t m = 0; m < calls.size(); ++m) {
    if (done[m]) continue;
    std::string ranks;
    int count = 0;
    for (std::size_t k = m; k < calls.size(); ++k) {
      if (done[k] || !same_call(calls[k], calls[m])) continue;
      done[k] = true;
      ranks += (count++ ? ", " : "") + who(static_cast<int>(k));
    }
    out += (out.empty() ? "" : "; ") + ranks + " called " + calls[m].describe();
  }
  return out;
}

}  // namespace detail
}  // namespace seqpar::inline v0

#pragma once
// The Communicator concept, the element types collectives accept, and CommStats: the
// per-kind call and byte counters every communicator keeps, with the ring byte model.

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>

#include "seqpar/core/dtype.hpp"

namespace seqpar::inline v0 {

/// How all_reduce and reduce_scatter combine the ranks' values.
enum class ReduceOp : std::uint8_t { sum, max };

/// The operations a communicator counts in its CommStats.
enum class CollectiveKind : std::uint8_t {
  all_reduce,
  reduce_scatter,
  all_gather,
  broadcast,
  send,
  recv,
  barrier
};

inline constexpr std::size_t collective_kind_count = 7;

constexpr std::string_view collective_kind_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::all_reduce: return "all_reduce";
    case CollectiveKind::reduce_scatter: return "reduce_scatter";
    case CollectiveKind::all_gather: return "all_gather";
    case CollectiveKind::broadcast: return "broadcast";
    case CollectiveKind::send: return "send";
    case CollectiveKind::recv: return "recv";
    case CollectiveKind::barrier: return "barrier";
  }
  return "?";
}

constexpr std::string_view reduce_op_name(ReduceOp op) {
  return op == ReduceOp::sum ? "sum" : "max";
}

/// The element types every communicator moves and reduces: float, double, std::int64_t,
/// and the 16-bit floats as their bits (Bf16Bits, F16Bits: the layout of CUDA's
/// __nv_bfloat16 and __half, whose buffers AnyComm passes as these). Host communicators
/// reduce 16-bit values in float and round each result once; NCCL reduces them natively.
template <class T>
concept CommElement = std::same_as<T, float> || std::same_as<T, double> ||
    std::same_as<T, std::int64_t> || std::same_as<T, Bf16Bits> || std::same_as<T, F16Bits>;

/// The DType of a CommElement (for messages and mismatch checks).
template <CommElement T>
constexpr DType comm_dtype() {
  if constexpr (std::same_as<T, float>)
    return DType::f32;
  else if constexpr (std::same_as<T, double>)
    return DType::f64;
  else if constexpr (is_float16<T>)
    return T::dtype;
  else
    return DType::i64;
}

/// The type a reduction of T is carried out in: float for the 16-bit floats, T otherwise.
template <CommElement T>
using CommAccum = WideType<T>;

/// Bytes one rank sends and receives in one call.
struct ByteCount {
  std::uint64_t sent = 0;
  std::uint64_t received = 0;
  bool operator==(const ByteCount&) const = default;
};

/// The bytes a ring algorithm moves for one call, seen from `rank`; every communicator counts with
/// this model, whatever its transport does, so that counts compare across communicators.
constexpr ByteCount ring_bytes(CollectiveKind kind, std::size_t count, std::size_t elem_bytes,
                               int size, int rank, int root = 0) {
  const auto s = static_cast<std::uint64_t>(count) * elem_bytes;
  if (kind == CollectiveKind::send) return {s, 0};
  if (kind == CollectiveKind::recv) return {0, s};
  if (size <= 1) return {};
  const auto others = static_cast<std::uint64_t>(size - 1);
  switch (kind) {
    case CollectiveKind::all_reduce: {
      const auto block = (static_cast<std::uint64_t>(count) + size - 1) / size;
      return {2 * others * block * elem_bytes, 2 * others * block * elem_bytes};
    }
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::all_gather: return {others * s, others * s};
    case CollectiveKind::broadcast: {
      const int last = (root + size - 1) % size;
      return {rank == last ? 0 : s, rank == root ? 0 : s};
    }
    default: return {};
  }
}

/// What one communicator did, per collective kind, as seen from its own rank: the number of
/// calls and the bytes sent and received under the ring model of ring_bytes(). A
/// sub-communicator made by split() keeps its own CommStats.
struct CommStats {
  /// The counters of one kind.
  struct Counter {
    std::uint64_t calls = 0;
    std::uint64_t bytes_sent = 0;
    std::uint64_t bytes_received = 0;
    bool operator==(const Counter&) const = default;
  };

  std::array<Counter, collective_kind_count> by_kind{};

  Counter& operator[](CollectiveKind k) { return by_kind[static_cast<std::size_t>(k)]; }
  const Counter& operator[](CollectiveKind k) const { return by_kind[static_cast<std::size_t>(k)]; }

  void record(CollectiveKind k, ByteCount b) {
    Counter& c = (*this)[k];
    ++c.calls;
    c.bytes_sent += b.sent;
    c.bytes_received += b.received;
  }

  void reset() { by_kind = {}; }

  std::uint64_t total_calls() const {
    std::uint64_t t = 0;
    for (const Counter& c : by_kind) t += c.calls;
    return t;
  }
  std::uint64_t total_bytes_sent() const {
    std::uint64_t t = 0;
    for (const Counter& c : by_kind) t += c.bytes_sent;
    return t;
  }
  std::uint64_t total_bytes_received() const {
    std::uint64_t t = 0;
    for (const Counter& c : by_kind) t += c.bytes_received;
    return t;
  }

  CommStats& operator+=(const CommStats& o) {
    for (std::size_t i = 0; i < collective_kind_count; ++i) {
      by_kind[i].calls += o.by_kind[i].calls;
      by_kind[i].bytes_sent += o.by_kind[i].bytes_sent;
      by_kind[i].bytes_received += o.by_kind[i].bytes_received;
    }
    return *this;
  }

  bool operator==(const CommStats&) const = default;

  /// One line per kind that was called, then the totals, e.g.
  /// `all_reduce      calls 3  sent 24.0 KiB (24576 B)  received 24.0 KiB (24576 B)`.
  std::string summary() const;
};

namespace detail {
inline std::string format_bytes(std::uint64_t b) {
  char buf[64];
  if (b < 1024) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  } else {
    static constexpr const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(b) / 1024.0;
    int u = 0;
    while (v >= 1024.0 && u < 3) {
      v /= 1024.0;
      ++u;
    }
    std::snprintf(buf, sizeof buf, "%.1f %s (%llu B)", v, units[u],
                  static_cast<unsigned long long>(b));
  }
  return buf;
}

inline std::string format_counter(std::string_view name, std::uint64_t calls, std::uint64_t sent,
                                  std::uint64_t received) {
  char head[64];
  std::snprintf(head, sizeof head, "%-15.*s calls %llu", static_cast<int>(name.size()), name.data(),
                static_cast<unsigned long long>(calls));
  return std::string(head) + "  sent " + format_bytes(sent) + "  received " +
         format_bytes(received) + "\n";
}
}  // namespace detail

inline std::string CommStats::summary() const {
  std::string out;
  for (std::size_t i = 0; i < collective_kind_count; ++i) {
    const Counter& c = by_kind[i];
    if (c.calls == 0) continue;
    out += detail::format_counter(collective_kind_name(static_cast<CollectiveKind>(i)), c.calls,
                                  c.bytes_sent, c.bytes_received);
  }
  if (out.empty()) return "no communication\n";
  out += detail::format_counter("total", total_calls(), total_bytes_sent(), total_bytes_received());
  return out;
}

/// Names one async collective of a communicator (AsyncCommunicator): join(ticket) orders
/// the caller's later work after it and every async collective queued before it. The
/// default ticket names none.
struct CommTicket {
  std::uint64_t seq = 0;
};

/// A communicator whose collectives can run behind the caller's later work (NcclComm:
/// on its own CUDA stream). The *_async collectives queue the collective and return its
/// ticket; its buffers must not be read or written until it is joined: join(ticket) orders
/// everything the caller does afterwards after that collective (and the ones queued before
/// it), join() after every one queued so far. A plain (blocking) call on it also waits for
/// what was queued before it.
template <class C>
concept AsyncCommunicator = requires(C& c, float* d, const float* in, std::size_t n, ReduceOp op,
                                     CommTicket t) {
  { c.all_reduce_async(d, n, op) } -> std::same_as<CommTicket>;
  { c.reduce_scatter_async(in, d, n, op) } -> std::same_as<CommTicket>;
  { c.all_gather_async(in, d, n) } -> std::same_as<CommTicket>;
  c.join(t);
  c.join();
};

/// The collectives of a communicator for one element type T; pointers are in the memory the
/// communicator works on (host memory for ThreadComm and MpiComm).
template <class C, class T>
concept CommunicatorFor = requires(C& c, T* data, const T* in, std::size_t n, ReduceOp op, int peer,
                                   int tag) {
  c.all_reduce(data, n, op);          // in place, n elements
  c.reduce_scatter(in, data, n, op);  // in: n * size, out: n (rank r gets block r)
  c.all_gather(in, data, n);          // in: n, out: n * size (block r from rank r)
  c.broadcast(data, n, peer);         // from root `peer`
  c.send(in, n, peer, tag);
  c.recv(data, n, peer, tag);
};

/// A group of ranks that run collectives together (ThreadComm, MpiComm, ...). Every member
/// must make the same sequence of collective calls with the same n; split() is collective
/// too. A communicator is a cheap handle: copies refer to the same group and counters.
template <class C>
concept Communicator = std::copy_constructible<C> && CommunicatorFor<C, float> &&
    CommunicatorFor<C, double> && CommunicatorFor<C, std::int64_t> &&
    CommunicatorFor<C, Bf16Bits> && CommunicatorFor<C, F16Bits> &&
    requires(C& c, const C& cc, int color, int key) {
  { cc.rank() } -> std::convertible_to<int>;
  { cc.size() } -> std::convertible_to<int>;
  c.barrier();
  // ranks with equal color (>= 0) form a group, ordered by (key, old rank)
  { c.split(color, key) } -> std::same_as<C>;
  { c.stats() } -> std::same_as<CommStats&>;
  { cc.stats() } -> std::same_as<const CommStats&>;
};

}  // namespace seqpar::inline v0

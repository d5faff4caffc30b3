#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "seqpar/comm/communicator.hpp"
#include "seqpar/comm/thread_comm.hpp"

using namespace seqpar;

TEST_CASE("ring_bytes equals the ring formulas when the payload divides evenly") {
  // S bytes over N ranks: all_reduce 2(N-1)/N S, reduce_scatter and all_gather (N-1)/N S.
  for (int n_ranks : {2, 3, 4, 8}) {
    CAPTURE(n_ranks);
    const std::size_t count = 24 * 7;  // divisible by 2, 3, 4 and 8
    const double s = static_cast<double>(count) * sizeof(float);
    const double ring = static_cast<double>(n_ranks - 1) / n_ranks;
    for (int rank = 0; rank < n_ranks; ++rank) {
      const ByteCount ar = ring_bytes(CollectiveKind::all_reduce, count, 4, n_ranks, rank);
      CHECK(ar.sent == static_cast<std::uint64_t>(2 * ring * s));
      CHECK(ar.received == ar.sent);
      // reduce_scatter: S is the whole input (count per rank times N)
      const ByteCount rs = ring_bytes(CollectiveKind::reduce_scatter, count, 4, n_ranks, rank);
      CHECK(rs.sent == static_cast<std::uint64_t>(ring * s * n_ranks));
      CHECK(rs.received == rs.sent);
      const ByteCount ag = ring_bytes(CollectiveKind::all_gather, count, 8, n_ranks, rank);
      CHECK(ag.sent == static_cast<std::uint64_t>(ring * 2 * s * n_ranks));
      CHECK(ag.received == ag.sent);
    }
  }
}

TEST_CASE(
    "ring_bytes pads all_reduce blocks, follows the broadcast chain, and is zero for one rank") {
  // 10 floats over 4 ranks: blocks of ceil(10/4) = 3, 2 * 3 blocks * 3 * 4 bytes
  CHECK(ring_bytes(CollectiveKind::all_reduce, 10, 4, 4, 0) == ByteCount{72, 72});
  CHECK(ring_bytes(CollectiveKind::all_reduce, 10, 4, 4, 3) == ByteCount{72, 72});
  CHECK(ring_bytes(CollectiveKind::all_reduce, 1, 8, 8, 5) == ByteCount{112, 112});
  CHECK(ring_bytes(CollectiveKind::all_reduce, 0, 4, 4, 1) == ByteCount{0, 0});
  // broadcast of 100 bytes from root 2 over 4 ranks: chain 2 -> 3 -> 0 -> 1
  CHECK(ring_bytes(CollectiveKind::broadcast, 25, 4, 4, 2, 2) == ByteCount{100, 0});
  CHECK(ring_bytes(CollectiveKind::broadcast, 25, 4, 4, 3, 2) == ByteCount{100, 100});
  CHECK(ring_bytes(CollectiveKind::broadcast, 25, 4, 4, 0, 2) == ByteCount{100, 100});
  CHECK(ring_bytes(CollectiveKind::broadcast, 25, 4, 4, 1, 2) == ByteCount{0, 100});
  CHECK(ring_bytes(CollectiveKind::send, 5, 8, 4, 1) == ByteCount{40, 0});
  CHECK(ring_bytes(CollectiveKind::recv, 5, 8, 4, 1) == ByteCount{0, 40});
  CHECK(ring_bytes(CollectiveKind::barrier, 0, 0, 4, 1) == ByteCount{0, 0});
  for (auto kind : {CollectiveKind::all_reduce, CollectiveKind::reduce_scatter,
                    CollectiveKind::all_gather, CollectiveKind::broadcast, CollectiveKind::barrier})
    CHECK(ring_bytes(kind, 1000, 4, 1, 0) == ByteCount{0, 0});
}

TEST_CASE("CommStats records, sums, resets and summarises") {
  CommStats a;
  CHECK(a.summary() == "no communication\n");
  a.record(CollectiveKind::all_reduce, {3072, 3072});
  a.record(CollectiveKind::all_reduce, {1024, 1024});
  a.record(CollectiveKind::send, {10, 0});
  CHECK(a[CollectiveKind::all_reduce].calls == 2);
  CHECK(a[CollectiveKind::all_reduce].bytes_sent == 4096);
  CHECK(a[CollectiveKind::send].bytes_received == 0);
  CHECK(a.total_calls() == 3);
  CHECK(a.total_bytes_sent() == 4106);
  CHECK(a.total_bytes_received() == 4096);
  const std::string s = a.summary();
  CHECK(s.find("all_reduce      calls 2  sent 4.0 KiB (4096 B)  received 4.0 KiB (4096 B)\n") !=
        std::string::npos);
  CHECK(s.find("send            calls 1  sent 10 B  received 0 B\n") != std::string::npos);
  CHECK(s.find("total           calls 3") != std::string::npos);
  CHECK(s.find("barrier") == std::string::npos);
  CommStats b = a;
  b += a;
  CHECK(b[CollectiveKind::all_reduce].calls == 4);
  CHECK(b.total_bytes_sent() == 8212);
  b.reset();
  CHECK(b == CommStats{});
  CHECK(a != b);
}

TEST_CASE("ThreadComm satisfies the Communicator concept and a non-communicator does not") {
  static_assert(Communicator<ThreadComm>);
  static_assert(!Communicator<int>);
  struct NoSplit {
    int rank() const { return 0; }
    int size() const { return 1; }
  };
  static_assert(!Communicator<NoSplit>);
  static_assert(CommElement<float> && CommElement<double> && CommElement<std::int64_t>);
  static_assert(!CommElement<int> && !CommElement<std::uint64_t>);
  CHECK(true);
}

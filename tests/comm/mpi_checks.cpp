// MpiComm checks, run under mpirun (see tests/comm/CMakeLists.txt):
//   mpi_checks [--expect-ranks N]  every collective against a serial reference; exits 1 on
//                                  failure or when MPI did not start N ranks
//   mpi_checks --fail-in WHAT      the last rank throws while the others wait in WHAT
//                                  (all_reduce, recv or barrier); the job must end promptly
//                                  with "seqpar: rank R failed: ..." and a non-zero exit
//   mpi_checks --stop-in WHAT      the last rank stops itself (SIGSTOP) while the others
//                                  wait in WHAT; with SEQPAR_COMM_TIMEOUT_S set, the job must
//                                  end after it with the waiting call named, not hang
//   mpi_checks --mismatch WHAT     the ranks part ways after a few good collectives: rank 1
//                                  all-reduces 5 elements where the others do 4 (size), the
//                                  last rank calls barrier where the others all_reduce (kind),
//                                  broadcasts before it all-reduces (order), returns from its
//                                  function (finish), or gathers 3 elements in its row of a
//                                  2 x N/2 grid (split); the fingerprints must name each
//                                  rank's call within seconds, not after the timeout
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "comm_test_util.hpp"
#include "seqpar/comm/mpi_comm.hpp"

using namespace seqpar;
using comm_test::serial_reduce;
using comm_test::value;
using comm_test::values;

namespace {

struct Checker {
  int rank = 0;
  std::int64_t checks = 0;
  std::int64_t failures = 0;
  void expect(bool ok, const char* what, int line) {
    ++checks;
    if (ok) return;
    ++failures;
    std::fprintf(stderr, "rank %d: mpi_checks.cpp:%d: check failed: %s\n", rank, line, what);
  }
};
#define EXPECT(cond) chk.expect(static_cast<bool>(cond), #cond, __LINE__)

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

template <class F>
bool throws_error_containing(F&& f, const std::string& part) {
  try {
    f();
  } catch (const Error& e) {
    if (std::string(e.what()).find(part) != std::string::npos) return true;
    std::fprintf(stderr, "unexpected message: %s\n", e.what());
  }
  return false;
}

void check_all_reduce(MpiComm& c, Checker& chk) {
  const int n_ranks = c.size(), r = c.rank();
  for (std::size_t n : {std::size_t{1}, std::size_t{13}, std::size_t{1027}}) {
    // integer-valued floats add exactly in any order: the result must equal the serial sum
    std::vector<float> ints(n), expect(n, 0.0f);
    for (std::size_t i = 0; i < n; ++i) {
      ints[i] = static_cast<float>((r + 1) * 1000 + static_cast<int>(i));
      for (int k = 0; k < n_ranks; ++k)
        expect[i] += static_cast<float>((k + 1) * 1000 + static_cast<int>(i));
    }
    c.all_reduce(ints.data(), n, ReduceOp::sum);
    EXPECT(ints == expect);

    // general floats: every rank must get the same bits, close to the rank-order sum
    std::vector<float> v = values<float>(r, n, 21);
    c.all_reduce(v.data(), n, ReduceOp::sum);
    std::vector<float> everyone(n * n_ranks);
    c.all_gather(v.data(), everyone.data(), n);
    bool same = true, close = true;
    for (int k = 0; k < n_ranks; ++k)
      same = same && std::memcmp(everyone.data() + k * n, v.data(), n * sizeof(float)) == 0;
    for (std::size_t i = 0; i < n; ++i) {
      double abs_sum = 0;
      for (int k = 0; k < n_ranks; ++k) abs_sum += std::abs(value<float>(k, i, 21));
      close = close && std::abs(v[i] - serial_reduce<float>(n_ranks, i, 21, ReduceOp::sum)) <=
                           1e-6 * abs_sum;
    }
    EXPECT(same);
    EXPECT(close);

    std::vector<double> dmax = values<double>(r, n, 22);
    c.all_reduce(dmax.data(), n, ReduceOp::max);
    bool max_ok = true;
    for (std::size_t i = 0; i < n; ++i)
      max_ok = max_ok && dmax[i] == serial_reduce<double>(n_ranks, i, 22, ReduceOp::max);
    EXPECT(max_ok);

    std::vector<std::int64_t> isum = values<std::int64_t>(r, n, 23);
    c.all_reduce(isum.data(), n, ReduceOp::sum);
    bool int_ok = true;
    for (std::size_t i = 0; i < n; ++i)
      int_ok = int_ok && isum[i] == serial_reduce<std::int64_t>(n_ranks, i, 23, ReduceOp::sum);
    EXPECT(int_ok);
  }
}

void check_reduce_scatter_all_gather_broadcast(MpiComm& c, Checker& chk) {
  const int n_ranks = c.size(), r = c.rank();
  const std::size_t n = 5;
  std::vector<std::int64_t> in = values<std::int64_t>(r, n * n_ranks, 31), out(n);
  c.reduce_scatter(in.data(), out.data(), n, ReduceOp::sum);
  bool ok = true;
  for (std::size_t i = 0; i < n; ++i)
    ok = ok && out[i] == serial_reduce<std::int64_t>(n_ranks, r * n + i, 31, ReduceOp::sum);
  EXPECT(ok);
  // in place: the output is this rank's block of the input
  c.reduce_scatter(in.data(), in.data() + r * n, n, ReduceOp::sum);
  EXPECT(std::equal(out.begin(), out.end(), in.begin() + r * n));
  std::vector<float> fin = values<float>(r, n * n_ranks, 32), fout(n);
  c.reduce_scatter(fin.data(), fout.data(), n, ReduceOp::max);
  ok = true;
  for (std::size_t i = 0; i < n; ++i)
    ok = ok && fout[i] == serial_reduce<float>(n_ranks, r * n + i, 32, ReduceOp::max);
  EXPECT(ok);

  std::vector<double> mine = values<double>(r, 3, 33), all(3 * n_ranks, -1.0), expect;
  for (int k = 0; k < n_ranks; ++k) {
    auto v = values<double>(k, 3, 33);
    expect.insert(expect.end(), v.begin(), v.end());
  }
  c.all_gather(mine.data(), all.data(), 3);
  EXPECT(same_bits(all, expect));
  std::vector<double> in_place(3 * n_ranks, -1.0);
  std::copy(mine.begin(), mine.end(), in_place.begin() + 3 * r);
  c.all_gather(in_place.data() + 3 * r, in_place.data(), 3);
  EXPECT(same_bits(in_place, expect));

  for (int root = 0; root < n_ranks; ++root) {
    std::vector<float> b = values<float>(r, 100, 34);
    c.broadcast(b.data(), b.size(), root);
    EXPECT(same_bits(b, values<float>(root, 100, 34)));
  }
}

// bf16 and f16 buffers: MPI has no such types, so MpiComm reduces them in float and rounds
// each result once; moves are bit for bit.
void check_float16(MpiComm& c, Checker& chk) {
  const int n_ranks = c.size(), r = c.rank();
  const std::size_t n = 301;
  // Small integers add exactly in float in any order, and their sums (< 256) fit bf16.
  std::vector<Bf16Bits> ints(n);
  bool ok = true;
  for (std::size_t i = 0; i < n; ++i)
    ints[i] = Bf16Bits::from_float(static_cast<float>((r + 1) * (i % 7 + 1)));
  c.all_reduce(ints.data(), n, ReduceOp::sum);
  for (std::size_t i = 0; i < n; ++i)
    ok = ok && ints[i].to_float() == static_cast<float>(n_ranks * (n_ranks + 1) / 2 * (i % 7 + 1));
  EXPECT(ok);
  // Rounded once: 1 + (size - 1) 2^-8 is exact in float; added one rank at a time in bf16 it
  // would stay 1 (1 + 2^-8 is a tie that rounds to even).
  Bf16Bits once = Bf16Bits::from_float(r == 0 ? 1.0f : 0x1p-8f);
  c.all_reduce(&once, 1, ReduceOp::sum);
  EXPECT(once == Bf16Bits::from_float(1.0f + static_cast<float>(n_ranks - 1) * 0x1p-8f));
  if (n_ranks >= 3) EXPECT(once.to_float() > 1.0f);

  std::vector<F16Bits> in = values<F16Bits>(r, n * n_ranks, 35), out(n);
  c.reduce_scatter(in.data(), out.data(), n, ReduceOp::max);
  ok = true;
  for (std::size_t i = 0; i < n; ++i)
    ok = ok && out[i] == serial_reduce<F16Bits>(n_ranks, r * n + i, 35, ReduceOp::max);
  EXPECT(ok);

  std::vector<F16Bits> mine = values<F16Bits>(r, n, 36), all(n * n_ranks), expect;
  for (int k = 0; k < n_ranks; ++k) {
    auto v = values<F16Bits>(k, n, 36);
    expect.insert(expect.end(), v.begin(), v.end());
  }
  c.all_gather(mine.data(), all.data(), n);
  EXPECT(same_bits(all, expect));
  std::vector<Bf16Bits> b = values<Bf16Bits>(r, n, 37);
  c.broadcast(b.data(), n, n_ranks - 1);
  EXPECT(same_bits(b, values<Bf16Bits>(n_ranks - 1, n, 37)));
  if (n_ranks >= 2 && r < 2) {
    std::vector<Bf16Bits> msg = values<Bf16Bits>(r, n, 38), got(n);
    if (r == 0) c.send(msg.data(), n, 1, 6);
    if (r == 1) {
      c.recv(got.data(), n, 0, 6);
      EXPECT(same_bits(got, values<Bf16Bits>(0, n, 38)));
    }
  }
  c.barrier();
}

void check_send_recv(MpiComm& c, Checker& chk) {
  const int n_ranks = c.size(), r = c.rank();
  const int next = (r + 1) % n_ranks, prev = (r + n_ranks - 1) % n_ranks;
  // even ranks send first, odd ranks receive first: no cycle of blocked sends
  for (std::size_t n : {std::size_t{7}, std::size_t{1} << 20}) {
    std::vector<float> out = values<float>(r, n, 41), in(n);
    if (r % 2 == 0) {
      c.send(out.data(), n, next, 5);
      c.recv(in.data(), n, prev, 5);
    } else {
      c.recv(in.data(), n, prev, 5);
      c.send(out.data(), n, next, 5);
    }
    EXPECT(same_bits(in, values<float>(prev, n, 41)));
  }
  // tags are matched, not arrival order (small messages go out eagerly)
  if (r == 0) {
    std::int64_t a = 11, b = 22;
    c.send(&a, 1, 1, 1);
    c.send(&b, 1, 1, 2);
  } else if (r == 1) {
    std::int64_t a = 0, b = 0;
    c.recv(&b, 1, 0, 2);
    c.recv(&a, 1, 0, 1);
    EXPECT(a == 11 && b == 22);
  }
  c.barrier();
}

void check_split(MpiComm& world, Checker& chk) {
  const int n_ranks = world.size(), w = world.rank();
  if (n_ranks % 2 != 0) return;
  // a 2 x (N/2) grid: w = row * cols + col
  const int cols = n_ranks / 2, row = w / cols, col = w % cols;
  MpiComm rows = world.split(row, col);
  MpiComm columns = world.split(col, row);
  EXPECT(rows.size() == cols && rows.rank() == col);
  EXPECT(columns.size() == 2 && columns.rank() == row);
  std::int64_t s = w;
  rows.all_reduce(&s, 1, ReduceOp::sum);
  std::int64_t expect = 0;
  for (int k = 0; k < cols; ++k) expect += row * cols + k;
  EXPECT(s == expect);
  std::int64_t mine = w, both[2] = {-1, -1};
  columns.all_gather(&mine, both, 1);
  EXPECT(both[0] == col && both[1] == cols + col);
  // keys reversed: new rank = size - 1 - old rank
  MpiComm rev = world.split(0, -w);
  EXPECT(rev.rank() == n_ranks - 1 - w);
  // each communicator counts its own calls, with the ring formulas
  EXPECT(rows.stats()[CollectiveKind::all_reduce].calls == 1);
  EXPECT(rows.stats()[CollectiveKind::all_reduce].bytes_sent ==
         2u * (cols - 1) * 1 * 8);  // one element: a block of ceil(1/cols) = 1
  EXPECT(columns.stats()[CollectiveKind::all_gather].bytes_received == 8u);
  EXPECT(rev.stats().total_calls() == 0);
}

void check_stats(MpiComm& world, Checker& chk) {
  MpiComm c = world.split(0, world.rank());  // fresh counters
  const std::uint64_t n_ranks = c.size(), n = 1027;
  std::vector<float> f(n * n_ranks, 1.0f), g(n);
  c.all_reduce(f.data(), n, ReduceOp::sum);
  c.reduce_scatter(f.data(), g.data(), n, ReduceOp::sum);
  c.all_gather(g.data(), f.data(), n);
  c.broadcast(g.data(), n, 0);
  c.barrier();
  const CommStats& s = c.stats();
  EXPECT(s[CollectiveKind::all_reduce].bytes_sent ==
         2 * (n_ranks - 1) * ((n + n_ranks - 1) / n_ranks) * 4);
  EXPECT(s[CollectiveKind::reduce_scatter].bytes_received == (n_ranks - 1) * n * 4);
  EXPECT(s[CollectiveKind::all_gather].bytes_sent == (n_ranks - 1) * n * 4);
  EXPECT(s[CollectiveKind::broadcast].bytes_received == (c.rank() == 0 ? 0 : n * 4));
  EXPECT(s[CollectiveKind::broadcast].bytes_sent == (c.rank() == c.size() - 1 ? 0 : n * 4));
  EXPECT(s[CollectiveKind::barrier].calls == 1);
  EXPECT(s.total_calls() == 5);
}

void check_errors(MpiComm& c, Checker& chk) {
  float x[8] = {};
  EXPECT(throws_error_containing([&] { c.broadcast(x, 1, c.size()); }, "is out of range"));
  EXPECT(
      throws_error_containing([&] { c.send(x, 1, c.rank(), 0); }, "a peer must be another rank"));
  EXPECT(throws_error_containing([&] { c.recv(x, 1, (c.rank() + 1) % c.size(), 40000); },
                                 "outside [0, 32767]"));
  // rank 0 sends 4 floats twice; rank 1 receives too few (MPI reports truncation), then too many
  if (c.rank() == 0) {
    c.send(x, 4, 1, 7);
    c.send(x, 4, 1, 8);
  } else if (c.rank() == 1) {
    EXPECT(
        throws_error_containing([&] { c.recv(x, 3, 0, 7); }, "MpiComm rank 1: MPI_Recv failed: "));
    EXPECT(
        throws_error_containing([&] { c.recv(x, 5, 0, 8); },
                                "rank 1 receives 5 F32 from rank 0 (tag 8) but that rank sent 4"));
  }
  c.barrier();
  EXPECT(node_local_size(c) == c.size());  // one node here
  EXPECT(node_local_rank(c) == c.rank());
}

int run_checks(MpiComm& world) {
  Checker chk;
  chk.rank = world.rank();
  EXPECT(world.size() >= 2);
  const auto t0 = std::chrono::steady_clock::now();
  check_all_reduce(world, chk);
  check_reduce_scatter_all_gather_broadcast(world, chk);
  check_send_recv(world, chk);
  check_float16(world, chk);
  check_split(world, chk);
  check_stats(world, chk);
  check_errors(world, chk);
  std::int64_t totals[2] = {chk.checks, chk.failures};
  world.all_reduce(totals, 2, ReduceOp::sum);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (world.rank() == 0) {
    std::printf("mpi_checks: %d ranks, %lld checks, %lld failed, %.3f s\n", world.size(),
                static_cast<long long>(totals[0]), static_cast<long long>(totals[1]), s);
    if (totals[1] == 0) std::printf("%s", world.stats().summary().c_str());
  }
  return totals[1] == 0 ? 0 : 1;
}

void fail_while_others_wait(MpiComm& world, const std::string& what, bool stop) {
  const int failing = world.size() - 1;
  world.barrier();
  if (world.rank() == failing) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (stop) {
      std::fflush(stdout);
      ::raise(SIGSTOP);  // never returns on its own: mpirun kills it with the job
    }
    throw std::runtime_error("deliberate failure while the others wait in " + what);
  }
  float x[4] = {};
  if (what == "all_reduce")
    world.all_reduce(x, 4, ReduceOp::sum);
  else if (what == "recv")
    world.recv(x, 4, failing, 0);
  else if (what == "barrier")
    world.barrier();
  else
    throw std::invalid_argument("unknown --fail-in " + what);
}

// After a few good collectives, the ranks call different ones (see the head comment).
void part_ways(MpiComm& world, const std::string& how) {
  const int last = world.size() - 1, r = world.rank();
  float x[8] = {};
  for (int i = 0; i < 3; ++i) world.all_reduce(x, 2, ReduceOp::sum);
  world.barrier();
  if (how == "size") {
    world.all_reduce(x, r == 1 ? 5 : 4, ReduceOp::sum);
  } else if (how == "kind") {
    if (r == last)
      world.barrier();
    else
      world.all_reduce(x, 4, ReduceOp::sum);
  } else if (how == "order") {
    if (r == last) world.broadcast(x, 2, 0);
    world.all_reduce(x, 4, ReduceOp::sum);
    if (r != last) world.broadcast(x, 2, 0);
  } else if (how == "finish") {
    if (r != last) world.all_reduce(x, 4, ReduceOp::sum);  // the last rank returns
  } else if (how == "split") {
    const int cols = world.size() / 2;
    MpiComm column = world.split(r % cols, r / cols);
    column.all_gather(x, x + 4, r == last ? 3 : 2);
  } else {
    throw std::invalid_argument("unknown --mismatch " + how);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string fail_in, mismatch;
  bool stop = false;
  int expect_ranks = 0;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--fail-in") fail_in = argv[i + 1];
    if (std::string(argv[i]) == "--stop-in") fail_in = argv[i + 1], stop = true;
    if (std::string(argv[i]) == "--expect-ranks") expect_ranks = std::stoi(argv[i + 1]);
    if (std::string(argv[i]) == "--mismatch") mismatch = argv[i + 1];
  }
  return mpi_main(argc, argv, [&](MpiComm& world) {
    if (!mismatch.empty()) {
      part_ways(world, mismatch);
      return 0;
    }
    if (!fail_in.empty()) {
      fail_while_others_wait(world, fail_in, stop);
      return 0;
    }
    if (expect_ranks && world.size() != expect_ranks) {
      std::fprintf(stderr, "mpi_checks: expected %d ranks, MPI started %d\n", expect_ranks,
                   world.size());
      return 1;
    }
    return run_checks(world);
  });
}

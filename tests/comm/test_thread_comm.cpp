#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "comm_test_util.hpp"
#include "seqpar/comm/thread_comm.hpp"

using namespace seqpar;
using comm_test::serial_reduce;
using comm_test::value;
using comm_test::values;

namespace {
constexpr int kRankCounts[] = {1, 2, 3, 4, 8};
constexpr std::size_t kSizes[] = {0, 1, 5, 13, 1000, 1027};  // 1027 divides by none of 2..8

template <class T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}
}  // namespace

TEST_CASE_TEMPLATE("ThreadComm all_reduce equals the serial rank-order reduction on every rank", T,
                   float, double, std::int64_t, Bf16Bits, F16Bits) {
  for (int n_ranks : kRankCounts) {
    for (std::size_t n : kSizes) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::max}) {
        CAPTURE(n_ranks);
        CAPTURE(n);
        CAPTURE(reduce_op_name(op));
        const int salt = static_cast<int>(n) + 7 * static_cast<int>(op);
        std::vector<std::vector<T>> out(n_ranks);
        run_ranks(n_ranks, [&](ThreadComm& c) {
          std::vector<T> v = values<T>(c.rank(), n, salt);
          c.all_reduce(v.data(), n, op);
          out[c.rank()] = std::move(v);
        });
        int wrong = 0;
        for (int r = 0; r < n_ranks; ++r)
          for (std::size_t i = 0; i < n; ++i)
            wrong += !same_bits(out[r][i], serial_reduce<T>(n_ranks, i, salt, op));
        CHECK(wrong == 0);
      }
    }
  }
}

TEST_CASE("ThreadComm float sums are bit-reproducible and follow rank order, not another order") {
  const std::size_t n = 4096;
  for (int n_ranks : {3, 4, 8}) {
    CAPTURE(n_ranks);
    std::vector<float> first, second;
    for (auto* out : {&first, &second}) {
      run_ranks(n_ranks, [&](ThreadComm& c) {
        std::vector<float> v = values<float>(c.rank(), n, 99);
        c.all_reduce(v.data(), n, ReduceOp::sum);
        if (c.rank() == n_ranks - 1) *out = v;
      });
    }
    int differs_from_rank_order = 0, differs_between_runs = 0, differs_from_reverse = 0;
    for (std::size_t i = 0; i < n; ++i) {
      float reverse = value<float>(n_ranks - 1, i, 99);
      for (int k = n_ranks - 2; k >= 0; --k) reverse += value<float>(k, i, 99);
      differs_from_rank_order +=
          !same_bits(first[i], serial_reduce<float>(n_ranks, i, 99, ReduceOp::sum));
      differs_between_runs += !same_bits(first[i], second[i]);
      differs_from_reverse += !same_bits(first[i], reverse);
    }
    CHECK(differs_from_rank_order == 0);
    CHECK(differs_between_runs == 0);
    // the inputs are chosen so that summation order matters: the test can tell orders apart
    CHECK(differs_from_reverse > 0);
  }
}

TEST_CASE("ThreadComm max lets a NaN win") {
  run_ranks(3, [](ThreadComm& c) {
    float v[2] = {static_cast<float>(c.rank()), c.rank() == 1 ? NAN : 1.0f};
    c.all_reduce(v, 2, ReduceOp::max);
    CHECK(v[0] == 2.0f);
    CHECK(std::isnan(v[1]));
  });
}

TEST_CASE_TEMPLATE("ThreadComm reduce_scatter gives rank r block r of the rank-order reduction", T,
                   float, std::int64_t, Bf16Bits, F16Bits) {
  for (int n_ranks : kRankCounts) {
    for (std::size_t n : {0, 1, 5, 131}) {
      for (bool in_place : {false, true}) {
        CAPTURE(n_ranks);
        CAPTURE(n);
        CAPTURE(in_place);
        const int salt = 1000 + static_cast<int>(n);
        std::vector<std::vector<T>> out(n_ranks);
        run_ranks(n_ranks, [&](ThreadComm& c) {
          std::vector<T> in = values<T>(c.rank(), n * n_ranks, salt);
          if (in_place) {
            c.reduce_scatter(in.data(), in.data() + c.rank() * n, n, ReduceOp::sum);
            out[c.rank()].assign(in.begin() + c.rank() * n, in.begin() + (c.rank() + 1) * n);
          } else {
            out[c.rank()].assign(n, comm_test::filler<T>(-1));
            c.reduce_scatter(in.data(), out[c.rank()].data(), n, ReduceOp::sum);
          }
        });
        int wrong = 0;
        for (int r = 0; r < n_ranks; ++r)
          for (std::size_t i = 0; i < n; ++i)
            wrong +=
                !same_bits(out[r][i], serial_reduce<T>(n_ranks, r * n + i, salt, ReduceOp::sum));
        CHECK(wrong == 0);
      }
    }
  }
  run_ranks(4, [](ThreadComm& c) {  // max
    std::vector<T> in = values<T>(c.rank(), 12, 5);
    std::vector<T> out(3);
    c.reduce_scatter(in.data(), out.data(), 3, ReduceOp::max);
    for (std::size_t i = 0; i < 3; ++i)
      CHECK(out[i] == serial_reduce<T>(4, c.rank() * 3 + i, 5, ReduceOp::max));
  });
}

TEST_CASE_TEMPLATE("ThreadComm all_gather puts rank r's block at r on every rank", T, float, double,
                   std::int64_t, Bf16Bits, F16Bits) {
  for (int n_ranks : kRankCounts) {
    for (std::size_t n : {0, 1, 7, 300}) {
      for (bool in_place : {false, true}) {
        CAPTURE(n_ranks);
        CAPTURE(n);
        CAPTURE(in_place);
        std::vector<std::vector<T>> out(n_ranks);
        run_ranks(n_ranks, [&](ThreadComm& c) {
          std::vector<T> mine = values<T>(c.rank(), n, 3);
          std::vector<T>& o = out[c.rank()];
          o.assign(n * n_ranks, comm_test::filler<T>(-7));
          if (in_place) {
            std::copy(mine.begin(), mine.end(), o.begin() + c.rank() * n);
            c.all_gather(o.data() + c.rank() * n, o.data(), n);
          } else {
            c.all_gather(mine.data(), o.data(), n);
          }
        });
        int wrong = 0;
        for (int r = 0; r < n_ranks; ++r)
          for (int k = 0; k < n_ranks; ++k)
            for (std::size_t i = 0; i < n; ++i)
              wrong += !same_bits(out[r][k * n + i], value<T>(k, i, 3));
        CHECK(wrong == 0);
      }
    }
  }
}

TEST_CASE("ThreadComm sums 16-bit floats in float and rounds once") {
  // bf16 has 8 significant bits: 1 + 2^-8 is a tie that rounds to 1 (even), so adding the
  // ranks' 2^-8 one at a time in bf16 would stay at 1; the float sum 1 + 2^-7 is exact.
  run_ranks(3, [](ThreadComm& c) {
    Bf16Bits b = Bf16Bits::from_float(c.rank() == 0 ? 1.0f : 0x1p-8f);
    c.all_reduce(&b, 1, ReduceOp::sum);
    CHECK(b.to_float() == 1.0f + 0x1p-7f);
    // f16 has 11: 2048 + 1 is a tie that rounds to 2048; the float sum 2050 is exact.
    F16Bits h = F16Bits::from_float(c.rank() == 0 ? 2048.0f : 1.0f);
    c.all_reduce(&h, 1, ReduceOp::sum);
    CHECK(h.to_float() == 2050.0f);
    // and a result beyond f16's range becomes infinity, as the hardware type would
    F16Bits big = F16Bits::from_float(40000.0f);
    c.all_reduce(&big, 1, ReduceOp::sum);
    CHECK(std::isinf(big.to_float()));
  });
}

TEST_CASE("ThreadComm moves 16-bit floats bit for bit, and a type mismatch names both types") {
  run_ranks(2, [](ThreadComm& c) {
    // NaN payloads and signed zero survive broadcast and send/recv.
    std::vector<Bf16Bits> v = {Bf16Bits::from_bits(0x7fc1), Bf16Bits::from_bits(0x8000),
                               Bf16Bits::from_bits(0x3f80), Bf16Bits::from_bits(0xff80)};
    const auto sent = v;
    if (c.rank() == 1) std::fill(v.begin(), v.end(), Bf16Bits{});
    c.broadcast(v.data(), v.size(), 0);
    CHECK(v == sent);
    if (c.rank() == 0) {
      c.send(sent.data(), sent.size(), 1, 4);
      const F16Bits h = F16Bits::from_bits(0x3c00);
      c.send(&h, 1, 1, 5);
    } else {
      std::vector<Bf16Bits> got(4);
      c.recv(got.data(), got.size(), 0, 4);
      CHECK(got == sent);
      Bf16Bits wrong{};
      try {
        c.recv(&wrong, 1, 0, 5);
        FAIL("a BF16 recv of an F16 message must throw");
      } catch (const Error& e) {
        const std::string msg = e.what();
        CHECK(msg.find("receives 1 BF16") != std::string::npos);
        CHECK(msg.find("sent 1 F16") != std::string::npos);
      }
    }
  });
}

TEST_CASE("ThreadComm broadcast copies the root's data from every root") {
  for (int n_ranks : kRankCounts) {
    for (int root = 0; root < n_ranks; ++root) {
      CAPTURE(n_ranks);
      CAPTURE(root);
      std::vector<std::vector<double>> out(n_ranks);
      run_ranks(n_ranks, [&](ThreadComm& c) {
        std::vector<double> v = values<double>(c.rank(), 77, 11);
        c.broadcast(v.data(), v.size(), root);
        out[c.rank()] = v;
        std::int64_t x = c.rank() == root ? 123456789012345 : 0;
        c.broadcast(&x, 1, root);
        CHECK(x == 123456789012345);
      });
      for (int r = 0; r < n_ranks; ++r) CHECK(out[r] == values<double>(root, 77, 11));
    }
  }
}

TEST_CASE("ThreadComm send/recv pass a ring and match tags, oldest first") {
  for (int n_ranks : {2, 3, 4, 8}) {
    CAPTURE(n_ranks);
    run_ranks(n_ranks, [&](ThreadComm& c) {
      const int next = (c.rank() + 1) % n_ranks;
      const int prev = (c.rank() + n_ranks - 1) % n_ranks;
      std::vector<float> a = values<float>(c.rank(), 33, 1);
      std::vector<float> b = values<float>(c.rank(), 4, 2);
      std::int64_t first = 100 + c.rank(), second = 200 + c.rank();
      c.send(a.data(), a.size(), next, 1);
      c.send(b.data(), b.size(), next, 2);
      c.send(&first, 1, next, 3);
      c.send(&second, 1, next, 3);
      std::vector<float> got_b(4), got_a(33);
      c.recv(got_b.data(), 4, prev, 2);  // a later tag first
      c.recv(got_a.data(), 33, prev, 1);
      std::int64_t x = 0, y = 0;
      c.recv(&x, 1, prev, 3);
      c.recv(&y, 1, prev, 3);
      CHECK(got_a == values<float>(prev, 33, 1));
      CHECK(got_b == values<float>(prev, 4, 2));
      CHECK(x == 100 + prev);
      CHECK(y == 200 + prev);
    });
  }
}

TEST_CASE("ThreadComm recv waits for a send that comes later") {
  run_ranks(2, [](ThreadComm& c) {
    double v = 0;
    if (c.rank() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      v = 2.5;
      c.send(&v, 1, 1, 0);
    } else {
      c.recv(&v, 1, 0, 0);
      CHECK(v == 2.5);
    }
  });
}

TEST_CASE("ThreadComm counts calls and ring bytes per kind on every rank") {
  for (int n_ranks : kRankCounts) {
    CAPTURE(n_ranks);
    const std::size_t n = 1027;  // not a multiple of any rank count but 1
    std::vector<CommStats> seen(n_ranks);
    run_ranks(n_ranks, [&](ThreadComm& c) {
      std::vector<float> f(n, 1.0f);
      std::vector<double> d(n * n_ranks, 1.0);
      std::vector<double> blk(n);
      c.all_reduce(f.data(), n, ReduceOp::sum);
      c.all_reduce(f.data(), 8, ReduceOp::max);
      c.reduce_scatter(d.data(), blk.data(), n, ReduceOp::sum);
      c.all_gather(blk.data(), d.data(), n);
      c.broadcast(f.data(), n, n_ranks - 1);
      c.barrier();
      if (n_ranks > 1) {
        c.send(f.data(), 10, (c.rank() + 1) % n_ranks, 0);
        c.recv(f.data(), 10, (c.rank() + n_ranks - 1) % n_ranks, 0);
      }
      seen[c.rank()] = c.stats();
    });
    const std::uint64_t others = n_ranks - 1;
    const std::uint64_t ceil_block = (n + n_ranks - 1) / n_ranks;
    const std::uint64_t ceil_8 = (8 + n_ranks - 1) / n_ranks;
    for (int r = 0; r < n_ranks; ++r) {
      CAPTURE(r);
      const CommStats& s = seen[r];
      CHECK(s[CollectiveKind::all_reduce].calls == 2);
      CHECK(s[CollectiveKind::all_reduce].bytes_sent == 2 * others * (ceil_block + ceil_8) * 4);
      CHECK(s[CollectiveKind::all_reduce].bytes_received == 2 * others * (ceil_block + ceil_8) * 4);
      CHECK(s[CollectiveKind::reduce_scatter].bytes_sent == others * n * 8);
      CHECK(s[CollectiveKind::reduce_scatter].bytes_received == others * n * 8);
      CHECK(s[CollectiveKind::all_gather].bytes_sent == others * n * 8);
      CHECK(s[CollectiveKind::all_gather].bytes_received == others * n * 8);
      // chain from root N-1: N-1 -> 0 -> 1 -> ... -> N-2
      const bool root = r == n_ranks - 1, last = r == (n_ranks == 1 ? 0 : n_ranks - 2);
      CHECK(s[CollectiveKind::broadcast].bytes_sent == (last ? 0 : n * 4));
      CHECK(s[CollectiveKind::broadcast].bytes_received == (root ? 0 : n * 4));
      CHECK(s[CollectiveKind::barrier].calls == 1);
      CHECK(s[CollectiveKind::barrier].bytes_sent == 0);
      CHECK(s[CollectiveKind::send].calls == (n_ranks > 1 ? 1u : 0u));
      CHECK(s[CollectiveKind::send].bytes_sent == (n_ranks > 1 ? 40u : 0u));
      CHECK(s[CollectiveKind::recv].bytes_received == (n_ranks > 1 ? 40u : 0u));
      if (n_ranks == 1) CHECK(s.total_bytes_sent() + s.total_bytes_received() == 0);
    }
  }
}

TEST_CASE("ThreadComm stats are shared by copies of a rank's handle and reset") {
  run_ranks(2, [](ThreadComm& c) {
    ThreadComm copy = c;
    float x = 1;
    copy.all_reduce(&x, 1, ReduceOp::sum);
    CHECK(c.stats()[CollectiveKind::all_reduce].calls == 1);
    const ThreadComm& cc = c;
    CHECK(cc.stats().total_calls() == 1);
    c.stats().reset();
    CHECK(copy.stats().total_calls() == 0);
  });
}

TEST_CASE("a default ThreadComm is one rank and copies buffers through") {
  ThreadComm c;
  CHECK(c.rank() == 0);
  CHECK(c.size() == 1);
  float in[3] = {1, 2, 3}, out[3] = {};
  c.all_gather(in, out, 3);
  CHECK(out[2] == 3);
  c.reduce_scatter(in, out, 3, ReduceOp::sum);
  CHECK(out[1] == 2);
  c.barrier();
  ThreadComm s = c.split(0, 0);
  CHECK(s.size() == 1);
  CHECK(c.stats()[CollectiveKind::all_gather].calls == 1);
}

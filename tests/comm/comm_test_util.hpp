#pragma once
// Shared by the communicator tests: deterministic per-rank inputs, the serial rank-order
// reductions they are checked against, and a deadline for tests that must not hang.

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "seqpar/comm/communicator.hpp"

namespace comm_test {

inline std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Rank `rank`'s i-th input of test `salt`. Floats span many magnitudes so that the order of
// a sum changes its rounding.
template <class T>
T value(int rank, std::size_t i, int salt = 0) {
  if constexpr (seqpar::is_float16<T>) return T::from_float(value<float>(rank, i, salt));
  const std::uint64_t h =
      mix((static_cast<std::uint64_t>(salt) << 48) ^ (static_cast<std::uint64_t>(rank) << 32) ^ i);
  if constexpr (seqpar::is_float16<T>) {
    return T{};  // (returned above)
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<std::int64_t>(h % 2000001) - 1000000) *
           static_cast<T>(1 + (h >> 40) % 1000003);
  } else {
    const double unit = static_cast<double>(h >> 11) * 0x1.0p-53 * 2.0 - 1.0;  // [-1, 1)
    const int exponent = static_cast<int>((h >> 3) % 24) - 12;
    return static_cast<T>(std::ldexp(unit, exponent));
  }
}

template <class T>
std::vector<T> values(int rank, std::size_t n, int salt = 0, std::size_t offset = 0) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = value<T>(rank, offset + i, salt);
  return v;
}

// A value no test input has, for output buffers (-1 or -7 as T).
template <class T>
T filler(int x) {
  if constexpr (seqpar::is_float16<T>)
    return T::from_float(static_cast<float>(x));
  else
    return static_cast<T>(x);
}

// The reduction of element i over ranks 0..size-1, in that order: acc = x0; acc op= x1; ...
// 16-bit floats are combined in float and rounded once at the end.
template <class T>
T serial_reduce(int size, std::size_t i, int salt, seqpar::ReduceOp op) {
  if constexpr (seqpar::is_float16<T>) {
    float acc = value<T>(0, i, salt).to_float();
    for (int k = 1; k < size; ++k) {
      const float x = value<T>(k, i, salt).to_float();
      acc = op == seqpar::ReduceOp::sum ? acc + x : (x > acc ? x : acc);
    }
    return T::from_float(acc);
  } else {
    T acc = value<T>(0, i, salt);
    for (int k = 1; k < size; ++k) {
      const T x = value<T>(k, i, salt);
      acc = op == seqpar::ReduceOp::sum ? static_cast<T>(acc + x) : (x > acc ? x : acc);
    }
    return acc;
  }
}

// Runs body on another thread and returns its wall time in seconds; if it has not finished
// after `limit`, the whole test program stops (a hung communicator cannot be unwound).
inline double timed_within(std::chrono::seconds limit, const std::function<void()>& body) {
  std::packaged_task<void()> task(body);
  auto done = task.get_future();
  const auto t0 = std::chrono::steady_clock::now();
  std::thread runner(std::move(task));
  if (done.wait_for(limit) != std::future_status::ready) {
    std::fprintf(stderr, "communicator test hung for more than %lld s\n",
                 static_cast<long long>(limit.count()));
    std::fflush(stderr);
    std::_Exit(3);
  }
  runner.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  done.get();  // rethrows what body threw
  return s;
}

/// What every rank ended with: "<returned>" for a normal return, else the message it threw.
struct Outcome {
  std::mutex mutex;
  std::vector<std::string> messages;
  explicit Outcome(int n) : messages(n, "<returned>") {}
  void set(int r, std::string m) {
    std::lock_guard lock(mutex);
    messages[r] = std::move(m);
  }
};

}  // namespace comm_test

#pragma once
// What this machine can do, measured by the process that asks: the GEMM rate of Ops<Cpu> in
// a storage type, at a training step's shape, and the memory bandwidth of a streaming loop
// on the same threads. The profile of a step (core/profile.hpp) sets its phases against them.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "seqpar/backend/cpu/ops.hpp"
#include "seqpar/core/omp.hpp"
#include "seqpar/core/profile.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace seqpar::inline v0 {

namespace detail {
template <class F>
double best_seconds(int repeats, F&& run) {
  run();  // first touch, caches and the threads' start
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}
}  // namespace detail

/// The best rate of repeats runs of C[m, n] = A[m, k] B[n, k]^T in storage type T (a linear
/// layer's forward: m tokens, n outputs, k inputs), in multiply-adds x 2 per second. The
/// default shape is SeqGPT-560M's MLP up at 1536 tokens, 16 row blocks of the CPU kernels.
template <class T>
double probe_gemm_rate(std::int64_t m = 1536, std::int64_t n = 4096, std::int64_t k = 1024,
                       int repeats = 5) {
  std::vector<T> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(n * k)),
      c(static_cast<std::size_t>(m * n));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = T(static_cast<float>(i % 251) / 251.0f - 0.5f);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = T(static_cast<float>(i % 241) / 241.0f - 0.5f);
  const double s = detail::best_seconds(repeats, [&] {
    Ops<Cpu>::gemm(false, true, m, n, k, T(1.0f), a.data(), k, b.data(), k, T(0.0f), c.data(), n);
  });
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / s;
}

/// The memory bandwidth on this process's threads, bytes read and written per second: the
/// better of repeats passes of y = 2 x + y (two read streams and one written) and of a sum
/// of x (one read stream), over float arrays of `bytes` each.
inline double probe_bandwidth(std::int64_t bytes = std::int64_t{256} << 20, int repeats = 5) {
  const std::int64_t n = bytes / static_cast<std::int64_t>(sizeof(float));
  std::vector<float> x(static_cast<std::size_t>(n), 1.0f), y(static_cast<std::size_t>(n), 0.0f);
  float* xp = x.data();
  float* yp = y.data();
  const double triad = detail::best_seconds(repeats, [&] {
    SEQPAR_OMP(parallel for simd schedule(static))
    for (std::int64_t i = 0; i < n; ++i) yp[i] = 2.0f * xp[i] + yp[i];
  });
  volatile float sink = 0;
  const double read = detail::best_seconds(repeats, [&] {
    float sum = 0;
    SEQPAR_OMP(parallel for simd schedule(static) reduction(+ : sum))
    for (std::int64_t i = 0; i < n; ++i) sum += xp[i];
    sink = sum;
  });
  const double b = static_cast<double>(n) * sizeof(float);
  return std::max(3.0 * b / triad, b / read);
}

/// Both probes, in storage type T, on this process's threads.
template <class T>
profile::Peaks probe_peaks() {
  profile::Peaks p;
  p.gemm_flops_per_s = probe_gemm_rate<T>();
  p.bytes_per_s = probe_bandwidth();
#ifdef _OPENMP
  p.threads = omp_get_max_threads();
#endif
  return p;
}

}  // namespace seqpar::inline v0

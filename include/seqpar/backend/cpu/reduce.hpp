#pragma once
// Reductions on the CPU, each in a fixed order whatever the number of threads: column sums
// (a bias gradient; in float for 16-bit storage), and sums of squares in double (the
// gradient norm). Part of Ops<Cpu>.

#ifndef SEQPAR_BACKEND_CPU_OPS_INCLUDED
#error "backend/cpu/reduce.hpp is a part of Ops<Cpu>: include seqpar/backend/cpu/ops.hpp instead"
#endif

#include <algorithm>
#include <cstdint>
#include <vector>

#include "seqpar/backend/cpu/loops.hpp"
#include "seqpar/backend/kernels.hpp"
#include "seqpar/core/omp.hpp"

namespace seqpar::inline v0::detail::cpu {

// acc[d] += sum over rows of y[n, d] (16-bit storage: summed in float, acc rounded once)
template <class T>
void column_sum(T* acc, const T* y, std::int64_t n, std::int64_t d) {
  for_columns(d, n * d, [&](std::int64_t j0, std::int64_t j1) {
    WideRange<T> a(acc, j0, j1);
    std::int64_t i = 0;
    for (; i + 4 <= n; i += 4) {  // four rows a pass: a quarter of the loads and stores of acc
      const T *y0 = y + i * d, *y1 = y0 + d, *y2 = y1 + d, *y3 = y2 + d;
      for (std::int64_t j = j0; j < j1; ++j)
        a[j] += (widen(y0[j]) + widen(y1[j])) + (widen(y2[j]) + widen(y3[j]));
    }
    for (; i < n; ++i)
      for (std::int64_t j = j0; j < j1; ++j) a[j] += widen(y[i * d + j]);
    a.store();
  });
}

// In double; blocks of a fixed size summed in order, then the block sums in order: the
// same result for any number of threads.
template <class T>
double sum_squares(const T* x, std::int64_t n) {
  constexpr std::int64_t block = std::int64_t{1} << 14;
  const std::int64_t blocks = (n + block - 1) / block;
  std::vector<double> part(static_cast<std::size_t>(blocks));
  SEQPAR_OMP(parallel for schedule(static) if (n > parallel_min_elements))
  for (std::int64_t b = 0; b < blocks; ++b) {
    // eight sums a block, each over every eighth value, then added in order: one vector of
    // independent additions instead of a chain of dependent ones
    constexpr int lanes = 8;
    double lane[lanes] = {};
    const std::int64_t end = std::min(n, (b + 1) * block);
    std::int64_t i = b * block;
    for (; i + lanes <= end; i += lanes)
      for (int j = 0; j < lanes; ++j) {
        const auto v = static_cast<double>(widen(x[i + j]));
        lane[j] += v * v;
      }
    double s = 0;
    for (double l : lane) s += l;
    for (; i < end; ++i) s += static_cast<double>(widen(x[i])) * static_cast<double>(widen(x[i]));
    part[static_cast<std::size_t>(b)] = s;
  }
  double s = 0;
  for (double p : part) s += p;
  return s;
}

// acc[0] += the sum over the segments of weight.value[k] x the sum of squares of x over
// segment k
template <class T>
void sum_squares_accumulate(double* acc, const T* x, const kernels::Segments<double>& weight) {
  for (int k = 0; k < weight.count; ++k) {
    const std::int64_t b = weight.begin(k);
    acc[0] += weight.value[k] * sum_squares(x + b, weight.end[k] - b);
  }
}

}  // namespace seqpar::inline v0::detail::cpu

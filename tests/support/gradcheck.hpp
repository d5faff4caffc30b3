#pragma once
// Central finite differences for gradient checks in double precision.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>

namespace seqpar::test {

/// Numerical d f / d x[i] by central differences, restoring x[i].
inline double numeric_grad(double* x, std::int64_t i, const std::function<double()>& f,
                           double h = 1e-6) {
  const double saved = x[i];
  x[i] = saved + h;
  const double up = f();
  x[i] = saved - h;
  const double down = f();
  x[i] = saved;
  return (up - down) / (2 * h);
}

/// |a - b| relative to the larger magnitude, with an absolute floor.
inline double rel_err(double a, double b, double floor = 1e-7) {
  return std::abs(a - b) / std::max({std::abs(a), std::abs(b), floor});
}

}  // namespace seqpar::test

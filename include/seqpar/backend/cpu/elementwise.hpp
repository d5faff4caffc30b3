#pragma once
// Element- and row-wise ops on the CPU: biases, vector arithmetic, type conversion, GELU
// (the bodies of backend/kernels.hpp, eight lanes at a time for float and 16-bit storage
// where AVX2 is on) and whole-row moves. 16-bit values are computed in float and rounded
// once. Part of Ops<Cpu>.

#ifndef SEQPAR_BACKEND_CPU_OPS_INCLUDED
#error \
    "backend/cpu/elementwise.hpp is a part of Ops<Cpu>: include seqpar/backend/cpu/ops.hpp instead"
#endif

#include <algorithm>
#include <concepts>
#include <cstdint>

#include "seqpar/backend/cpu/loops.hpp"
#include "seqpar/backend/kernels.hpp"
#include "seqpar/core/omp.hpp"

namespace seqpar::inline v0::detail::cpu {

// y[n, d] += b[d]
template <class T>
void add_bias(T* y, const T* b, std::int64_t n, std::int64_t d) {
  SEQPAR_OMP(parallel for schedule(static))
  for (std::int64_t i = 0; i < n; ++i)
    for_lanes_here<T>(d, [&](auto lane, std::int64_t j) {
      using V = decltype(lane);
      T* yi = y + i * d;
      store_lanes(yi + j, load_lanes<V>(yi + j) + load_lanes<V>(b + j));
    });
}

// y[n, d] += b[d] + r[n, d]  (the bias of a row-parallel linear, added once after its reduction)
template <class T>
void add_bias_residual(T* y, const T* b, const T* r, std::int64_t n, std::int64_t d) {
  SEQPAR_OMP(parallel for schedule(static))
  for (std::int64_t i = 0; i < n; ++i)
    for_lanes_here<T>(d, [&](auto lane, std::int64_t j) {
      using V = decltype(lane);
      const std::int64_t at = i * d + j;
      store_lanes(y + at, load_lanes<V>(y + at) + (load_lanes<V>(b + j) + load_lanes<V>(r + at)));
    });
}

template <class T>
void gelu_forward(T* y, const T* x, std::int64_t n) {
  for_lanes<T>(n, [&](auto lane, std::int64_t i) {
    using V = decltype(lane);
    store_lanes(y + i, kernels::gelu(load_lanes<V>(x + i)));
  });
}

// dx[i] = dy[i] * gelu'(x[i]); dx may alias dy
template <class T>
void gelu_backward(T* dx, const T* dy, const T* x, std::int64_t n) {
  for_lanes<T>(n, [&](auto lane, std::int64_t i) {
    using V = decltype(lane);
    store_lanes(dx + i, load_lanes<V>(dy + i) * kernels::gelu_grad(load_lanes<V>(x + i)));
  });
}

// y[i] += x[i] (x may have another type: a 16-bit term added to a float sum)
template <class T, class U>
void add(T* y, const U* x, std::int64_t n) {
  if constexpr (simd_storage<T> == simd_storage<U>) {
    for_lanes<T>(n, [&](auto lane, std::int64_t i) {
      using V = decltype(lane);
      store_lanes(y + i, load_lanes<V>(y + i) + load_lanes<V>(x + i));
    });
  } else {
    SEQPAR_OMP(parallel for schedule(static) if (n > parallel_min_elements))
    for (std::int64_t i = 0; i < n; ++i)
      y[i] = narrow<T>(widen(y[i]) + static_cast<Wide<T>>(widen(x[i])));
  }
}

template <class T>
void scale(T* y, T s, std::int64_t n) {
  const Wide<T> f = widen(s);
  for_lanes<T>(n, [&](auto lane, std::int64_t i) {
    using V = decltype(lane);
    store_lanes(y + i, load_lanes<V>(y + i) * V(f));
  });
}

template <class T>
void copy(T* y, const T* x, std::int64_t n) {
  std::copy(x, x + n, y);
}

template <class T>
void fill(T* y, T v, std::int64_t n) {
  SEQPAR_OMP(parallel for schedule(static) if (n > parallel_min_elements))
  for (std::int64_t i = 0; i < n; ++i) y[i] = v;
}

// y[i] = x[i] converted to To (to 16-bit storage: rounded to nearest even)
template <class To, class From>
void convert(To* y, const From* x, std::int64_t n) {
  constexpr std::int64_t block = std::int64_t{1} << 14;
  SEQPAR_OMP(parallel for schedule(static) if (n > parallel_min_elements))
  for (std::int64_t i = 0; i < n; i += block) convert_n(y + i, x + i, std::min(block, n - i));
}

// dst[r, :] = src[index[r], :] for r < n
template <class T, std::integral Id>
void gather_rows(T* dst, const T* src, const Id* index, std::int64_t n, std::int64_t d) {
  for (std::int64_t r = 0; r < n; ++r)
    std::copy_n(src + static_cast<std::int64_t>(index[r]) * d, d, dst + r * d);
}

// dst[index[r], :] = src[r, :] for r < n (indices distinct)
template <class T, std::integral Id>
void scatter_rows(T* dst, const T* src, const Id* index, std::int64_t n, std::int64_t d) {
  for (std::int64_t r = 0; r < n; ++r)
    std::copy_n(src + r * d, d, dst + static_cast<std::int64_t>(index[r]) * d);
}

}  // namespace seqpar::inline v0::detail::cpu

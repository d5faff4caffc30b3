#pragma once
// The CPU's launchers: the loops that run the shared bodies of backend/kernels.hpp over
// elements, rows and columns (what a grid is to a CUDA kernel), and the eight-lane row
// primitives (max, sum of exps) the softmax rows use. Compiled for AVX2 + FMA, float loops
// run eight lanes at a time on F32x8 (simd_avx2.hpp), except under nvcc. 16-bit storage
// (bf16, fp16: Float16) is widened to float as it is read and rounded once as it is
// written (widen, narrow, convert_n): every op computes in float. Part of Ops<Cpu>.

#ifndef SEQPAR_BACKEND_CPU_OPS_INCLUDED
#error "backend/cpu/loops.hpp is a part of Ops<Cpu>: include seqpar/backend/cpu/ops.hpp instead"
#endif

#include "seqpar/core/x86_intrinsics.hpp"  // before Eigen, which reads <immintrin.h> too

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "seqpar/backend/device.hpp"
#include "seqpar/backend/kernels.hpp"
#include "seqpar/core/dtype.hpp"
#if defined(__AVX2__) && defined(__FMA__)
#define SEQPAR_CPU_AVX2 1
#else
#define SEQPAR_CPU_AVX2 0
#endif
// The eight-lane loops run the shared __host__ __device__ bodies on F32x8, a type nvcc does
// not accept in them: in translation units that nvcc compiles these loops stay scalar.
#if SEQPAR_CPU_AVX2 && !defined(__CUDACC__)
#include "seqpar/backend/cpu/simd_avx2.hpp"
#include "seqpar/core/omp.hpp"
#define SEQPAR_CPU_SIMD 1
#else
#define SEQPAR_CPU_SIMD 0
#endif

namespace seqpar::inline v0::detail {

template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using MatMap = Eigen::Map<RowMat<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T>
using ConstMatMap = Eigen::Map<const RowMat<T>, Eigen::Unaligned, Eigen::OuterStride<>>;

namespace cpu {

/// Element-wise loops shorter than this run on one thread.
inline constexpr std::int64_t parallel_min_elements = std::int64_t{1} << 16;

// body(j0, j1) over a split of the columns [0, d) into one contiguous range per thread
// (whole cache lines), in parallel when the work (elements touched) is worth it. A sum
// down a column stays on one thread, in row order: the results do not depend on the
// number of threads.
template <class Body>
void for_columns(std::int64_t d, [[maybe_unused]] std::int64_t work, Body&& body) {
  SEQPAR_OMP(parallel if (work > parallel_min_elements))
  {
    int threads = 1, me = 0;
#ifdef _OPENMP
    threads = omp_get_num_threads();
    me = omp_get_thread_num();
#endif
    const std::int64_t lines = (d + 15) / 16;  // 16 floats to a cache line
    const std::int64_t j0 = std::min(d, lines * me / threads * 16),
                       j1 = std::min(d, lines * (me + 1) / threads * 16);
    if (j0 < j1) body(j0, j1);
  }
}

// ---- 16-bit storage: read as float, written rounded once

/// The CPU's 16-bit storage types (bf16 or fp16 bits).
template <class T>
concept Half = is_float16<T>;

/// The type values of storage type T are computed in: float for 16-bit storage.
template <class T>
using Wide = WideType<T>;

// Whether F32x8 loads and stores elements of type T.
template <class T>
inline constexpr bool simd_storage = SEQPAR_CPU_SIMD && (std::is_same_v<T, float> || Half<T>);

// dst[0, n) = src[0, n) as To (a 16-bit type rounded to nearest even), on the calling thread;
// eight at a time between float and 16-bit storage where AVX2 is on.
template <class To, class From>
void convert_n(To* dst, const From* src, std::int64_t n) {
  std::int64_t i = 0;
#if SEQPAR_CPU_SIMD
  if constexpr (simd_storage<To> && simd_storage<From> && !std::is_same_v<To, From>) {
    for (; i + F32x8::lanes <= n; i += F32x8::lanes) F32x8::load(src + i).store(dst + i);
  }
#endif
  for (; i < n; ++i) {
    if constexpr (std::is_same_v<To, From>)
      dst[i] = src[i];
    else if constexpr (Half<To> && Half<From>)
      dst[i] = To(src[i].to_float());
    else if constexpr (Half<From>)
      dst[i] = static_cast<To>(src[i].to_float());
    else
      dst[i] = static_cast<To>(src[i]);
  }
}

// body(lane, i) for i in [0, n): lane is a detail::F32x8 on blocks of eight elements where
// AVX2 is on (float or 16-bit storage), a Wide<T> for the rest (and for every element of
// other types); in parallel above parallel_min_elements.
template <class T, class Body>
void for_lanes(std::int64_t n, Body&& body) {
  std::int64_t done = 0;
#if SEQPAR_CPU_SIMD
  if constexpr (simd_storage<T>) {
    done = n / F32x8::lanes * F32x8::lanes;
    SEQPAR_OMP(parallel for schedule(static) if (done > parallel_min_elements))
    for (std::int64_t i = 0; i < done; i += F32x8::lanes) body(F32x8{}, i);
  }
#endif
  SEQPAR_OMP(parallel for schedule(static) if (n - done > parallel_min_elements))
  for (std::int64_t i = done; i < n; ++i) body(Wide<T>{}, i);
}
// for_lanes on the calling thread: the elements of one row inside a loop over rows.
template <class T, class Body>
void for_lanes_here(std::int64_t n, Body&& body) {
  std::int64_t i = 0;
#if SEQPAR_CPU_SIMD
  if constexpr (simd_storage<T>)
    for (; i + F32x8::lanes <= n; i += F32x8::lanes) body(F32x8{}, i);
#endif
  for (; i < n; ++i) body(Wide<T>{}, i);
}

// acc[j0, j1) to sum into as Wide<T> values: acc itself, or for 16-bit storage a float copy
// that store() rounds back once (a column sum of many rows rounded once, not a row at a time).
template <class T>
class WideRange {
 public:
  WideRange(T* acc, std::int64_t j0, std::int64_t j1) : acc_(acc), j0_(j0), j1_(j1) {
    if constexpr (Half<T>) {
      wide_.resize(static_cast<std::size_t>(j1 - j0));
      convert_n(wide_.data(), acc + j0, j1 - j0);
    }
  }
  Wide<T>& operator[](std::int64_t j) {
    if constexpr (Half<T>)
      return wide_[static_cast<std::size_t>(j - j0_)];
    else
      return acc_[j];
  }
  void store() {
    if constexpr (Half<T>) convert_n(acc_ + j0_, wide_.data(), j1_ - j0_);
  }

 private:
  T* acc_;
  std::int64_t j0_, j1_;
  std::vector<Wide<T>> wide_;  // 16-bit T only
};

// Row x[0, n) as Wide<T> values: x itself, or for 16-bit storage widened into `wide`
// (n elements, the calling thread's).
template <class T, class S = std::remove_const_t<T>>
auto* widened_row(std::vector<Wide<S>>& wide, T* x, std::int64_t n) {
  if constexpr (Half<S>) {
    convert_n(wide.data(), x, n);
    return static_cast<std::conditional_t<std::is_const_v<T>, const Wide<S>, Wide<S>>*>(
        wide.data());
  } else {
    (void)wide, (void)n;
    return x;
  }
}

// A lane of V from p: eight elements, or one widened.
template <class V, class T>
V load_lanes(const T* p) {
  if constexpr (std::is_same_v<V, T>)
    return *p;
  else if constexpr (std::is_arithmetic_v<V>)
    return static_cast<V>(widen(*p));
  else
    return V::load(p);
}
// A lane of V into p: eight elements, or one narrowed to T.
template <class V, class T>
void store_lanes(T* p, V v) {
  if constexpr (std::is_same_v<V, T>)
    *p = v;
  else if constexpr (std::is_arithmetic_v<V>)
    *p = narrow<T>(static_cast<Wide<T>>(v));
  else
    v.store(p);
}

// max of x[0, n), -inf when n == 0
template <class T>
T row_max(const T* x, std::int64_t n) {
  T m = -std::numeric_limits<T>::infinity();
  std::int64_t j = 0;
#if SEQPAR_CPU_SIMD
  if constexpr (std::is_same_v<T, float>) {
    F32x8 acc(m);
    for (; j + F32x8::lanes <= n; j += F32x8::lanes) acc = max(acc, F32x8::load(x + j));
    m = acc.max();
  }
#endif
  for (; j < n; ++j) m = std::max(m, x[j]);
  return m;
}

// y[j] = exp(x[j] - shift) * scale for j < n (y may be x; null: not stored); returns the
// sum of exp(x[j] - shift)
template <class T>
T exp_shifted(T* y, const T* x, std::int64_t n, T shift, T scale) {
  using kernels::exp_of;
  T sum = 0;
  std::int64_t j = 0;
#if SEQPAR_CPU_SIMD
  if constexpr (std::is_same_v<T, float>) {
    F32x8 acc(0.0f);
    for (; j + F32x8::lanes <= n; j += F32x8::lanes) {
      const F32x8 e = exp_of(F32x8::load(x + j) - F32x8(shift));
      acc += e;
      if (y) (e * F32x8(scale)).store(y + j);
    }
    sum = acc.sum();
  }
#endif
  for (; j < n; ++j) {
    const T e = exp_of(x[j] - shift);
    sum += e;
    if (y) y[j] = e * scale;
  }
  return sum;
}

}  // namespace cpu
}  // namespace seqpar::inline v0::detail

#pragma once
// host_adamw: AdamW in host memory for offloaded optimizer state, running kernels::adamw with
// explicit fmas so that an offloaded step has the bits of a step on the device.

#include <algorithm>
#include <cstdint>
#include <type_traits>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "seqpar/backend/kernels.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/omp.hpp"

// x86-64 under GCC or Clang, and not nvcc's device pass (which never runs host code).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDA_ARCH__)
#define SEQPAR_HOST_ADAMW_X86 1
#include "seqpar/core/x86_intrinsics.hpp"
#else
#define SEQPAR_HOST_ADAMW_X86 0
#endif

namespace seqpar::inline v0 {

/// The instruction set a host AdamW runs on.
enum class HostIsa : std::uint8_t { scalar, avx2, avx512 };

inline const char* isa_name(HostIsa isa) {
  constexpr const char* names[] = {"scalar", "avx2", "avx512"};
  return names[static_cast<int>(isa)];
}

/// Whether this CPU (and this build) can run the path `isa`.
inline bool host_isa_available(HostIsa isa) {
#if SEQPAR_HOST_ADAMW_X86
  switch (isa) {
    case HostIsa::avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case HostIsa::avx512: return __builtin_cpu_supports("avx512f");
    default: return true;
  }
#else
  return isa == HostIsa::scalar;
#endif
}

/// The widest path this CPU runs.
inline HostIsa host_isa_best() {
  static const HostIsa best = host_isa_available(HostIsa::avx512) ? HostIsa::avx512
                              : host_isa_available(HostIsa::avx2) ? HostIsa::avx2
                                                                  : HostIsa::scalar;
  return best;
}

namespace detail::host_adam {

// Elements a thread takes at once: 4096 floats (16 KiB of each of the four arrays), a
// multiple of every path's lane count, so blocks start on whole cache lines.
inline constexpr std::int64_t block = 4096;

// body(i0, i1) over [0, n) in blocks, on up to `threads` threads (0: OpenMP's default).
template <class Body>
void for_blocks(std::int64_t n, int threads, Body&& body) {
  const std::int64_t blocks = (n + block - 1) / block;
#ifdef _OPENMP
  const int t = threads > 0 ? threads : omp_get_max_threads();
SEQPAR_OMP(parallel for schedule(static) num_threads(t) if (t > 1 && blocks > 1))
#else
  (void)threads;
#endif
for (std::int64_t b = 0; b < blocks; ++b) body(b * block, std::min(n, (b + 1) * block));
}

// One element of the scalar path (and the tails of the vector ones). Scaled: the gradient
// is multiplied by f first, as adamw_mixed does.
template <bool Scaled, class M>
inline void element(M* p, const M* g, M* m, M* v, std::int64_t i, const kernels::AdamCoeffs& c,
                    bool decay, M f) {
  kernels::adamw(p[i], Scaled ? kernels::mul_of(g[i], f) : g[i], m[i], v[i], c, decay);
}

template <bool Scaled, class M>
void run_scalar(M* p, const M* g, M* m, M* v, std::int64_t i0, std::int64_t i1,
                const kernels::AdamCoeffs& c, bool decay, M f) {
  for (std::int64_t i = i0; i < i1; ++i) element<Scaled>(p, g, m, v, i, c, decay, f);
}

#if SEQPAR_HOST_ADAMW_X86
// The lane types pass __m256 / __m512 by value into the body's instantiation, which GCC
// notes as an ABI change for callers without AVX (a note GCC prints at kernels::adamw
// whatever the pragmas here); every such call is inlined into the loops below, compiled
// for the target. GCC 12 also sees _mm512_sqrt_ps's deliberately undefined pass-through
// operand as maybe uninitialised.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// The lane types: what kernels::adamw needs of a number (conversion from float, + - * /,
// fma_of, sqrt_of, and mul_of for the gradient's factor), each operation the one IEEE instruction,
// so that every lane rounds as the scalar path does. Every member carries its target: `flatten` on
// the loops below then inlines the body and these into code compiled for that target.
#define SEQPAR_AVX2 __attribute__((target("avx2,fma"))) inline
struct Avx2Lanes {
  static constexpr int lanes = 8;
  __m256 x;
  SEQPAR_AVX2 Avx2Lanes(__m256 v) : x(v) {}
  SEQPAR_AVX2 Avx2Lanes(float v) : x(_mm256_set1_ps(v)) {}  // NOLINT: T(0.5) in the body
  SEQPAR_AVX2 friend Avx2Lanes operator+(Avx2Lanes a, Avx2Lanes b) {
    return _mm256_add_ps(a.x, b.x);
  }
  SEQPAR_AVX2 friend Avx2Lanes operator-(Avx2Lanes a, Avx2Lanes b) {
    return _mm256_sub_ps(a.x, b.x);
  }
  SEQPAR_AVX2 friend Avx2Lanes operator*(Avx2Lanes a, Avx2Lanes b) {
    return _mm256_mul_ps(a.x, b.x);
  }
  SEQPAR_AVX2 friend Avx2Lanes operator/(Avx2Lanes a, Avx2Lanes b) {
    return _mm256_div_ps(a.x, b.x);
  }
  SEQPAR_AVX2 friend Avx2Lanes fma_of(Avx2Lanes a, Avx2Lanes b, Avx2Lanes c) {
    return _mm256_fmadd_ps(a.x, b.x, c.x);
  }
  SEQPAR_AVX2 friend Avx2Lanes sqrt_of(Avx2Lanes a) { return _mm256_sqrt_ps(a.x); }
  // kernels::mul_of's product: rounded on its own, never contracted into a later sum.
  SEQPAR_AVX2 friend Avx2Lanes mul_of(Avx2Lanes a, Avx2Lanes b) {
    __m256 p = _mm256_mul_ps(a.x, b.x);
    asm("" : "+x"(p));
    return p;
  }
};
#undef SEQPAR_AVX2

#define SEQPAR_AVX512 __attribute__((target("avx512f"))) inline
struct Avx512Lanes {
  static constexpr int lanes = 16;
  __m512 x;
  SEQPAR_AVX512 Avx512Lanes(__m512 v) : x(v) {}
  SEQPAR_AVX512 Avx512Lanes(float v) : x(_mm512_set1_ps(v)) {}  // NOLINT: T(0.5) in the body
  SEQPAR_AVX512 friend Avx512Lanes operator+(Avx512Lanes a, Avx512Lanes b) {
    return _mm512_add_ps(a.x, b.x);
  }
  SEQPAR_AVX512 friend Avx512Lanes operator-(Avx512Lanes a, Avx512Lanes b) {
    return _mm512_sub_ps(a.x, b.x);
  }
  SEQPAR_AVX512 friend Avx512Lanes operator*(Avx512Lanes a, Avx512Lanes b) {
    return _mm512_mul_ps(a.x, b.x);
  }
  SEQPAR_AVX512 friend Avx512Lanes operator/(Avx512Lanes a, Avx512Lanes b) {
    return _mm512_div_ps(a.x, b.x);
  }
  SEQPAR_AVX512 friend Avx512Lanes fma_of(Avx512Lanes a, Avx512Lanes b, Avx512Lanes c) {
    return _mm512_fmadd_ps(a.x, b.x, c.x);
  }
  SEQPAR_AVX512 friend Avx512Lanes sqrt_of(Avx512Lanes a) { return _mm512_sqrt_ps(a.x); }
  SEQPAR_AVX512 friend Avx512Lanes mul_of(Avx512Lanes a, Avx512Lanes b) {
    __m512 p = _mm512_mul_ps(a.x, b.x);
    asm("" : "+v"(p));
    return p;
  }
};
#undef SEQPAR_AVX512

__attribute__((target("avx2,fma"), flatten)) inline void run_avx2(
    float* p, const float* g, float* m, float* v, std::int64_t i0, std::int64_t i1,
    const kernels::AdamCoeffs& c, bool decay, float f, bool scaled) {
  using L = Avx2Lanes;
  std::int64_t i = i0;
  for (; i + L::lanes <= i1; i += L::lanes) {
    L pv = _mm256_loadu_ps(p + i), mv = _mm256_loadu_ps(m + i), vv = _mm256_loadu_ps(v + i);
    L gv = _mm256_loadu_ps(g + i);
    if (scaled) gv = mul_of(gv, L(f));
    kernels::adamw(pv, gv, mv, vv, c, decay);
    _mm256_storeu_ps(p + i, pv.x);
    _mm256_storeu_ps(m + i, mv.x);
    _mm256_storeu_ps(v + i, vv.x);
  }
  for (; i < i1; ++i)
    scaled ? element<true>(p, g, m, v, i, c, decay, f) : element<false>(p, g, m, v, i, c, decay, f);
}

__attribute__((target("avx512f"), flatten)) inline void run_avx512(
    float* p, const float* g, float* m, float* v, std::int64_t i0, std::int64_t i1,
    const kernels::AdamCoeffs& c, bool decay, float f, bool scaled) {
  using L = Avx512Lanes;
  std::int64_t i = i0;
  for (; i + L::lanes <= i1; i += L::lanes) {
    L pv = _mm512_loadu_ps(p + i), mv = _mm512_loadu_ps(m + i), vv = _mm512_loadu_ps(v + i);
    L gv = _mm512_loadu_ps(g + i);
    if (scaled) gv = mul_of(gv, L(f));
    kernels::adamw(pv, gv, mv, vv, c, decay);
    _mm512_storeu_ps(p + i, pv.x);
    _mm512_storeu_ps(m + i, mv.x);
    _mm512_storeu_ps(v + i, vv.x);
  }
  for (; i < i1; ++i)
    scaled ? element<true>(p, g, m, v, i, c, decay, f) : element<false>(p, g, m, v, i, c, decay, f);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif  // SEQPAR_HOST_ADAMW_X86

}  // namespace detail::host_adam

/// AdamW on the host over decay.size() elements of weights p (float or double: the master
/// weights), gradients g, moments m and v, each segment of `decay` with its flag. The
/// gradients are multiplied by grad_factor first when it is not 1 (the inverse loss scale
/// and the clipping coefficient of a mixed-precision step). `isa` picks the path (it must
/// be available: host_isa_available), `threads` the OpenMP threads (0: OpenMP's default).
/// The result is the same bits on every path and any number of threads.
template <class M>
void host_adamw(M* p, const M* g, M* m, M* v, const kernels::Segments<bool>& decay,
                const kernels::AdamCoeffs& c, M grad_factor = M(1), HostIsa isa = host_isa_best(),
                int threads = 0) {
  static_assert(std::is_floating_point_v<M>, "host_adamw: master weights are float or double");
  SEQPAR_CHECK(host_isa_available(isa), "host_adamw: this CPU has no ", isa_name(isa),
               " (host_isa_best() says what it has)");
  if constexpr (!std::is_same_v<M, float>) isa = HostIsa::scalar;  // the lanes are of float
  const bool scaled = grad_factor != M(1);
  for (int k = 0; k < decay.count; ++k) {
    const std::int64_t b = decay.begin(k);
    M *pk = p + b, *mk = m + b, *vk = v + b;
    const M* gk = g + b;
    const bool dk = decay.value[k];
    detail::host_adam::for_blocks(decay.end[k] - b, threads, [&](std::int64_t i0, std::int64_t i1) {
#if SEQPAR_HOST_ADAMW_X86
      if constexpr (std::is_same_v<M, float>) {
        if (isa == HostIsa::avx512)
          return detail::host_adam::run_avx512(pk, gk, mk, vk, i0, i1, c, dk, grad_factor, scaled);
        if (isa == HostIsa::avx2)
          return detail::host_adam::run_avx2(pk, gk, mk, vk, i0, i1, c, dk, grad_factor, scaled);
      }
#endif
      if (scaled)
        detail::host_adam::run_scalar<true>(pk, gk, mk, vk, i0, i1, c, dk, grad_factor);
      else
        detail::host_adam::run_scalar<false>(pk, gk, mk, vk, i0, i1, c, dk, grad_factor);
    });
  }
}

}  // namespace seqpar::inline v0

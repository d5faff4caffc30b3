#pragma once
// <immintrin.h>, for seqpar's vector code and Eigen's, read once with two of GCC 12's
// warnings off inside it: its AVX-512 "undefined" values (`__m512 __Y = __Y;` in
// _mm512_undefined_ps and _pd) are reported as "'__Y' is used uninitialized" wherever Eigen's
// AVX-512 kernels are inlined (GCC bug 105593, fixed in GCC 13), flooding any -Wall build on
// a machine with AVX-512. A warning's state is that of the line it points at, the
// intrinsics header's own, so this holds where it is read first; every seqpar header that
// needs the intrinsics, and the CPU backend before Eigen, includes it through here. Nothing
// in nvcc's device pass.

#if (defined(__x86_64__) || defined(__i386__)) && !defined(__CUDA_ARCH__)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

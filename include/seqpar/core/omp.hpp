#pragma once
// seqpar/core/omp.hpp: OpenMP directives that vanish in a build without OpenMP, and loop
// unrolling that vanishes where the compiler does not know it.
//
//   SEQPAR_OMP(parallel for schedule(static) if (n > 4096))
//   for (std::int64_t i = 0; i < n; ++i) ...
//
// is `#pragma omp parallel for schedule(static) if (n > 4096)` when the compiler has OpenMP
// on (-fopenmp: _OPENMP defined) and nothing otherwise, so that a user's -Wall build without
// OpenMP gets no -Wunknown-pragmas warning from seqpar's headers. The loops are written to be
// correct either way (each iteration independent, or the directive's clauses say otherwise).
//
// SEQPAR_UNROLL(n) before a loop asks GCC (and Clang, which takes its spelling) to unroll it
// n times (n an integer constant expression): a GEMM tile's sums held in an array stay in registers
// only then at -O2. nvcc's front end (the host code of .cu files) does not know the spelling, so it
// vanishes there.

#define SEQPAR_DETAIL_PRAGMA(...) _Pragma(#__VA_ARGS__)
#if defined(_OPENMP)
#define SEQPAR_OMP(...) SEQPAR_DETAIL_PRAGMA(omp __VA_ARGS__)
#else
#define SEQPAR_OMP(...)
#endif
#if defined(__GNUC__) && !defined(__CUDACC__)
#define SEQPAR_UNROLL(n) SEQPAR_DETAIL_PRAGMA(GCC unroll n)
#else
#define SEQPAR_UNROLL(n)
#endif

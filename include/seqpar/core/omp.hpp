#pragma once
// SEQPAR_OMP and SEQPAR_UNROLL: OpenMP and unroll directives that vanish where the compiler
// lacks them, so a user's -Wall build gets no unknown-pragma warning from seqpar.

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

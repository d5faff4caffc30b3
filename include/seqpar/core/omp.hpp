#pragma once
// seqpar/core/omp.hpp: OpenMP directives that vanish in a build without OpenMP.
//
//   SEQPAR_OMP(parallel for schedule(static) if (n > 4096))
//   for (std::int64_t i = 0; i < n; ++i) ...
//
// is `#pragma omp parallel for schedule(static) if (n > 4096)` when the compiler has OpenMP
// on (-fopenmp: _OPENMP defined) and nothing otherwise, so that a user's -Wall build without
// OpenMP gets no -Wunknown-pragmas warning from seqpar's headers. The loops are written to be
// correct either way (each iteration independent, or the directive's clauses say otherwise).

#if defined(_OPENMP)
#define SEQPAR_DETAIL_PRAGMA(...) _Pragma(#__VA_ARGS__)
#define SEQPAR_OMP(...) SEQPAR_DETAIL_PRAGMA(omp __VA_ARGS__)
#else
#define SEQPAR_OMP(...)
#endif

#pragma once
// SEQPAR_OMP and SEQPAR_UNROLL: OpenMP and unroll directives that vanish where the compiler
// lacks them, so a user's -Wall build gets no unknown-pragma warning from seqpar; and
// RowBlocks, the row blocks the CPU GEMMs share among their threads.

#include <algorithm>
#include <cstdint>

#ifdef _OPENMP
#include <omp.h>
#endif

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

namespace seqpar::inline v0::detail {

/// The row blocks of a product of `rows` rows: at most `most` rows each, whole register tiles
/// of `tile` rows but the last, as even as the tiles allow and, when the product is shared
/// among threads, a multiple of their number, so that no thread waits long for another at
/// the barrier after each block of K (512 rows, tiles of 12, blocks of 96 on two threads: six
/// blocks of 84 or 96 rows, not five of 96 and one of 32).
struct RowBlocks {
  std::int64_t rows, tile, tiles, count;
  RowBlocks(std::int64_t m, std::int64_t tile_rows, std::int64_t most, bool parallel)
      : rows(m), tile(tile_rows), tiles((m + tile_rows - 1) / tile_rows) {
    count = (tiles * tile + most - 1) / most;
#ifdef _OPENMP
    if (parallel) {
      const std::int64_t t = omp_get_max_threads();
      count = std::min(tiles, (count + t - 1) / t * t);
    }
#else
    (void)parallel;
#endif
  }
  /// The first row of block b (b = count: rows).
  std::int64_t begin(std::int64_t b) const { return std::min(rows, b * tiles / count * tile); }
};

}  // namespace seqpar::inline v0::detail

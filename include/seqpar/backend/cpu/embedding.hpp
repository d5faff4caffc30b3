#pragma once
// Embedding lookup and its backward on the CPU, for a table that holds the rows
// [row0, row0 + rows) of a vocabulary (a vocab-split shard): other ids give zero rows and
// no gradient. The backward adds in token order (reproducible; the CUDA kernel gives the
// same bits for float). Part of Ops<Cpu>.

#ifndef SEQPAR_BACKEND_CPU_OPS_INCLUDED
#error "backend/cpu/embedding.hpp is a part of Ops<Cpu>: include seqpar/backend/cpu/ops.hpp instead"
#endif

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "seqpar/backend/cpu/loops.hpp"
#include "seqpar/backend/kernels.hpp"

namespace seqpar::inline v0::detail::cpu {

// y[n, d] = table[ids[n] - row0, :] for ids inside [row0, row0 + rows), else 0
template <class T, class Id>
void embedding_forward(T* y, const Id* ids, const T* table, std::int64_t n, std::int64_t d,
                       std::int64_t row0, std::int64_t rows) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t r = kernels::local_index(ids[i], row0, rows);
    T* yi = y + i * d;
    if (r >= 0)
      std::copy(table + r * d, table + (r + 1) * d, yi);
    else
      std::fill(yi, yi + d, T{});
  }
}

// dtable[ids[n] - row0, :] += dy[n, :], the tokens of a row added in token order: one sum
// per row (in float for 16-bit storage), the row rounded once.
template <class T, class Id>
void embedding_backward(T* dtable, const Id* ids, const T* dy, std::int64_t n, std::int64_t d,
                        std::int64_t row0, std::int64_t rows) {
  // (local row, token) of every token in the shard, by row, tokens in order
  std::vector<std::pair<std::int64_t, std::int64_t>> hits;
  for (std::int64_t i = 0; i < n; ++i)
    if (const std::int64_t r = kernels::local_index(ids[i], row0, rows); r >= 0)
      hits.emplace_back(r, i);
  std::sort(hits.begin(), hits.end());
  for_columns(d, n * d, [&](std::int64_t j0, std::int64_t j1) {
    for (std::size_t h = 0; h < hits.size();) {
      const std::int64_t r = hits[h].first;
      WideRange<T> acc(dtable + r * d, j0, j1);
      for (; h < hits.size() && hits[h].first == r; ++h) {
        const T* g = dy + hits[h].second * d;
        for (std::int64_t j = j0; j < j1; ++j) acc[j] += widen(g[j]);
      }
      acc.store();
    }
  });
}

}  // namespace seqpar::inline v0::detail::cpu

#pragma once
// Loading and saving BLOOM weights by their Hugging Face names, for any tensor split:
// each rank reads just its block of each tensor. Accepts names with or without the
// "transformer." prefix; a missing word_embeddings.weight falls back to lm_head.weight
// (the two are tied).

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/io/tensor_source.hpp"
#include "seqpar/config/units.hpp"

namespace seqpar::inline v0 {

/// Looks a tensor up by its file name; nullptr when absent.
using TensorLookup = std::function<const TensorEntry*(std::string_view)>;

/// Finds the file entry of parameter `name` (a table name), trying the prefixed name
/// first. Throws naming `file` and the tensor when it is missing.
inline const TensorEntry& find_bloom_tensor(const TensorLookup& lookup, const std::string& name,
                                            const std::string& file) {
  if (const auto* e = lookup("transformer." + name)) return *e;
  if (const auto* e = lookup(name)) return *e;
  if (name == "word_embeddings.weight")
    if (const auto* e = lookup("lm_head.weight")) return *e;
  detail::fail(file, ": tensor 'transformer.", name, "' (or '", name, "') is missing");
}

/// Copies this rank's block of parameter `p` from its file entry into dst[p.numel()]. The
/// file holds p.real_rows rows (the vocabulary for the embedding; the padding stays 0).
template <class T>
void load_param_block(const TensorEntry& e, const ParamSpec& p, T* dst) {
  const std::int64_t real_rows = p.real_rows;
  const std::vector<std::int64_t> want =
      p.vector ? std::vector<std::int64_t>{real_rows} : std::vector<std::int64_t>{real_rows, p.cols};
  SEQPAR_CHECK(e.shape == want, e.file, ": tensor '", e.name, "' has shape ", detail::shape_string(e.shape),
               "; expected ", detail::shape_string(want));
  const std::int64_t rows = std::clamp<std::int64_t>(real_rows - p.row0, 0, p.local_rows);
  std::fill(dst, dst + p.numel(), T(0));
  if (rows == 0) return;
  TensorEntry block = e;
  const std::int64_t first = p.row0 * e.strides[0] + (p.vector ? 0 : p.col0 * e.strides[1]);
  block.bytes = e.bytes.subspan(static_cast<std::size_t>(first) * dtype_size(e.dtype));
  block.shape = p.vector ? std::vector<std::int64_t>{rows} : std::vector<std::int64_t>{rows, p.local_cols};
  read_tensor<T>(block, std::span<T>(dst, static_cast<std::size_t>(rows * p.local_cols)));
}

}  // namespace seqpar::inline v0

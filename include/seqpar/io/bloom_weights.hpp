#pragma once
// Loading BLOOM weights by their Hugging Face names, for any tensor split: each rank reads
// just its block of each tensor. Accepts names with or without the "transformer." prefix;
// a missing word_embeddings.weight falls back to lm_head.weight (the two are tied).
// BloomWeightsFile is the one way a weights file is opened: checked against the model
// from its header before anything is read.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/config/units.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/io/tensor_file.hpp"
#include "seqpar/io/tensor_source.hpp"

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

/// Checks a weights file against model M from its header alone, before anything is
/// allocated or read: every parameter is there with M's shape, and the file holds no
/// tensor M does not have (a seqpar checkpoint's AdamW moments of M's tensors count as M's; a file
/// for another model would otherwise load in part, silently). `names` are all the file's tensor
/// names. Throws naming `file` and the tensors at fault.
template <BloomModel M>
void check_bloom_weights(const std::vector<std::string>& names, const TensorLookup& lookup,
                         const std::string& file) {
  std::vector<std::string> known{"lm_head.weight"};
  for (const auto& u : bloom_units<M>(1, 0))
    for (const auto& p : u.params) {
      known.push_back(p.name);
      const std::vector<std::int64_t> want = p.file_shape();
      const TensorEntry& e = find_bloom_tensor(lookup, p.name, file);
      SEQPAR_CHECK(e.shape == want, file, ": tensor '", e.name, "' has shape ",
                   detail::shape_string(e.shape), "; this model (vocab ", M::vocab_size,
                   ", hidden ", M::hidden, ", ", M::layers, " layers) expects ",
                   detail::shape_string(want));
    }
  std::sort(known.begin(), known.end());
  std::vector<std::string> unknown;
  for (const auto& n : names) {
    // seqpar's checkpoints add the AdamW moments of each weight under these prefixes.
    std::string_view bare = n;
    for (const std::string_view prefix : {"optimizer.m.", "optimizer.v.", "transformer."})
      if (bare.starts_with(prefix)) bare.remove_prefix(prefix.size());
    if (!std::binary_search(known.begin(), known.end(), bare)) unknown.push_back(n);
  }
  if (unknown.empty()) return;
  std::string list;
  for (std::size_t i = 0; i < unknown.size() && i < 8; ++i)
    list += (i ? ", '" : "'") + unknown[i] + "'";
  if (unknown.size() > 8) list += ", ... (" + std::to_string(unknown.size() - 8) + " more)";
  detail::fail(file, ": ", unknown.size(), " tensor(s) that this model (vocab ", M::vocab_size,
               ", hidden ", M::hidden, ", ", M::layers, " layers) does not have: ", list,
               "; expected the weights of this model and nothing else");
}

/// Copies this rank's block of parameter `p` from its file entry into dst[p.numel()]. The
/// file holds p.real_rows rows (the vocabulary for the embedding; the padding stays 0).
template <class T>
void load_param_block(const TensorEntry& e, const ParamSpec& p, T* dst) {
  const std::vector<std::int64_t> want = p.file_shape();
  SEQPAR_CHECK(e.shape == want, e.file, ": tensor '", e.name, "' has shape ",
               detail::shape_string(e.shape), "; expected ", detail::shape_string(want));
  const std::int64_t rows = p.local_real_rows();
  std::fill(dst, dst + p.numel(), T(0));
  if (rows == 0) return;
  TensorEntry block = e;
  const std::int64_t first = p.row0 * e.strides[0] + (p.vector ? 0 : p.col0 * e.strides[1]);
  block.bytes = e.bytes.subspan(static_cast<std::size_t>(first) * dtype_size(e.dtype));
  block.shape =
      p.vector ? std::vector<std::int64_t>{rows} : std::vector<std::int64_t>{rows, p.local_cols};
  read_tensor<T>(block, std::span<T>(dst, static_cast<std::size_t>(rows * p.local_cols)));
  // A NaN or an infinity in the weights poisons every step after it: refuse it here, where
  // every load of weights or a checkpoint passes.
  const T* bad = std::find_if(dst, dst + rows * p.local_cols,
                              [](T x) { return !std::isfinite(static_cast<double>(x)); });
  SEQPAR_CHECK(
      bad == dst + rows * p.local_cols, e.file, ": tensor '", e.name, "' holds ",
      std::isnan(static_cast<double>(*bad)) ? "nan" : std::to_string(static_cast<double>(*bad)),
      " (row ", p.row0 + (bad - dst) / p.local_cols, ", column ",
      p.col0 + (bad - dst) % p.local_cols, "); expected finite values");
}

/// A weights file (safetensors or pytorch_model.bin) of model M, opened and checked by
/// check_bloom_weights from its header alone, before anything is allocated or read.
template <BloomModel M>
class BloomWeightsFile {
 public:
  explicit BloomWeightsFile(const std::filesystem::path& path) : name_(path.string()), file_(path) {
    check_bloom_weights<M>(file_.names(), lookup(), name_);
  }
  BloomWeightsFile(const BloomWeightsFile&) = delete;
  BloomWeightsFile& operator=(const BloomWeightsFile&) = delete;

  /// The file's name in messages.
  const std::string& name() const { return name_; }
  /// Finds a tensor by its name in the file (valid while this object lives).
  TensorLookup lookup() const {
    return [this](std::string_view n) { return file_.find(n); };
  }
  /// This rank's block of parameter p into dst[p.numel()] (load_param_block).
  template <class T>
  void read(const ParamSpec& p, T* dst) const {
    load_param_block(find_bloom_tensor(lookup(), p.name, name_), p, dst);
  }

 private:
  std::string name_;
  TensorFile file_;
};

}  // namespace seqpar::inline v0

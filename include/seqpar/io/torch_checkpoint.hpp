#pragma once
// TorchCheckpoint: the tensors of a torch.save zip checkpoint (pytorch_model.bin),
// read without libtorch and viewed in place in a read-only memory mapping.
// Definitions: io/impl/torch_checkpoint.hpp (core/separate_compilation.hpp).

#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/core/separate_compilation.hpp"
#include "seqpar/io/detail/mapped_file.hpp"
#include "seqpar/io/tensor_source.hpp"

namespace seqpar::inline v0 {

namespace detail {

/// The tensors of a torch.save archive, in the pickle's order, and their index by name.
struct TorchIndex {
  std::vector<TensorEntry> entries;
  std::map<std::string, std::size_t, std::less<>> by_name;
};

/// Builds the entries of the tensors in a torch.save archive held in `bytes`. The
/// spans of the entries point into `bytes`. Throws seqpar::Error naming `file`.
SEQPAR_DECL TorchIndex index_torch_checkpoint(std::span<const std::byte> bytes,
                                              const std::string& file);

}  // namespace detail

/// A torch.save zip checkpoint holding a dict of tensors (a state dict), memory-mapped.
/// Tensors of the top-level dict keep their keys; tensors of a dict nested one level
/// down (a checkpoint {"model": state_dict, ...}) are named "model.<key>". Tensors
/// sharing a storage (tied weights) share bytes.
class TorchCheckpoint {
 public:
  explicit TorchCheckpoint(const std::filesystem::path& path) : path_(path), file_(path) {
    index_ = detail::index_torch_checkpoint(file_.bytes(), path_.string());
  }

  const std::filesystem::path& path() const { return path_; }

  /// The tensor named `name`, or nullptr when absent.
  const TensorEntry* find(std::string_view name) const {
    auto it = index_.by_name.find(name);
    return it == index_.by_name.end() ? nullptr : &index_.entries[it->second];
  }

  /// The tensor named `name`; throws seqpar::Error naming the file and tensor when absent.
  const TensorEntry& at(std::string_view name) const {
    if (const TensorEntry* e = find(name)) return *e;
    std::string hint;
    const std::string suffix = "." + std::string(name);
    for (const auto& e : index_.entries)
      if (e.name.size() > suffix.size() && e.name.ends_with(suffix)) {
        hint = "; did you mean '" + e.name + "'?";
        break;
      }
    detail::fail(path_.string(), ": no tensor named '", name, "' (the checkpoint has ",
                 index_.entries.size(), " tensors)", hint);
  }

  /// Tensor names in the pickle's order.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    out.reserve(index_.entries.size());
    for (const auto& e : index_.entries) out.push_back(e.name);
    return out;
  }

 private:
  std::filesystem::path path_;
  detail::MappedFile file_;
  detail::TorchIndex index_;
};

}  // namespace seqpar::inline v0

#if !defined(SEQPAR_SEPARATE_COMPILATION)
#include "seqpar/io/impl/torch_checkpoint.hpp"
#endif

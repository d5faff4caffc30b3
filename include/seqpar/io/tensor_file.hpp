#pragma once
// TensorFile: a checkpoint of either kind a user may have — safetensors or a
// torch.save zip (pytorch_model.bin) — told apart by content, not by name.

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <string>
#include <variant>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/io/safetensors.hpp"
#include "seqpar/io/torch_checkpoint.hpp"

namespace seqpar::inline v0 {

/// An open checkpoint file of tensors, memory-mapped.
class TensorFile {
 public:
  explicit TensorFile(const std::filesystem::path& path) : path_(path), file_(open(path)) {}

  const std::filesystem::path& path() const { return path_; }
  const TensorEntry* find(std::string_view name) const {
    return std::visit([&](const auto& f) { return f.find(name); }, file_);
  }
  std::vector<std::string> names() const {
    return std::visit([](const auto& f) { return f.names(); }, file_);
  }

 private:
  using File = std::variant<SafetensorsFile, TorchCheckpoint>;
  static File open(const std::filesystem::path& path) {
    unsigned char head[9] = {};
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f && errno == ENOENT) detail::fail_missing(path.string(), ": no such weights file");
    SEQPAR_CHECK(f, path.string(), ": cannot open the weights file");
    const std::size_t got = std::fread(head, 1, sizeof head, f);
    std::fclose(f);
    if (got >= 4 && head[0] == 'P' && head[1] == 'K' && head[2] == 3 && head[3] == 4)
      return File(std::in_place_type<TorchCheckpoint>, path);
    if (got == 9 && head[8] == '{') return File(std::in_place_type<SafetensorsFile>, path);
    detail::fail(path.string(),
                 ": not a safetensors file nor a torch.save zip checkpoint (pytorch_model.bin); "
                 "expected one of those two formats");
  }

  std::filesystem::path path_;
  File file_;
};

}  // namespace seqpar::inline v0

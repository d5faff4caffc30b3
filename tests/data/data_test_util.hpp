// Helpers of the data tests: committed fixtures, scratch files, the public data folder.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace seqpar::test {

/// A committed fixture under tests/data/fixtures.
inline std::filesystem::path data_fixture(const std::string& name) {
  return std::filesystem::path(SEQPAR_TEST_DIR) / "data" / "fixtures" / name;
}

/// A fresh scratch folder for one test, removed when the object goes.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : path_(std::filesystem::temp_directory_path() /
              ("seqpar_data_" + std::to_string(::getpid()) + "_" + name)) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  /// Writes `bytes` to `name` inside the folder and returns its path.
  std::filesystem::path write(const std::string& name, std::string_view bytes) const {
    const auto p = path_ / name;
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return p;
  }

 private:
  std::filesystem::path path_;
};

/// The CLUENER folder of the public data sets, or an empty path when it is not there.
inline std::filesystem::path cluener_dir() {
  const std::string root = SEQPAR_DATA_DIR;
  if (root.empty()) return {};
  const auto dir = std::filesystem::path(root) / "cluener";
  return std::filesystem::exists(dir / "train.jsonl") ? dir : std::filesystem::path{};
}

}  // namespace seqpar::test

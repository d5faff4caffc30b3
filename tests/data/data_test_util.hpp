// Helpers of the data tests: committed fixtures and the public data folder (scratch folders:
// support/files.hpp).
#pragma once

#include <filesystem>
#include <string>

#include "../support/files.hpp"  // TempDir: scratch folders

namespace seqpar::test {

/// A committed fixture under tests/data/fixtures.
inline std::filesystem::path data_fixture(const std::string& name) {
  return std::filesystem::path(SEQPAR_TEST_DIR) / "data" / "fixtures" / name;
}

/// The folder `name` of the public data sets (cluener, smp2017_ecdt, tnews, finre), or an
/// empty path when it is not there.
inline std::filesystem::path shared_data_dir(const std::string& name) {
  const std::string root = SEQPAR_DATA_DIR;
  if (root.empty()) return {};
  const auto dir = std::filesystem::path(root) / name;
  return std::filesystem::exists(dir / "train.jsonl") ? dir : std::filesystem::path{};
}

/// The CLUENER folder of the public data sets, or an empty path when it is not there.
inline std::filesystem::path cluener_dir() { return shared_data_dir("cluener"); }

}  // namespace seqpar::test

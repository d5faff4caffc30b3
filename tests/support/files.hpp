// Scratch files of the tests: paths under the system temp folder, fresh folders, and
// whole-file reads and writes. One home for them, so that the test files of one program
// can also be compiled as one unit (the unity build of tests/CMakeLists.txt).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>

namespace seqpar::test {

/// `name` under the system temp folder, with this process's id in it: test programs that
/// run at once never share a scratch file.
inline std::filesystem::path temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("seqpar_test_" + std::to_string(::getpid()) + "_" + name);
}

/// A committed fixture folder, tests/fixtures/<folder>.
inline std::filesystem::path fixture_dir(const std::string& folder) {
  return std::filesystem::path(SEQPAR_TEST_DIR) / "fixtures" / folder;
}

/// A fresh, uniquely named folder under the system temp folder, removed with its contents.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "seqpar_dir_XXXXXX").string();
    REQUIRE_MESSAGE(::mkdtemp(t.data()) != nullptr, "cannot create ", t);
    path = t;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::filesystem::path operator/(const std::string& name) const { return path / name; }
  /// Writes `text` as the file `name` in the folder (a failed write fails the test); its path.
  std::filesystem::path write(const std::string& name, std::string_view text) const;
  /// The names in the folder, sorted.
  std::vector<std::string> listing() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path))
      out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

/// The whole file.
inline std::vector<std::byte> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open ", path.string());
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  if (!chars.empty()) std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}

/// Writes `bytes` as the whole file.
inline void write_bytes(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  REQUIRE_MESSAGE(out.good(), "cannot write ", path.string());
}

inline std::filesystem::path TempDir::write(const std::string& name, std::string_view text) const {
  const auto p = path / name;
  write_bytes(p, std::as_bytes(std::span(text.data(), text.size())));
  return p;
}

}  // namespace seqpar::test

// Atomic writes: one temporary-name scheme, the file whole or untouched.

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "../support/files.hpp"
#include "seqpar/io/atomic_file.hpp"

namespace fs = std::filesystem;

namespace {

std::string atomic_test_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST_CASE("a temporary of an atomic write is recognised by the name it stands for") {
  using seqpar::detail::is_temporary_of;
  using seqpar::detail::temporary_target;
  CHECK(is_temporary_of(".run.json.tmp.1a2b", "run.json"));
  CHECK(is_temporary_of(".step-8.safetensors.tmp.0f", "step-8.safetensors"));
  CHECK(!is_temporary_of(".run.json.tmp.1a2b", "run"));
  CHECK(!is_temporary_of("run.json.tmp", "run.json"));
  CHECK(!is_temporary_of(".run.json.tmp.", "run.json"));
  CHECK(!is_temporary_of(".run.json.tmp.keep", "run.json"));
  CHECK(!is_temporary_of(".run.json.tmp.1A", "run.json"));
  CHECK(temporary_target(".a.tmp.tmp.ff") == std::optional<std::string>("a.tmp"));
  CHECK(!temporary_target(".tmp.ff"));
  CHECK(!temporary_target("notes.txt"));
}

TEST_CASE("write_file_atomic replaces a file whole and leaves no temporary") {
  seqpar::test::TempDir dir;
  const fs::path path = dir / "sub" / "a.json";
  seqpar::detail::write_file_atomic(path, "first");
  seqpar::detail::write_file_atomic(path, "second");
  CHECK(atomic_test_text(path) == "second");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir / "sub")) names.push_back(e.path().filename());
  CHECK(names == std::vector<std::string>{"a.json"});
}

TEST_CASE("an uncommitted atomic file leaves the path untouched and removes its temporary") {
  seqpar::test::TempDir dir;
  const fs::path path = dir / "a.txt";
  seqpar::detail::write_file_atomic(path, "kept");
  {
    seqpar::detail::AtomicFile f(path);
    f.write(std::string_view("dropped"));
    bool temporary = false;
    for (const auto& e : fs::directory_iterator(dir.path))
      temporary |= seqpar::detail::is_temporary_of(e.path().filename().string(), "a.txt");
    CHECK(temporary);
  }
  CHECK(atomic_test_text(path) == "kept");
  CHECK(dir.listing() == std::vector<std::string>{"a.txt"});
}

TEST_CASE("copy_file_atomic copies a file's bytes to another path, never linking them") {
  seqpar::test::TempDir dir;
  seqpar::detail::write_file_atomic(dir / "from.bin", "bytes");
  seqpar::detail::write_file_atomic(dir / "to.bin", "old");
  seqpar::detail::copy_file_atomic(dir / "from.bin", dir / "to.bin");
  CHECK(atomic_test_text(dir / "to.bin") == "bytes");
  CHECK(dir.listing() == std::vector<std::string>{"from.bin", "to.bin"});
  // Two files: neither is a link of the other, and a change of one leaves the other.
  CHECK(fs::hard_link_count(dir / "from.bin") == 1);
  CHECK(fs::hard_link_count(dir / "to.bin") == 1);
  { std::ofstream(dir / "from.bin", std::ios::app) << " more"; }
  CHECK(atomic_test_text(dir / "to.bin") == "bytes");
}

}  // namespace

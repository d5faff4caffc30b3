// TensorBoard event files (io/tensorboard.hpp), read back by the tests' own reader
// (support/tfevents.hpp): every record's two CRCs, every Event field, the order of the files
// of a folder, and a damaged byte found.

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "../support/files.hpp"
#include "../support/tfevents.hpp"
#include "seqpar/io/tensorboard.hpp"

namespace tensorboard_test {

namespace fs = std::filesystem;
using seqpar::EventFileWriter;
using seqpar::Scalar;

TEST_CASE("an event file: the version, scalars and a session start, each field read back") {
  seqpar::test::TempDir dir;
  const std::string long_tag = "eval/by_label/" + std::string(200, 'x');  // a 2-byte length
  fs::path file;
  {
    EventFileWriter w(dir / "runs", "node-a");
    file = w.path();
    w.session_start(7, 1700000000.25);
    const std::vector<Scalar> values{{"train/loss", 2.5f}, {"train/lr", 1e-3f}, {long_tag, -0.0f}};
    w.scalars(7, 1700000000.5, values);
    w.scalars(std::int64_t{1} << 40, 1700000001.0, std::vector<Scalar>{{"train/loss", NAN}});
  }
  CHECK(file.parent_path() == dir / "runs");
  CHECK(file.filename().string().starts_with("events.out.tfevents."));
  CHECK(file.filename().string().ends_with(".node-a"));
  const auto r = seqpar::test::read_tfevents(file);
  REQUIRE(r.error.empty());
  REQUIRE(r.events.size() == 4);
  const auto& version = r.events[0];
  CHECK(version.file_version == std::optional<std::string>("brain.Event:2"));
  CHECK(version.step == 0);
  CHECK(std::abs(version.wall_time - EventFileWriter::wall_time()) < 60);
  CHECK(!version.has_summary);
  const auto& start = r.events[1];
  CHECK(start.session_status == std::optional<std::uint64_t>(1));
  CHECK(start.step == 7);
  CHECK(start.wall_time == 1700000000.25);
  CHECK(!start.file_version);
  const auto& first = r.events[2];
  CHECK(first.step == 7);
  CHECK(first.wall_time == 1700000000.5);
  CHECK(!first.session_status);
  REQUIRE(first.values.size() == 3);
  CHECK(first.values[0] == std::pair<std::string, float>("train/loss", 2.5f));
  CHECK(first.values[1] == std::pair<std::string, float>("train/lr", 1e-3f));
  CHECK(first.values[2].first == long_tag);
  CHECK(std::signbit(first.values[2].second));
  const auto& late = r.events[3];
  CHECK(late.step == std::int64_t{1} << 40);
  REQUIRE(late.values.size() == 1);
  CHECK(std::isnan(late.values[0].second));
}

TEST_CASE("the reader finds a damaged byte anywhere in a record, and a cut file") {
  seqpar::test::TempDir dir;
  fs::path file;
  {
    EventFileWriter w(dir.path, "h");
    file = w.path();
    w.scalars(3, 1.0, std::vector<Scalar>{{"train/loss", 1.0f}});
  }
  const std::string whole = seqpar::test::read_file_bytes(file);
  REQUIRE(seqpar::test::read_tfevents_bytes(whole).error.empty());
  // The version record is bytes [0, n): its length, length CRC, data and data CRC.
  const std::size_t n = 12 + static_cast<unsigned char>(whole[0]) + 4;
  const auto flipped = [&](std::size_t at) {
    std::string b = whole;
    b[at] = static_cast<char>(b[at] ^ 0x10);
    return seqpar::test::read_tfevents_bytes(b).error;
  };
  CHECK(flipped(0) == "record 1: length CRC mismatch");
  CHECK(flipped(9) == "record 1: length CRC mismatch");
  CHECK(flipped(14) == "record 1: data CRC mismatch");
  CHECK(flipped(n - 1) == "record 1: data CRC mismatch");
  CHECK(flipped(n + 13) == "record 2: data CRC mismatch");
  CHECK(flipped(whole.size() - 2) == "record 2: data CRC mismatch");
  CHECK(seqpar::test::read_tfevents_bytes(whole.substr(0, whole.size() - 1)).error ==
        "record 2: truncated data");
  CHECK(seqpar::test::read_tfevents_bytes(whole.substr(0, n + 5)).error ==
        "record 2: truncated header");
}

TEST_CASE("each new event file of a folder comes after the earlier ones in name order") {
  seqpar::test::TempDir dir;
  std::vector<fs::path> made;
  for (const char* host : {"b", "a", "b"}) made.push_back(EventFileWriter(dir.path, host).path());
  // A file of a clock set ahead: the next comes after it all the same.
  const fs::path ahead = dir / "events.out.tfevents.9999999990.c";
  dir.write(ahead.filename().string(), "");
  made.push_back(EventFileWriter(dir.path, "a").path());
  CHECK(made.back().filename() == "events.out.tfevents.9999999991.a");
  const auto files = seqpar::test::tfevents_files(dir.path);
  REQUIRE(files.size() == 5);
  CHECK(files == std::vector<fs::path>{made[0], made[1], made[2], ahead, made[3]});
  for (const auto& f : made) CHECK(seqpar::test::read_tfevents(f).events.size() == 1);
}

TEST_CASE("an event file that cannot be made is an error naming it") {
  seqpar::test::TempDir dir;
  dir.write("file", "");
  try {
    EventFileWriter w(dir / "file" / "runs", "h");
    FAIL("expected an error");
  } catch (const seqpar::Error& e) {
    CHECK(std::string(e.what()).find((dir / "file" / "runs").string() +
                                     ": cannot create the TensorBoard folder") !=
          std::string::npos);
  }
}

}  // namespace tensorboard_test

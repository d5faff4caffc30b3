// Checksums in safetensors files: write_safetensors stores a CRC-32C per tensor and one of
// the metadata, as metadata keys any reader sees; SafetensorsFile verifies them on open and
// names the file and the tensor of a flipped bit; files without them still open.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../support/files.hpp"
#include "seqpar/core/crc32c.hpp"
#include "seqpar/io/safetensors.hpp"

using namespace seqpar;

namespace {

using test::read_bytes;
using test::TempDir;
using test::write_bytes;

struct Written {
  std::vector<float> w = {1.0f, -2.0f, 0.5f, 4.0f, 3.25f, -0.125f};
  std::vector<std::int64_t> ids = {7, -1, 3};
  std::vector<float> empty;
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"seqpar.step", "42"}};

  std::vector<TensorToWrite> tensors() const {
    return {{"layer.w", DType::f32, {2, 3}, std::as_bytes(std::span(w))},
            {"ids", DType::i64, {3}, std::as_bytes(std::span(ids))},
            {"none", DType::f32, {0, 2}, std::as_bytes(std::span(empty))}};
  }
};

// The header as any JSON reader sees it.
nlohmann::json header_of(const std::vector<std::byte>& file) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | std::to_integer<std::uint64_t>(file[i]);
  const auto* p = reinterpret_cast<const char*>(file.data()) + 8;
  return nlohmann::json::parse(p, p + n);
}

std::string hex(std::uint32_t v) {
  char t[9];
  std::snprintf(t, sizeof t, "%08x", static_cast<unsigned>(v));
  return t;
}

// Requires that opening `path` throws an Error holding the path and each of `parts`.
void expect_refused(const std::filesystem::path& path, const std::vector<std::string>& parts) {
  try {
    SafetensorsFile f(path);
    FAIL("opened ", path.string());
  } catch (const Error& e) {
    const std::string m = e.what();
    CAPTURE(m);
    CHECK(m.find(path.string()) != std::string::npos);
    for (const auto& part : parts) {
      CAPTURE(part);
      CHECK(m.find(part) != std::string::npos);
    }
  }
}

std::uint64_t data_start(const std::vector<std::byte>& file) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | std::to_integer<std::uint64_t>(file[i]);
  return 8 + n;
}

}  // namespace

TEST_CASE("written files carry a CRC-32C per tensor and of the metadata, as metadata keys") {
  TempDir dir;
  const Written in;
  const auto path = dir / "m.safetensors";
  write_safetensors(path, in.tensors(), in.meta);
  // What another reader sees: plain metadata keys with eight hex digits.
  const nlohmann::json header = header_of(read_bytes(path));
  const auto& meta = header.at("__metadata__");
  CHECK(meta.at("seqpar.crc32c.layer.w") == hex(crc32c(std::as_bytes(std::span(in.w)))));
  CHECK(meta.at("seqpar.crc32c.ids") == hex(crc32c(std::as_bytes(std::span(in.ids)))));
  CHECK(meta.at("seqpar.crc32c.none") == "00000000");
  CHECK(meta.at("seqpar.crc32c.__metadata__") ==
        hex(detail::safetensors::metadata_crc32c(in.meta)));
  CHECK(meta.at("format") == "pt");
  CHECK(meta.size() == in.meta.size() + 4);

  const SafetensorsFile f(path);
  CHECK(f.metadata() == in.meta);  // the checksum keys are the reader's, not the caller's
  CHECK(f.checksums().size() == 4);
  CHECK(f.checksums().at("layer.w") == crc32c(f.at("layer.w").bytes));
  // A round trip through metadata() writes the same file again.
  write_safetensors(dir / "again.safetensors", in.tensors(), f.metadata());
  CHECK(read_bytes(dir / "again.safetensors") == read_bytes(path));
}

TEST_CASE("the metadata checksum is the documented encoding of the sorted entries") {
  // key length (8 bytes, little-endian), key, value length, value; in key order
  std::vector<unsigned char> bytes;
  const auto add = [&](const std::string& s) {
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<unsigned char>(s.size() >> (8 * i)));
    bytes.insert(bytes.end(), s.begin(), s.end());
  };
  add("a");
  add("1");
  add("b");
  add("");
  const std::uint32_t want = crc32c(std::as_bytes(std::span(bytes)));
  CHECK(detail::safetensors::metadata_crc32c({{"b", ""}, {"a", "1"}}) == want);
  CHECK(detail::safetensors::metadata_crc32c({{"b", ""}, {"a", "1"}, {"seqpar.crc32c.x", "0"}}) ==
        want);
  CHECK(detail::safetensors::metadata_crc32c({{"a", "1b"}}) !=
        detail::safetensors::metadata_crc32c({{"a", "1"}, {"b", ""}}));
}

TEST_CASE("a flipped bit in a tensor's bytes is refused naming the file and the tensor") {
  TempDir dir;
  const Written in;
  const auto path = dir / "m.safetensors";
  write_safetensors(path, in.tensors(), in.meta);
  const auto original = read_bytes(path);
  const std::uint64_t start = data_start(original);
  REQUIRE(original.size() == start + 6 * 4 + 3 * 8);
  const auto damaged = dir / "damaged.safetensors";
  for (std::size_t at = start; at < original.size(); ++at)
    for (int bit = 0; bit < 8; ++bit) {
      auto bytes = original;
      bytes[at] ^= static_cast<std::byte>(1u << bit);
      write_bytes(damaged, bytes);
      CAPTURE(at);
      CAPTURE(bit);
      const std::string tensor = at < start + 24 ? "layer.w" : "ids";
      expect_refused(damaged, {"tensor '" + tensor + "': its bytes' CRC-32C", "the file is damaged",
                               "metadata 'seqpar.crc32c." + tensor + "'"});
      // Checksums::none reads the checksums without the data: the damage goes unseen.
      const SafetensorsFile unchecked(damaged, Checksums::none);
      CHECK(unchecked.checksums().size() == 4);
    }
}

TEST_CASE("every single-bit flip anywhere in a written file is refused") {
  // (Not the shape of an empty tensor: [0, 2] and [0, 3] hold the same no bytes.)
  TempDir dir;
  Written in;
  auto tensors = in.tensors();
  tensors.pop_back();
  const auto path = dir / "m.safetensors";
  write_safetensors(path, tensors, in.meta);
  const auto original = read_bytes(path);
  int refused = 0, opened = 0;
  std::string first_opened;
  for (std::size_t at = 0; at < original.size(); ++at)
    for (int bit = 0; bit < 8; ++bit) {
      auto bytes = original;
      bytes[at] ^= static_cast<std::byte>(1u << bit);
      try {
        detail::safetensors::parse(bytes, "flipped");
        if (opened++ == 0) first_opened = std::to_string(at) + ":" + std::to_string(bit);
      } catch (const Error&) {
        ++refused;
      }
    }
  const int flips = refused + opened;
  MESSAGE(flips, " flips: ", refused, " refused, ", opened, " opened (first ", first_opened, ")");
  CHECK(flips == static_cast<int>(original.size() * 8));
  CHECK(opened == 0);
}

TEST_CASE("a changed metadata value is refused naming the metadata checksum") {
  TempDir dir;
  const Written in;
  const auto path = dir / "m.safetensors";
  write_safetensors(path, in.tensors(), in.meta);
  auto bytes = read_bytes(path);
  const std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  const auto at = text.find("\"seqpar.step\":\"42\"");
  REQUIRE(at != std::string::npos);
  bytes[at + 16] = static_cast<std::byte>('7');  // step 47
  write_bytes(path, bytes);
  expect_refused(path, {"the metadata's CRC-32C", "metadata 'seqpar.crc32c.__metadata__'",
                        "a metadata value was changed or damaged"});
}

TEST_CASE("files without checksums open as before") {
  const SafetensorsFile f(test::fixture_dir("safetensors") / "python_small.safetensors");
  CHECK(f.checksums().empty());
  CHECK(f.metadata() == std::map<std::string, std::string>{{"format", "pt"}});
  TempDir dir;
  const Written in;
  write_safetensors(dir / "plain.safetensors", in.tensors(), in.meta, Checksums::none);
  const SafetensorsFile p(dir / "plain.safetensors");
  CHECK(p.checksums().empty());
  CHECK(p.metadata() == in.meta);
}

TEST_CASE("checksum keys that do not match the file's tensors are refused, naming them") {
  TempDir dir;
  const Written in;
  const auto write = [&](const std::string& name, std::map<std::string, std::string> extra,
                         std::vector<std::string> drop = {}) {
    std::map<std::string, std::string> meta = in.meta;
    meta["seqpar.crc32c.__metadata__"] = hex(detail::safetensors::metadata_crc32c(in.meta));
    for (const auto& t : in.tensors()) meta[checksum_key(t.name)] = hex(crc32c(t.bytes));
    for (const auto& k : drop) meta.erase(k);
    for (const auto& [k, v] : extra) meta[k] = v;
    write_safetensors(dir / name, in.tensors(), meta, Checksums::none);
    return dir / name;
  };
  // the same keys as the writer's: accepted
  CHECK(SafetensorsFile(write("same.safetensors", {})).checksums().size() == 4);
  expect_refused(
      write("hex.safetensors", {{"seqpar.crc32c.ids", "12345g78"}}),
      {"metadata 'seqpar.crc32c.ids' is '12345g78'", "eight lowercase hexadecimal digits"});
  expect_refused(write("short.safetensors", {{"seqpar.crc32c.ids", "1234567"}}),
                 {"metadata 'seqpar.crc32c.ids' is '1234567'"});
  expect_refused(write("upper.safetensors", {{"seqpar.crc32c.ids", "1F749289"}}),
                 {"metadata 'seqpar.crc32c.ids' is '1F749289'", "lowercase"});
  expect_refused(write("orphan.safetensors", {{"seqpar.crc32c.idz", "00000000"}}),
                 {"metadata 'seqpar.crc32c.idz' is the checksum of tensor 'idz', which the file "
                  "does not hold"});
  expect_refused(write("missing.safetensors", {}, {"seqpar.crc32c.ids"}),
                 {"tensor 'ids' has no checksum (metadata 'seqpar.crc32c.ids') though 2 other "
                  "tensors have one"});
  expect_refused(write("nometa.safetensors", {}, {"seqpar.crc32c.__metadata__"}),
                 {"the tensors have checksums but the metadata has none"});
  expect_refused(write("wrong.safetensors", {{"seqpar.crc32c.layer.w", "00000000"}}),
                 {"tensor 'layer.w': its bytes' CRC-32C is", "but the file records 00000000"});
}

TEST_CASE("the writer refuses the caller's checksum keys, unless it writes none itself") {
  TempDir dir;
  const Written in;
  auto meta = in.meta;
  meta["seqpar.crc32c.ids"] = "00000000";
  CHECK_THROWS_WITH_AS(write_safetensors(dir / "x.safetensors", in.tensors(), meta),
                       doctest::Contains("metadata key 'seqpar.crc32c.ids' is one of the "
                                         "checksums the writer adds"),
                       Error);
  CHECK_FALSE(std::filesystem::exists(dir / "x.safetensors"));
}

TEST_CASE("a fixture written by Python's safetensors and crc32c packages verifies") {
  // tools/safetensors_crc32c.py wrote it, its checksums computed by another implementation
  const auto path = test::fixture_dir("safetensors") / "python_crc32c.safetensors";
  const SafetensorsFile f(path);
  CHECK(f.checksums().size() == f.size() + 1);
  CHECK(f.metadata().at("format") == "pt");
  auto bytes = read_bytes(path);
  bytes[bytes.size() - 3] ^= std::byte{0x10};
  TempDir dir;
  write_bytes(dir / "flipped.safetensors", bytes);
  expect_refused(dir / "flipped.safetensors", {"the file is damaged"});
}

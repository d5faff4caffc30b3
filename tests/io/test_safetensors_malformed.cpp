// SafetensorsFile on malformed input: one test per rule of the format, each
// checking that seqpar::Error names the file, the tensor and what was expected;
// then corruption sweeps that allow only success or seqpar::Error.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../support/files.hpp"
#include "../support/sweep.hpp"
#include "seqpar/io/safetensors.hpp"

using namespace seqpar;
namespace fs = std::filesystem;

namespace {

using test::read_bytes;
using test::TempDir;
using test::write_bytes;

// A file image: the 8-byte length (the header's own unless `declared` is given),
// the header text, then `data_size` data bytes.
std::vector<std::byte> image(std::string_view header, std::size_t data_size,
                             std::optional<std::uint64_t> declared = std::nullopt) {
  const std::uint64_t n = declared.value_or(header.size());
  std::vector<std::byte> out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>((n >> (8 * i)) & 0xff));
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  for (std::size_t i = 0; i < data_size; ++i) out.push_back(static_cast<std::byte>(i * 37 + 1));
  return out;
}

/// Writes the image to a file named `name` and requires that opening it throws
/// seqpar::Error whose message holds the file's path and every one of `needles`.
void expect_rejected(const std::string& name, std::span<const std::byte> bytes,
                     std::vector<std::string> needles) {
  TempDir dir;
  const auto path = dir.path / name;
  write_bytes(path, bytes);
  CAPTURE(name);
  try {
    SafetensorsFile f(path);
    FAIL("opened a malformed file: ", name);
  } catch (const Error& e) {
    const std::string m = e.what();
    CAPTURE(m);
    CHECK(m.find(path.string()) != std::string::npos);
    for (const auto& n : needles) {
      CAPTURE(n);
      CHECK(m.find(n) != std::string::npos);
    }
  }
}

void expect_rejected(const std::string& name, std::string_view header, std::size_t data_size,
                     std::vector<std::string> needles) {
  expect_rejected(name, image(header, data_size), std::move(needles));
}

std::size_t open_ok(std::span<const std::byte> bytes) {
  TempDir dir;
  const auto path = dir.path / "ok.safetensors";
  write_bytes(path, bytes);
  return SafetensorsFile(path).size();
}

}  // namespace

TEST_CASE("safetensors rejects a file shorter than 8 bytes") {
  expect_rejected("empty.safetensors", std::vector<std::byte>{}, {"0 bytes", "at least 8"});
  expect_rejected("seven.safetensors", std::vector<std::byte>(7, std::byte{0}),
                  {"7 bytes", "at least 8"});
}

TEST_CASE("safetensors rejects a header length past the end of the file") {
  expect_rejected("past_end.safetensors", image("{}", 0, 3), {"header length 3", "at most 2"});
  expect_rejected("huge_len.safetensors", image("{}", 0, 99'999'999),
                  {"header length 99999999", "past the end"});
}

TEST_CASE("safetensors rejects a header length of 100 MB or more") {
  expect_rejected("limit.safetensors", image("{}", 0, 100'000'000),
                  {"100000000 bytes", "below 100000000"});
  expect_rejected("max_u64.safetensors", image("{}", 0, ~std::uint64_t{0}),
                  {"18446744073709551615", "below 100000000"});
}

TEST_CASE("safetensors rejects a header that does not start with '{'") {
  expect_rejected("lead_space.safetensors", " {}", 0, {"start with '{'"});
  expect_rejected("array.safetensors", "[]      ", 0, {"start with '{'"});
  expect_rejected("zero_len.safetensors", "", 0, {"start with '{'"});
}

TEST_CASE("safetensors rejects a header with a NUL byte") {
  // The JSON parser would stop at the NUL and accept what comes before it.
  expect_rejected("nul_pad.safetensors", std::string_view("{}\0\0\0\0\0\0", 8), 0,
                  {"NUL byte at offset 10"});
  expect_rejected("nul_garbage.safetensors", std::string_view("{}\0garbag", 9), 0, {"NUL"});
}

TEST_CASE("safetensors rejects a header that is not valid JSON") {
  expect_rejected("syntax.safetensors", R"({"a":})", 0, {"not valid JSON"});
  expect_rejected("trailing.safetensors", "{} x", 0, {"not valid JSON"});
  expect_rejected("unclosed.safetensors", R"({"a":{"dtype":"F32")", 0, {"not valid JSON"});
  expect_rejected("comment.safetensors", "{}/* c */", 0, {"not valid JSON"});
  expect_rejected("bad_utf8.safetensors", "{\"a\xff\":1}", 0, {"not valid JSON"});
}

TEST_CASE("safetensors rejects an entry missing dtype, shape or data_offsets") {
  expect_rejected("no_dtype.safetensors", R"({"w.bias":{"shape":[1],"data_offsets":[0,4]}})", 4,
                  {"'w.bias'", "'dtype'"});
  expect_rejected("no_shape.safetensors", R"({"w.bias":{"dtype":"F32","data_offsets":[0,4]}})", 4,
                  {"'w.bias'", "'shape'"});
  expect_rejected("no_offsets.safetensors", R"({"w.bias":{"dtype":"F32","shape":[1]}})", 4,
                  {"'w.bias'", "'data_offsets'"});
}

TEST_CASE("safetensors rejects entries with wrong JSON types") {
  expect_rejected("entry_array.safetensors", R"({"w":[1,2]})", 0,
                  {"'w'", "entry is an array", "expected an object"});
  expect_rejected("dtype_number.safetensors",
                  R"({"w":{"dtype":32,"shape":[1],"data_offsets":[0,4]}})", 4,
                  {"'w'", "'dtype' is an integer", "expected a string"});
  expect_rejected("shape_string.safetensors",
                  R"({"w":{"dtype":"F32","shape":"1","data_offsets":[0,4]}})", 4,
                  {"'w'", "'shape' is a string", "expected an array"});
  expect_rejected("shape_float.safetensors",
                  R"({"w":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})", 4,
                  {"'w'", "shape[0] is a floating-point number", "non-negative integer"});
  expect_rejected("shape_null.safetensors",
                  R"({"w":{"dtype":"F32","shape":[1,null],"data_offsets":[0,4]}})", 4,
                  {"'w'", "shape[1] is null"});
  expect_rejected("offsets_three.safetensors",
                  R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4,4]}})", 4,
                  {"'w'", "'data_offsets' is an array of 3 values", "two non-negative integers"});
  expect_rejected("offsets_object.safetensors",
                  R"({"w":{"dtype":"F32","shape":[1],"data_offsets":{"0":4}}})", 4,
                  {"'w'", "'data_offsets' is an object"});
  expect_rejected("offsets_string.safetensors",
                  R"({"w":{"dtype":"F32","shape":[1],"data_offsets":["0",4]}})", 4,
                  {"'w'", "data_offsets[0] is a string"});
  expect_rejected("offsets_negative.safetensors",
                  R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,-4]}})", 4,
                  {"'w'", "data_offsets[1] is -4"});
}

TEST_CASE("safetensors rejects a negative shape") {
  expect_rejected("negative.safetensors",
                  R"({"h.0.mlp":{"dtype":"F32","shape":[2,-3],"data_offsets":[0,24]}})", 24,
                  {"'h.0.mlp'", "shape[1] is -3", "non-negative integer"});
}

TEST_CASE("safetensors rejects an unknown dtype and names an unsupported one") {
  expect_rejected("unknown.safetensors",
                  R"({"w":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", 4,
                  {"'w'", "unknown dtype 'F33'", "F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL"});
  expect_rejected("lower.safetensors", R"({"w":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}})",
                  4, {"'w'", "unknown dtype 'f32'"});
  for (const char* dt : {"F8_E4M3", "F8_E5M2", "U16", "U32", "U64", "F4", "C64"}) {
    const std::string header =
        std::string(R"({"q.weight":{"dtype":")") + dt + R"(","shape":[2],"data_offsets":[0,2]}})";
    expect_rejected(std::string("dtype_") + dt + ".safetensors", header, 2,
                    {"'q.weight'", std::string("dtype ") + dt + " is not supported"});
  }
}

TEST_CASE("safetensors rejects data_offsets with begin after end") {
  expect_rejected("reversed.safetensors",
                  R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", 4,
                  {"'w'", "[4, 0]", "begin after end"});
}

TEST_CASE("safetensors rejects a byte size that is not numel times the dtype size") {
  expect_rejected("size.safetensors",
                  R"({"attn.dense":{"dtype":"F16","shape":[2,3],"data_offsets":[0,8]}})", 8,
                  {"'attn.dense'", "hold 8 bytes", "expected 12", "6 elements of F16"});
  expect_rejected("scalar_size.safetensors",
                  R"({"s":{"dtype":"F32","shape":[],"data_offsets":[0,0]}})", 0,
                  {"'s'", "hold 0 bytes", "expected 4"});
}

TEST_CASE("safetensors rejects offsets that leave a hole") {
  expect_rejected("hole.safetensors",
                  R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                  R"("b":{"dtype":"U8","shape":[2],"data_offsets":[3,5]}})",
                  5, {"[2, 3)", "hole before tensor 'b'", "after tensor 'a'"});
}

TEST_CASE("safetensors rejects offsets that overlap") {
  expect_rejected("overlap.safetensors",
                  R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                  R"("b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})",
                  4, {"'b'", "overlap tensor 'a'", "ends at 4"});
  expect_rejected("same.safetensors",
                  R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                  R"("b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})",
                  4, {"'b'", "overlap tensor 'a'"});
  // An empty tensor placed inside another one's bytes.
  expect_rejected("empty_inside.safetensors",
                  R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                  R"("z":{"dtype":"U8","shape":[0],"data_offsets":[2,2]}})",
                  4, {"'z'", "overlap tensor 'a'"});
}

TEST_CASE("safetensors rejects offsets that do not start at 0") {
  expect_rejected("start.safetensors",
                  R"({"only":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})", 3,
                  {"'only'", "starts at offset 1", "expected 0"});
}

TEST_CASE("safetensors rejects trailing bytes after the last tensor") {
  expect_rejected("trailing_data.safetensors",
                  R"({"last":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", 3,
                  {"'last'", "end at data offset 2", "holds 3 bytes"});
  expect_rejected("no_tensors_data.safetensors", "{}", 5, {"no tensors", "5 data bytes"});
}

TEST_CASE("safetensors rejects truncated data") {
  expect_rejected("truncated.safetensors",
                  R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                  R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                  12, {"'b'", "[8, 16]", "holds 12 bytes", "truncated"});
}

TEST_CASE("safetensors rejects duplicate names") {
  expect_rejected("dup_tensor.safetensors",
                  R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                  R"("w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})",
                  1, {"tensor 'w' appears twice"});
  expect_rejected("dup_field.safetensors",
                  R"({"w":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1,
                  {"tensor 'w'", "key 'dtype' appears twice"});
  expect_rejected("dup_meta_key.safetensors", R"({"__metadata__":{"k":"1","k":"2"}})", 0,
                  {"__metadata__ has key 'k' twice"});
  expect_rejected("dup_meta.safetensors", R"({"__metadata__":{},"__metadata__":{}})", 0,
                  {"'__metadata__' twice"});
  // A duplicate in one entry does not leak into the next entry's keys.
  CHECK(open_ok(image(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                      R"("b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                      2)) == 2);
}

TEST_CASE("safetensors rejects __metadata__ that is not an object of strings") {
  expect_rejected("meta_array.safetensors", R"({"__metadata__":["a"]})", 0,
                  {"__metadata__ is an array", "mapping strings to strings"});
  expect_rejected("meta_string.safetensors", R"({"__metadata__":"x"})", 0,
                  {"__metadata__ is a string"});
  expect_rejected("meta_number.safetensors", R"({"__metadata__":{"step":1}})", 0,
                  {"key 'step' holds an integer", "expected a string"});
  expect_rejected("meta_nested.safetensors", R"({"__metadata__":{"cfg":{"a":"b"}}})", 0,
                  {"key 'cfg' holds an object"});
}

TEST_CASE("safetensors rejects shapes whose element or byte count overflows") {
  // 2^62 * 4 overflows int64 even though a later zero makes numel 0.
  expect_rejected(
      "overflow_zero.safetensors",
      R"({"big":{"dtype":"F32","shape":[4611686018427387904,4,0],"data_offsets":[0,0]}})", 0,
      {"'big'", "more elements than a 64-bit count holds"});
  expect_rejected(
      "overflow_zero_first.safetensors",
      R"({"big":{"dtype":"F32","shape":[0,4611686018427387904,4],"data_offsets":[0,0]}})", 0,
      {"'big'", "more elements"});
  expect_rejected("overflow.safetensors",
                  R"({"big":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}})",
                  0, {"'big'", "more elements"});
  // 2^61 elements fit, 2^64 bytes of F64 do not.
  expect_rejected("overflow_bytes.safetensors",
                  R"({"big":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0]}})",
                  0, {"'big'", "needs more bytes"});
  expect_rejected("dim_u64.safetensors",
                  R"({"big":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,0]}})",
                  0, {"'big'", "shape[0] is 18446744073709551615", "at most 2^63 - 1"});
  expect_rejected("dim_beyond_u64.safetensors",
                  R"({"big":{"dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,0]}})",
                  0, {"'big'", "shape[0] is a floating-point number"});
}

TEST_CASE("safetensors rejects deeply nested headers without recursing") {
  const std::string deep = "{\"x\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  expect_rejected("deep.safetensors", deep, 0, {"nests deeper than 64"});
}

TEST_CASE("safetensors accepts what the format allows") {
  // Trailing whitespace, null metadata (read as none), unknown extra fields, empty
  // tensors sharing an offset, a scalar, a huge dimension next to a zero.
  CHECK(open_ok(image("{}\n\t\r      ", 0)) == 0);
  CHECK(open_ok(image(R"({"__metadata__":null})", 0)) == 0);
  CHECK(open_ok(image(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":{"y":[1]}}})",
                      1)) == 1);
  CHECK(
      open_ok(image(R"({"e1":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
                    R"("s":{"dtype":"I16","shape":[],"data_offsets":[0,2]},)"
                    R"("e2":{"dtype":"F64","shape":[9223372036854775807,0],"data_offsets":[2,2]}})",
                    2)) == 3);
}

// Corruption sweeps: whatever happens to the bytes, opening succeeds or throws
// seqpar::Error. Accepted tensors must tile the data contiguously and be readable.
namespace {

struct SweepCounts {
  int opened = 0;
  int rejected = 0;
};

// Reads every byte of every tensor (so the address sanitizer sees any view past the
// image) and checks that consecutive tensors start where the previous one ended.
// Returns one past the last tensor's bytes (nullptr when there are none).
const std::byte* walk_entries(std::span<const TensorEntry> entries) {
  const std::byte* end = nullptr;
  unsigned sum = 0;
  for (const auto& e : entries) {
    REQUIRE(e.bytes.size() == static_cast<std::size_t>(e.numel()) * dtype_size(e.dtype));
    if (end != nullptr) REQUIRE(e.bytes.data() == end);
    for (auto b : e.bytes) sum += std::to_integer<unsigned>(b);
    if (e.dtype == DType::f32 || e.dtype == DType::f16 || e.dtype == DType::bf16 ||
        e.dtype == DType::f64) {
      std::vector<double> v(static_cast<std::size_t>(e.numel()));
      read_tensor<double>(e, std::span<double>(v));
    }
    end = e.bytes.data() + e.bytes.size();
  }
  REQUIRE(sum != 0xffffffffu);
  return end;
}

// Validates the image in memory, from an exact-size heap copy: unlike a file mapping,
// whose last page runs past the file's end, the heap copy lets the address sanitizer
// flag a read one byte past the image.
void parse_or_reject(std::span<const std::byte> bytes, SweepCounts& counts) {
  const std::size_t n = bytes.size();
  const std::unique_ptr<std::byte[]> copy(new std::byte[n]);
  if (n > 0) std::memcpy(copy.get(), bytes.data(), n);
  try {
    const auto index = detail::safetensors::parse({copy.get(), n}, "corrupt.safetensors");
    ++counts.opened;
    const std::byte* end = walk_entries(index.entries);
    if (end != nullptr) REQUIRE(end == copy.get() + n);  // the data ends with the file
  } catch (const Error&) {
    ++counts.rejected;
  } catch (const std::exception& e) {
    FAIL("parsing threw something other than seqpar::Error: ", e.what());
  }
}

void open_or_reject(const fs::path& path, std::span<const std::byte> bytes, SweepCounts& counts) {
  write_bytes(path, bytes);
  try {
    const SafetensorsFile f(path);
    ++counts.opened;
    walk_entries(f.entries());
  } catch (const Error&) {
    ++counts.rejected;
  } catch (const std::exception& e) {
    FAIL("opening threw something other than seqpar::Error: ", e.what());
  }
}

}  // namespace

TEST_CASE("safetensors corruption sweep over every byte of a small Python fixture") {
  const auto original = read_bytes(test::fixture_dir("safetensors") / "python_small.safetensors");
  REQUIRE(original.size() == 250);
  SweepCounts counts;
  const unsigned char replacements[] = {'"', '0', '9', ' ', '-', '{', '}', '[', ']', ',', ':', 0};
  for (std::size_t pos = 0; pos < original.size(); ++pos) {
    CAPTURE(pos);
    auto bytes = original;
    for (unsigned mask : {0x01u, 0x80u, 0xffu}) {
      bytes[pos] = original[pos] ^ static_cast<std::byte>(mask);
      parse_or_reject(bytes, counts);
    }
    for (unsigned char r : replacements) {
      bytes[pos] = static_cast<std::byte>(r);
      parse_or_reject(bytes, counts);
    }
  }
  auto longer = original;
  longer.push_back(std::byte{' '});
  parse_or_reject(longer, counts);
  MESSAGE("byte sweep: ", counts.opened, " accepted, ", counts.rejected, " rejected");
  CHECK(counts.rejected > 2000);  // nearly every header mutation fails
  CHECK(counts.opened > 100);     // data-byte mutations and harmless header ones pass
}

TEST_CASE("safetensors truncation sweep: every prefix of a small Python fixture file") {
  const auto original = read_bytes(test::fixture_dir("safetensors") / "python_small.safetensors");
  TempDir dir;
  SweepCounts counts;
  for (std::size_t len = 0; len < original.size(); ++len) {
    CAPTURE(len);
    open_or_reject(dir.path / "prefix.safetensors", std::span(original).first(len), counts);
    parse_or_reject(std::span(original).first(len), counts);
  }
  CHECK(counts.opened == 0);
  CHECK(counts.rejected == 2 * static_cast<int>(original.size()));
}

TEST_CASE("safetensors corruption sweep with random multi-byte damage to a Python fixture") {
  const auto original = read_bytes(test::fixture_dir("safetensors") / "python_mixed.safetensors");
  std::mt19937_64 rng(20240531);
  const int trials = 8000 / static_cast<int>(test::sweep_stride());  // fewer in CI's ASan stage
  SweepCounts counts;
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | std::to_integer<std::uint64_t>(original[i]);
  for (int trial = 0; trial < trials; ++trial) {
    auto bytes = original;
    const int hits = 1 + static_cast<int>(rng() % 4);
    for (int h = 0; h < hits; ++h) {
      // Mostly inside the length field and header, where the structure is.
      const std::size_t pos = rng() % 4 != 0 ? rng() % (8 + n) : rng() % bytes.size();
      bytes[pos] = static_cast<std::byte>(rng() & 0xff);
    }
    if (rng() % 8 == 0) bytes.resize(rng() % bytes.size());
    parse_or_reject(bytes, counts);
  }
  MESSAGE("random sweep: ", counts.opened, " accepted, ", counts.rejected, " rejected");
  CHECK(counts.rejected > trials * 3 / 4);
  CHECK(counts.opened > 0);
}

// SafetensorsFile and write_safetensors: round trips, files written by the
// reference Python library (committed fixtures), and the atomic writer.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "../support/files.hpp"
#include "seqpar/io/safetensors.hpp"

using namespace seqpar;
namespace fs = std::filesystem;

namespace {

/// A fresh folder under the system temp folder, removed with its contents.
using test::read_bytes;
using test::TempDir;

template <class T>
std::span<const std::byte> as_bytes_of(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}

template <class T>
std::vector<T> values_of(const TensorEntry& e) {
  REQUIRE(e.bytes.size() == static_cast<std::size_t>(e.numel()) * sizeof(T));
  std::vector<T> out(static_cast<std::size_t>(e.numel()));
  if (!out.empty()) std::memcpy(out.data(), e.bytes.data(), e.bytes.size());
  return out;
}

std::vector<float> floats_of(const TensorEntry& e) {
  std::vector<float> out(static_cast<std::size_t>(e.numel()));
  read_tensor<float>(e, std::span<float>(out));
  return out;
}

// (i - 12) / 4 for i in 0..23, the arange tensors of the Python fixture.
double arange_value(int i) { return (i - 12) / 4.0; }

}  // namespace

static_assert(!std::is_copy_constructible_v<SafetensorsFile>);
static_assert(!std::is_copy_assignable_v<SafetensorsFile>);
static_assert(std::is_nothrow_move_constructible_v<SafetensorsFile>);
static_assert(std::is_nothrow_move_assignable_v<SafetensorsFile>);

TEST_CASE("safetensors round trip of F32, F16, BF16 and I64 with metadata") {
  TempDir dir;
  const auto path = dir / "model.safetensors";
  std::vector<float> w(2 * 3);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.1f * static_cast<float>(i) - 0.25f;
  std::vector<std::uint16_t> h(5), b(5);
  const float hv[5] = {1.0f, -0.5f, 65504.0f, 6.0e-8f, 0.333251953125f};
  for (int i = 0; i < 5; ++i) {
    h[i] = float_to_f16(hv[i]);
    b[i] = float_to_bf16(hv[i] * 1000.0f);
  }
  const std::vector<std::int64_t> ids = {0, -1, std::numeric_limits<std::int64_t>::max(),
                                         std::numeric_limits<std::int64_t>::min()};
  const std::vector<TensorToWrite> tensors = {
      {"layer.weight", DType::f32, {2, 3}, as_bytes_of(w)},
      {"half", DType::f16, {5}, as_bytes_of(h)},
      {"brain", DType::bf16, {5, 1}, as_bytes_of(b)},
      {"ids", DType::i64, {2, 2}, as_bytes_of(ids)},
  };
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"step", "42"}};
  write_safetensors(path, tensors, meta);

  const SafetensorsFile f(path);
  CHECK(f.path() == path);
  CHECK(f.names() == std::vector<std::string>{"layer.weight", "half", "brain", "ids"});
  CHECK(f.metadata() == meta);
  CHECK(f.size() == 4);

  const auto& ew = f.at("layer.weight");
  CHECK(ew.dtype == DType::f32);
  CHECK(ew.shape == std::vector<std::int64_t>{2, 3});
  CHECK(ew.strides == std::vector<std::int64_t>{3, 1});
  CHECK(ew.file == path.string());
  CHECK(values_of<float>(ew) == w);
  CHECK(floats_of(ew) == w);

  const auto& eh = f.at("half");
  CHECK(eh.dtype == DType::f16);
  CHECK(values_of<std::uint16_t>(eh) == h);
  const auto hf = floats_of(eh);
  for (int i = 0; i < 5; ++i) CHECK(hf[i] == f16_to_float(h[i]));
  CHECK(hf[0] == 1.0f);
  CHECK(hf[2] == 65504.0f);

  const auto& eb = f.at("brain");
  CHECK(eb.dtype == DType::bf16);
  CHECK(eb.shape == std::vector<std::int64_t>{5, 1});
  CHECK(values_of<std::uint16_t>(eb) == b);
  CHECK(floats_of(eb)[0] == 1000.0f);

  const auto& ei = f.at("ids");
  CHECK(ei.dtype == DType::i64);
  CHECK(values_of<std::int64_t>(ei) == ids);

  CHECK(f.find("absent") == nullptr);
  CHECK(f.find("ids") == &ei);
}

TEST_CASE("safetensors round trip of every supported dtype, scalars and empty tensors") {
  TempDir dir;
  const auto path = dir / "all.safetensors";
  const std::vector<double> f64 = {1e300, -2.5, 0.0};
  const std::vector<std::int32_t> i32 = {-2147483647 - 1, 7};
  const std::vector<std::int16_t> i16 = {-32768, 32767, 5};
  const std::vector<std::int8_t> i8 = {-128, 127};
  const std::vector<std::uint8_t> u8 = {0, 255, 9};
  const std::vector<std::uint8_t> mask = {1, 0, 1, 1};
  const std::vector<float> scalar = {3.5f};
  const std::vector<float> none;
  const std::vector<TensorToWrite> tensors = {
      {"i8", DType::i8, {2}, as_bytes_of(i8)},  // odd sizes first: later data is unaligned
      {"u8", DType::u8, {3}, as_bytes_of(u8)},
      {"f64", DType::f64, {3}, as_bytes_of(f64)},
      {"i32", DType::i32, {1, 2}, as_bytes_of(i32)},
      {"i16", DType::i16, {3, 1, 1}, as_bytes_of(i16)},
      {"mask", DType::boolean, {2, 2}, as_bytes_of(mask)},
      {"scalar", DType::f32, {}, as_bytes_of(scalar)},
      {"empty", DType::f32, {4, 0, 2}, as_bytes_of(none)},
      {"名前 with spaces/and:colons", DType::f32, {0}, as_bytes_of(none)},
  };
  write_safetensors(path, tensors);

  const SafetensorsFile f(path);
  CHECK(f.metadata().empty());
  // Tensors with no bytes share their offset with the next one; ties sort by name.
  CHECK(f.names() == std::vector<std::string>{"i8", "u8", "f64", "i32", "i16", "mask", "scalar",
                                              "empty", "名前 with spaces/and:colons"});
  CHECK(values_of<std::int8_t>(f.at("i8")) == i8);
  CHECK(values_of<std::uint8_t>(f.at("u8")) == u8);
  CHECK(values_of<double>(f.at("f64")) == f64);
  CHECK(f.at("f64").dtype == DType::f64);
  CHECK(values_of<std::int32_t>(f.at("i32")) == i32);
  CHECK(values_of<std::int16_t>(f.at("i16")) == i16);
  CHECK(f.at("i16").strides == std::vector<std::int64_t>{1, 1, 1});
  CHECK(values_of<std::uint8_t>(f.at("mask")) == mask);
  CHECK(f.at("mask").dtype == DType::boolean);
  CHECK(f.at("scalar").shape.empty());
  CHECK(f.at("scalar").numel() == 1);
  CHECK(floats_of(f.at("scalar")) == scalar);
  CHECK(f.at("empty").numel() == 0);
  CHECK(f.at("empty").bytes.empty());
  CHECK(f.at("empty").strides == std::vector<std::int64_t>{0, 2, 1});
  CHECK(f.at("名前 with spaces/and:colons").shape == std::vector<std::int64_t>{0});
}

TEST_CASE("safetensors writer pads the header with spaces so the data starts at a multiple of 8") {
  TempDir dir;
  for (int len = 1; len <= 9; ++len) {
    const auto path = dir / "pad.safetensors";
    const std::vector<std::uint8_t> data(static_cast<std::size_t>(len), 0x5a);
    const std::vector<TensorToWrite> tensors = {
        {std::string(static_cast<std::size_t>(len), 'x'), DType::u8, {len}, as_bytes_of(data)}};
    write_safetensors(path, tensors, {}, Checksums::none);  // the header as the layout makes it
    const auto bytes = read_bytes(path);
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | std::to_integer<std::uint64_t>(bytes[i]);
    CHECK(n % 8 == 0);
    CHECK(bytes.size() == 8 + n + static_cast<std::size_t>(len));
    const std::string header(reinterpret_cast<const char*>(bytes.data()) + 8, n);
    const auto close = header.rfind('}');
    REQUIRE(close != std::string::npos);
    CHECK(header.find_first_not_of(' ', close + 1) == std::string::npos);
    const auto j = nlohmann::json::parse(header);
    CHECK(j.size() == 1);
    CHECK(j[std::string(static_cast<std::size_t>(len), 'x')]["data_offsets"] ==
          nlohmann::json::array({0, len}));
    CHECK(SafetensorsFile(path).at(std::string(static_cast<std::size_t>(len), 'x')).bytes.size() ==
          static_cast<std::size_t>(len));
  }
}

TEST_CASE("safetensors file with no tensors and no metadata") {
  TempDir dir;
  const auto path = dir / "empty.safetensors";
  write_safetensors(path, std::span<const TensorToWrite>{}, {}, Checksums::none);
  const auto bytes = read_bytes(path);
  REQUIRE(bytes.size() == 16);
  CHECK(std::string(reinterpret_cast<const char*>(bytes.data()) + 8, 8) == "{}      ");
  const SafetensorsFile f(path);
  CHECK(f.size() == 0);
  CHECK(f.names().empty());
  CHECK(f.metadata().empty());
}

TEST_CASE("safetensors fixture from the Python library: values of every dtype") {
  const SafetensorsFile f(test::fixture_dir("safetensors") / "python_mixed.safetensors");
  CHECK(f.metadata() == std::map<std::string, std::string>{{"format", "pt"}});
  CHECK(f.size() == 17);

  for (const char* name : {"arange_f32", "arange_f16", "arange_bf16"}) {
    CAPTURE(name);
    const auto& e = f.at(name);
    CHECK(e.shape == std::vector<std::int64_t>{2, 3, 4});
    CHECK(e.strides == std::vector<std::int64_t>{12, 4, 1});
    const auto v = floats_of(e);
    for (int i = 0; i < 24; ++i) CHECK(v[i] == static_cast<float>(arange_value(i)));
  }
  CHECK(f.at("arange_f16").dtype == DType::f16);
  CHECK(f.at("arange_bf16").dtype == DType::bf16);
  {
    const auto& e = f.at("arange_f64");
    CHECK(e.dtype == DType::f64);
    std::vector<double> v(24);
    read_tensor<double>(e, std::span<double>(v));
    for (int i = 0; i < 24; ++i) CHECK(v[i] == arange_value(i));
  }
  const auto i64 = values_of<std::int64_t>(f.at("arange_i64"));
  const auto i32 = values_of<std::int32_t>(f.at("arange_i32"));
  const auto i16 = values_of<std::int16_t>(f.at("arange_i16"));
  const auto i8 = values_of<std::int8_t>(f.at("arange_i8"));
  const auto u8 = values_of<std::uint8_t>(f.at("arange_u8"));
  const auto mask = values_of<std::uint8_t>(f.at("arange_bool"));
  CHECK(f.at("arange_i64").shape == std::vector<std::int64_t>{4, 6});
  CHECK(f.at("arange_i32").shape == std::vector<std::int64_t>{6, 4});
  CHECK(f.at("arange_i8").shape == std::vector<std::int64_t>{3, 8});
  CHECK(f.at("arange_u8").shape == std::vector<std::int64_t>{8, 3});
  CHECK(f.at("arange_bool").shape == std::vector<std::int64_t>{2, 12});
  CHECK(f.at("arange_bool").dtype == DType::boolean);
  for (int i = 0; i < 24; ++i) {
    CHECK(i64[i] == i - 12);
    CHECK(i32[i] == (i - 12) * 100000);
    CHECK(i16[i] == (i - 12) * 1000);
    CHECK(i8[i] == i - 12);
    CHECK(u8[i] == i * 10);
    CHECK(mask[i] == (i % 3 == 0 ? 1 : 0));
  }
  CHECK(f.at("scalar_f32").shape.empty());
  CHECK(floats_of(f.at("scalar_f32")) == std::vector<float>{2.5f});
  CHECK(f.at("empty_f32").shape == std::vector<std::int64_t>{0, 3});
  CHECK(f.at("empty_f32").bytes.empty());
}

TEST_CASE("safetensors fixture from the Python library: 16-bit floats match torch bit for bit") {
  const SafetensorsFile f(test::fixture_dir("safetensors") / "python_mixed.safetensors");
  const auto src = values_of<float>(f.at("round_src_f32"));
  REQUIRE(src.size() == 64);
  struct Pair {
    const char* half;
    const char* as_f32;
    std::uint16_t (*round)(float);
  };
  for (const Pair p : {Pair{"round_f16", "round_f16_as_f32", float_to_f16},
                       Pair{"round_bf16", "round_bf16_as_f32", float_to_bf16}}) {
    CAPTURE(p.half);
    const auto bits = values_of<std::uint16_t>(f.at(p.half));
    const auto upcast = values_of<float>(f.at(p.as_f32));
    const auto decoded = floats_of(f.at(p.half));
    REQUIRE(bits.size() == 64);
    for (std::size_t i = 0; i < 64; ++i) {
      CAPTURE(i);
      CAPTURE(src[i]);
      // torch's upcast and ours agree bit for bit (signed zeros and infinities included).
      CHECK(std::bit_cast<std::uint32_t>(decoded[i]) == std::bit_cast<std::uint32_t>(upcast[i]));
      // torch's rounding of the float32 source and ours agree.
      CHECK(p.round(src[i]) == bits[i]);
    }
  }
  // The sources cover overflow to infinity and subnormals.
  const auto h = floats_of(f.at("round_f16"));
  CHECK(std::isinf(h[4]));
  CHECK(h[7] > 0.0f);
  CHECK(h[7] < 6.1e-5f);
}

TEST_CASE("safetensors fixture from the Python library: metadata and non-ASCII names") {
  const SafetensorsFile f(test::fixture_dir("safetensors") / "python_metadata.safetensors");
  CHECK(f.metadata() == std::map<std::string, std::string>{
                            {"format", "pt"}, {"note", "héllo ✓ \"quoted\"\n"}, {"empty", ""}});
  CHECK(floats_of(f.at("emb.权重")) == std::vector<float>{1.0f, 2.0f, 3.0f});
  CHECK(f.at("emb.权重").dtype == DType::bf16);
  const auto& d = f.at("a b/c:d");
  CHECK(d.dtype == DType::f64);
  CHECK(d.shape == std::vector<std::int64_t>{1, 1});
  CHECK(values_of<double>(d) == std::vector<double>{-1.0});
}

TEST_CASE("safetensors writer reproduces the Python library's fixture files byte for byte") {
  TempDir dir;
  for (const char* name : {"python_mixed.safetensors", "python_small.safetensors"}) {
    CAPTURE(name);
    const SafetensorsFile f(test::fixture_dir("safetensors") / name);
    std::vector<TensorToWrite> tensors;
    for (const auto& e : f.entries()) tensors.push_back({e.name, e.dtype, e.shape, e.bytes});
    const auto out = dir / name;
    write_safetensors(out, tensors, f.metadata(), Checksums::none);  // as the Python writer
    CHECK(read_bytes(out) == read_bytes(test::fixture_dir("safetensors") / name));
  }
}

TEST_CASE("safetensors fixture from the Python library: names are in data-offset order") {
  const SafetensorsFile f(test::fixture_dir("safetensors") / "python_small.safetensors");
  CHECK(f.names() == std::vector<std::string>{"ids", "w", "h"});
  CHECK(values_of<std::int64_t>(f.at("ids")) == std::vector<std::int64_t>{7, -1, 3});
  CHECK(floats_of(f.at("w")) == std::vector<float>{1.0f, -2.0f, 0.5f, 4.0f});
  CHECK(floats_of(f.at("h")) == std::vector<float>{1.5f});
  const auto data_start = f.at("ids").bytes.data();
  CHECK(f.at("w").bytes.data() == data_start + 24);
  CHECK(f.at("h").bytes.data() == data_start + 40);
}

TEST_CASE("safetensors at() names the file and the missing tensor") {
  const auto path = test::fixture_dir("safetensors") / "python_small.safetensors";
  const SafetensorsFile f(path);
  try {
    (void)f.at("transformer.ln_f.weight");
    FAIL("at() accepted a missing tensor");
  } catch (const Error& e) {
    const std::string m = e.what();
    CHECK(m.find(path.string()) != std::string::npos);
    CHECK(m.find("'transformer.ln_f.weight'") != std::string::npos);
  }
}

TEST_CASE("safetensors open reports a missing file and a folder") {
  TempDir dir;
  CHECK_THROWS_AS(SafetensorsFile(dir / "nope.safetensors"), Error);
  try {
    SafetensorsFile f(dir / "nope.safetensors");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("nope.safetensors") != std::string::npos);
  }
  CHECK_THROWS_AS(SafetensorsFile(dir.path), Error);
}

TEST_CASE("safetensors files move; the moved-to object keeps the mapping") {
  SafetensorsFile a(test::fixture_dir("safetensors") / "python_small.safetensors");
  const auto* w = a.find("w");
  REQUIRE(w != nullptr);
  SafetensorsFile b(std::move(a));
  CHECK(b.find("w") == w);  // entries and their bytes did not move in memory
  CHECK(floats_of(b.at("w")) == std::vector<float>{1.0f, -2.0f, 0.5f, 4.0f});
  SafetensorsFile c(test::fixture_dir("safetensors") / "python_metadata.safetensors");
  c = std::move(b);
  CHECK(c.names() == std::vector<std::string>{"ids", "w", "h"});
  CHECK(floats_of(c.at("h")) == std::vector<float>{1.5f});
}

TEST_CASE("safetensors writer leaves the old file intact when a tensor's bytes do not match") {
  TempDir dir;
  const auto path = dir / "model.safetensors";
  const std::vector<float> old_w = {1, 2, 3, 4};
  write_safetensors(path,
                    std::vector<TensorToWrite>{{"w", DType::f32, {2, 2}, as_bytes_of(old_w)}});
  const auto before = read_bytes(path);

  const std::vector<float> ok = {5, 6};
  const std::vector<float> short_w = {1, 2, 3};
  const std::vector<TensorToWrite> bad = {{"a", DType::f32, {2}, as_bytes_of(ok)},
                                          {"w", DType::f32, {2, 2}, as_bytes_of(short_w)}};
  try {
    write_safetensors(path, bad);
    FAIL("the writer accepted 12 bytes for a 2x2 F32 tensor");
  } catch (const Error& e) {
    const std::string m = e.what();
    CHECK(m.find(path.string()) != std::string::npos);
    CHECK(m.find("'w'") != std::string::npos);
    CHECK(m.find("12 bytes; expected 16") != std::string::npos);
  }
  CHECK(read_bytes(path) == before);
  CHECK(dir.listing() == std::vector<std::string>{"model.safetensors"});
}

TEST_CASE("safetensors writer rejects duplicate names, negative shapes and the metadata key") {
  TempDir dir;
  const auto path = dir / "x.safetensors";
  const std::vector<float> v = {1, 2};
  const std::vector<std::vector<TensorToWrite>> cases = {
      {{"a", DType::f32, {2}, as_bytes_of(v)}, {"a", DType::f32, {2}, as_bytes_of(v)}},
      {{"a", DType::f32, {-2}, as_bytes_of(v)}},
      {{"a", DType::f32, {-1, -2}, as_bytes_of(v)}},
      {{"__metadata__", DType::f32, {2}, as_bytes_of(v)}},
      {{"a", DType::f32, {std::int64_t{1} << 62, 8}, as_bytes_of(v)}},
      {{"bad\xff utf8", DType::f32, {2}, as_bytes_of(v)}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.back().name);
    try {
      write_safetensors(path, c);
      FAIL("the writer accepted an invalid tensor list");
    } catch (const Error& e) {
      const std::string m = e.what();
      CHECK(m.find(path.string()) != std::string::npos);
    }
    CHECK(dir.listing().empty());
  }
}

TEST_CASE("safetensors writer removes its temporary file when the final rename fails") {
  TempDir dir;
  fs::create_directory(dir / "taken");
  fs::create_directory(dir / "taken" / "inner");
  const std::vector<float> v = {1, 2};
  CHECK_THROWS_AS(
      write_safetensors(dir / "taken",
                        std::vector<TensorToWrite>{{"a", DType::f32, {2}, as_bytes_of(v)}}),
      Error);
  CHECK(dir.listing() == std::vector<std::string>{"taken"});
  CHECK(fs::is_directory(dir / "taken" / "inner"));
}

TEST_CASE("safetensors writer reports a missing folder") {
  TempDir dir;
  const auto path = dir / "no" / "such" / "folder" / "x.safetensors";
  try {
    write_safetensors(path, std::span<const TensorToWrite>{});
    FAIL("wrote into a missing folder");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find(path.string()) != std::string::npos);
  }
  CHECK(dir.listing().empty());
}

TEST_CASE("safetensors writer replaces a file that is still mapped, keeping its permissions") {
  TempDir dir;
  const auto path = dir / "ckpt.safetensors";
  const std::vector<float> v1 = {1, 2, 3};
  const std::vector<float> v2 = {7, 8, 9, 10};
  write_safetensors(path, std::vector<TensorToWrite>{{"w", DType::f32, {3}, as_bytes_of(v1)}});
  ::chmod(path.c_str(), 0640);
  const SafetensorsFile old_file(path);
  // Rewrite the same path from tensors that point into the old mapping.
  std::vector<TensorToWrite> next = {{"w_old", DType::f32, {3}, old_file.at("w").bytes},
                                     {"w", DType::f32, {2, 2}, as_bytes_of(v2)}};
  write_safetensors(path, next, {{"step", "2"}});
  CHECK(floats_of(old_file.at("w")) == v1);
  const SafetensorsFile new_file(path);
  CHECK(floats_of(new_file.at("w_old")) == v1);
  CHECK(floats_of(new_file.at("w")) == v2);
  CHECK(new_file.metadata().at("step") == "2");
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0640);
  CHECK(dir.listing() == std::vector<std::string>{"ckpt.safetensors"});
}

TEST_CASE("safetensors writer writes in the current folder for a bare file name") {
  TempDir dir;
  const auto cwd = fs::current_path();
  fs::current_path(dir.path);
  const std::vector<std::int64_t> v = {3};
  write_safetensors("bare.safetensors",
                    std::vector<TensorToWrite>{{"n", DType::i64, {1}, as_bytes_of(v)}});
  fs::current_path(cwd);
  CHECK(values_of<std::int64_t>(SafetensorsFile(dir / "bare.safetensors").at("n")) == v);
  CHECK(dir.listing() == std::vector<std::string>{"bare.safetensors"});
}

// TorchCheckpoint refusals on synthetic archives (hand-written pickles and zips), and
// a corruption sweep over the committed fixtures: every damaged file gives a
// seqpar::Error and nothing else.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../support/sweep.hpp"
#include "seqpar/io/torch_checkpoint.hpp"
#include "test_torch_checkpoint_util.hpp"

using namespace seqpar;
using namespace seqpar::test_torch;

namespace {

using Bytes = std::vector<std::byte>;

// {'w': tensor over storage '0' of `numel` floats} with the given view.
Bytes one_tensor_pickle(std::int64_t numel, std::int64_t offset, std::vector<std::int64_t> shape,
                        std::vector<std::int64_t> strides, std::string_view type = "FloatStorage") {
  PickleWriter p;
  p.proto()
      .op('}')
      .mark()
      .str("w")
      .tensor(type, "0", numel, offset, shape, strides)
      .op('u')
      .op('.');
  return p.bytes();
}

Bytes one_tensor_checkpoint(std::int64_t numel, std::int64_t offset,
                            std::vector<std::int64_t> shape, std::vector<std::int64_t> strides) {
  return make_checkpoint(one_tensor_pickle(numel, offset, shape, strides),
                         {{"0", f32_bytes("w", numel)}});
}

// A checkpoint {'w': <tensor>, 'x': <what the writer adds>}.
template <class F>
Bytes with_value(F&& add_value) {
  PickleWriter p;
  p.proto().op('}').mark().str("w").tensor("FloatStorage", "0", 4, 0, {4}, {1}).str("x");
  add_value(p);
  p.op('u').op('.');
  return make_checkpoint(p.bytes(), {{"0", f32_bytes("w", 4)}});
}

void check_error(const Bytes& file, std::initializer_list<std::string_view> parts) {
  const std::string msg = index_error(file, "synthetic.bin");
  CAPTURE(msg);
  CHECK(msg.rfind("synthetic.bin: ", 0) == 0);
  for (auto part : parts) CHECK(msg.find(part) != std::string::npos);
}

}  // namespace

TEST_CASE("torch synthetic checkpoint: the baseline loads and reads the formula") {
  const Bytes file = one_tensor_checkpoint(12, 2, {2, 3}, {4, 1});
  const ExactBuffer buf(file);
  const auto index = detail::index_torch_checkpoint(buf.span(), "synthetic.bin");
  REQUIRE(index.entries.size() == 1);
  const TensorEntry& e = index.entries[0];
  CHECK(e.name == "w");
  CHECK(e.shape == std::vector<std::int64_t>{2, 3});
  CHECK(e.bytes.size() == 10 * 4);
  std::vector<float> v(6);
  read_tensor<float>(e, v);
  const std::int64_t storage_index[] = {2, 3, 4, 6, 7, 8};
  for (int i = 0; i < 6; ++i)
    CHECK(v[i] == static_cast<float>(formula_float("w", storage_index[i])));
  CHECK(index_error(with_value([](PickleWriter& p) { p.integer(-5); })).empty());
  CHECK(index_error(with_value([](PickleWriter& p) { p.op('N'); })).empty());
}

TEST_CASE("torch synthetic checkpoint: disallowed globals are refused") {
  const std::pair<std::string_view, std::string_view> globals[] = {
      {"os", "system"},
      {"builtins", "eval"},
      {"builtins", "exec"},
      {"posix", "system"},
      {"subprocess", "Popen"},
      {"torch", "load"},
      {"torch._utils", "_rebuild_tensor"},
      {"collections", "defaultdict"},
      {"torch._utils", "_rebuild_tensor_v2 "},  // a near miss is not a match
  };
  for (const auto& [module, name] : globals) {
    CAPTURE(name);
    const std::string spelled = "'" + std::string(module) + "." + std::string(name) + "'";
    check_error(with_value([&](PickleWriter& p) { p.global(module, name); }),
                {spelled, "is not allowed"});
    // STACK_GLOBAL (protocol 4) goes through the same list.
    check_error(with_value([&](PickleWriter& p) { p.str(module).str(name).op(0x93); }),
                {spelled, "is not allowed"});
  }
  // How torch saves dtypes outside DType (float8, complex, uint16, ...).
  const std::pair<std::string_view, std::string_view> other_dtypes[] = {
      {"torch.storage", "UntypedStorage"},
      {"torch._utils", "_rebuild_tensor_v3"},
      {"torch", "ComplexFloatStorage"},
      {"torch", "QInt8Storage"},
  };
  for (const auto& [module, name] : other_dtypes) {
    CAPTURE(name);
    const std::string spelled = "'" + std::string(module) + "." + std::string(name) + "'";
    check_error(with_value([&](PickleWriter& p) { p.global(module, name); }),
                {spelled, "a dtype that is not supported"});
  }
}

TEST_CASE("torch synthetic checkpoint: opcodes outside the allowed set are refused") {
  const std::pair<std::uint8_t, std::string_view> ops[] = {
      {0xff, "0xff (unknown opcode)"},
      {0x81, "(NEWOBJ)"},
      {0x92, "(NEWOBJ_EX)"},
      {'i', "(INST)"},
      {'o', "(OBJ)"},
      {0x82, "(EXT1)"},
      {'P', "(PERSID)"},
      {'S', "(STRING)"},
      {'I', "(INT)"},
      {0x8f, "(EMPTY_SET)"},
      {'C', "(SHORT_BINBYTES)"},
      {0x97, "(NEXT_BUFFER)"},
  };
  for (const auto& [op, name] : ops) {
    CAPTURE(name);
    check_error(with_value([&](PickleWriter& p) { p.op(op); }), {name, "is not allowed"});
  }
}

TEST_CASE("torch synthetic checkpoint: REDUCE only calls OrderedDict and the rebuild functions") {
  check_error(
      with_value([](PickleWriter& p) { p.global("torch", "FloatStorage").op(')').reduce(); }),
      {"REDUCE calls 'torch.FloatStorage'", "not allowed"});
  check_error(with_value([](PickleWriter& p) { p.global("torch", "float16").op(')').reduce(); }),
              {"REDUCE calls 'torch.float16'"});
  check_error(with_value([](PickleWriter& p) { p.str("os.system").op(')').reduce(); }),
              {"not an allowed callable"});
  check_error(with_value([](PickleWriter& p) {
                p.global("collections", "OrderedDict").mark().op(']').tuple().reduce();
              }),
              {"OrderedDict called with arguments"});
  check_error(with_value([](PickleWriter& p) {
                p.global("torch._utils", "_rebuild_tensor_v2").ints({1, 2}).reduce();
              }),
              {"_rebuild_tensor_v2 called with 2 arguments"});
  check_error(with_value([](PickleWriter& p) {
                p.global("torch._utils", "_rebuild_parameter")
                    .mark()
                    .integer(1)
                    .op(0x89)
                    .op('N')
                    .tuple()
                    .reduce();
              }),
              {"without a tensor"});
  check_error(with_value([](PickleWriter& p) {
                p.global("torch._utils", "_rebuild_tensor_v2").integer(3).reduce();
              }),
              {"arguments are not a tuple"});
  // BUILD sets state only on dicts (the _metadata of a state dict).
  check_error(with_value([](PickleWriter& p) { p.integer(3).op('}').op('b'); }),
              {"BUILD applies state"});
}

TEST_CASE("torch synthetic checkpoint: malformed persistent ids and views are refused") {
  auto pid = [](auto&& fill) {
    return with_value([&](PickleWriter& p) {
      p.mark();
      fill(p);
      p.tuple().op('Q');
    });
  };
  check_error(pid([](PickleWriter& p) {
                p.str("module").global("torch", "FloatStorage").str("0").str("cpu").integer(4);
              }),
              {"not a storage"});
  check_error(
      pid([](PickleWriter& p) {
        p.str("storage").global("collections", "OrderedDict").str("0").str("cpu").integer(4);
      }),
      {"does not name a torch storage type"});
  check_error(pid([](PickleWriter& p) { p.str("storage").str("0"); }), {"not a 5-tuple"});
  check_error(pid([](PickleWriter& p) {
                p.str("storage").global("torch", "FloatStorage").str("0").str("cpu").integer(-4);
              }),
              {"is negative"});

  check_error(one_tensor_checkpoint(12, 2, {2, 3}, {8, 1}), {"tensor 'w'", "reaches element 12"});
  check_error(one_tensor_checkpoint(12, 13, {0}, {1}), {"tensor 'w'", "storage offset 13"});
  check_error(one_tensor_checkpoint(12, 12, {1}, {1}), {"reaches element 12"});
  check_error(one_tensor_checkpoint(12, 0, {-1}, {1}), {"negative or overflowing"});
  check_error(one_tensor_checkpoint(12, 0, {2}, {-1}), {"negative or overflowing"});
  check_error(one_tensor_checkpoint(12, -1, {2}, {1}), {"negative or overflowing"});
  check_error(one_tensor_checkpoint(12, 0, {std::int64_t{1} << 40, std::int64_t{1} << 40}, {1, 1}),
              {"negative or overflowing"});
  check_error(one_tensor_checkpoint(12, 0, {3, 2}, {std::int64_t{1} << 62, 1}),
              {"negative or overflowing"});
  // A size tuple and a stride tuple of different lengths.
  check_error(make_checkpoint(one_tensor_pickle(12, 0, {2, 3}, {3}), {{"0", f32_bytes("w", 12)}}),
              {"2 dimensions but its stride has 1"});
  // Empty views may sit at the end of their storage.
  CHECK(index_error(one_tensor_checkpoint(12, 12, {0, 5}, {5, 1})).empty());
}

TEST_CASE("torch synthetic checkpoint: missing or inconsistent records are refused") {
  const Bytes pkl = one_tensor_pickle(12, 0, {12}, {1});
  check_error(make_checkpoint(pkl, {}),
              {"tensor 'w'", "storage record 'archive/data/0'", "does not have"});
  check_error(make_checkpoint(pkl, {{"0", f32_bytes("w", 11)}}),
              {"'archive/data/0'", "has 44 bytes; expected 12 elements of F32"});
  check_error(make_zip({{"archive/version", bytes_of("3\n")}}), {"no 'archive/data.pkl' record"});
  check_error(make_zip({}), {"empty zip archive"});
  check_error(make_zip({{"data.pkl", pkl}}), {"record 'data.pkl' is not inside a folder"});
  check_error(make_zip({{"archive/data.pkl", pkl}, {"archive/constants.pkl", {}}}),
              {"TorchScript archive"});
  // Two tensors viewing one storage as different types.
  PickleWriter p;
  p.proto().op('}').mark();
  p.str("a").tensor("FloatStorage", "0", 4, 0, {4}, {1});
  p.str("b").tensor("IntStorage", "0", 4, 0, {4}, {1});
  p.op('u').op('.');
  check_error(make_checkpoint(p.bytes(), {{"0", f32_bytes("w", 4)}}),
              {"tensor 'b' views storage '0' as 4 I32", "another tensor views it as 4 F32"});
}

TEST_CASE("torch synthetic checkpoint: compressed, encrypted, big-endian and duplicate records") {
  const Bytes pkl = one_tensor_pickle(4, 0, {4}, {1});
  auto archive = [&](std::uint16_t data_method, std::uint16_t data_flags, std::string order) {
    return make_zip({{"archive/data.pkl", pkl},
                     {"archive/byteorder", bytes_of(order)},
                     {"archive/data/0", f32_bytes("w", 4), data_method, data_flags}});
  };
  CHECK(index_error(archive(0, 0, "little")).empty());
  check_error(archive(8, 0, "little"), {"'archive/data/0' is compressed (method 8)"});
  check_error(archive(0, 1, "little"), {"'archive/data/0' is encrypted"});
  check_error(archive(0, 0, "big"), {"byte order 'big' is not supported"});
  check_error(make_zip({{"archive/data.pkl", pkl, 8}}), {"'archive/data.pkl' is compressed"});
  check_error(make_zip({{"archive/data.pkl", pkl}, {"archive/data.pkl", pkl}}),
              {"record 'archive/data.pkl' appears twice"});
}

TEST_CASE("torch synthetic checkpoint: malformed pickles are refused") {
  auto archive = [](const PickleWriter& p) { return make_checkpoint(p.bytes(), {}); };
  check_error(archive(PickleWriter().proto().op('}')), {"truncated pickle", "without STOP"});
  check_error(archive(PickleWriter().proto().op('}').op('}').op('.')), {"STOP leaves 2 objects"});
  check_error(archive(PickleWriter().proto().op('.')), {"STOP leaves 0 objects"});
  check_error(archive(PickleWriter().proto().op('R')), {"stack underflow"});
  check_error(archive(PickleWriter().proto().op('}').op('t')), {"no MARK"});
  check_error(archive(PickleWriter().proto().op('h').op(7)), {"memo entry 7 was never stored"});
  check_error(archive(PickleWriter().proto(6)), {"pickle protocol 6 is not supported"});
  check_error(archive(PickleWriter().proto().op(0x8a).op(9)), {"9 bytes does not fit in 64 bits"});
  check_error(archive(PickleWriter().proto().op('X').op(0xff).op(0xff).op(0xff).op(0x7f)),
              {"truncated pickle"});
  check_error(archive(PickleWriter().proto().op('c').raw("os")), {"truncated pickle"});
  // Items below a MARK belong to the enclosing construct.
  check_error(archive(PickleWriter().proto().op('}').mark().op(0x85)), {"stack underflow"});
  check_error(archive(PickleWriter().proto().op(']').str("k").op('N').op('s').op('.')),
              {"SETITEM applied to an object of the wrong type"});
  check_error(archive(PickleWriter().proto().op('}').mark().op('N').op('u').op('.')),
              {"odd number of items"});
  // The root must be a dict.
  check_error(archive(PickleWriter().proto().op(']').op('.')),
              {"data.pkl holds an object of type list, not a dict"});
  check_error(archive(PickleWriter().proto().integer(3).op('.')),
              {"data.pkl holds an object of type int"});
}

TEST_CASE("torch synthetic checkpoint: one level of nesting, and repeated names are refused") {
  PickleWriter p;
  p.proto().op('}').mark();
  p.str("m").op('}').mark().str("w").tensor("FloatStorage", "0", 4, 0, {4}, {1}).op('u');
  p.str("m.w").tensor("FloatStorage", "0", 4, 0, {4}, {1});
  p.op('u').op('.');
  check_error(make_checkpoint(p.bytes(), {{"0", f32_bytes("w", 4)}}), {"'m.w' appears twice"});

  // Non-string keys, deeper dicts and lists are skipped.
  PickleWriter q;
  q.proto().op('}').mark();
  q.integer(1).tensor("FloatStorage", "0", 4, 0, {4}, {1});
  q.str("deep").op('}').str("inner").op('}').str("w");
  q.tensor("FloatStorage", "0", 4, 0, {4}, {1}).op('s').op('s');
  q.str("list").op(']').tensor("FloatStorage", "0", 4, 0, {4}, {1}).op('a');
  q.str("kept").tensor("FloatStorage", "0", 4, 1, {3}, {1});
  q.op('u').op('.');
  const auto index = index_bytes(make_checkpoint(q.bytes(), {{"0", f32_bytes("w", 4)}}));
  REQUIRE(index.entries.size() == 1);
  CHECK(index.entries[0].name == "kept");
}

TEST_CASE("torch checkpoint files that are not torch.save zips are refused") {
  const auto dir = std::filesystem::temp_directory_path() / "seqpar_torch_checkpoint_test";
  std::filesystem::create_directories(dir);
  auto error_of = [&](const std::string& name, const Bytes& content) {
    const auto path = dir / name;
    write_bytes(path, content);
    try {
      TorchCheckpoint ck(path);
    } catch (const Error& e) {
      const std::string msg = e.what();
      CHECK(msg.find(path.string()) != std::string::npos);
      return msg;
    }
    return std::string();
  };
  CHECK(error_of("empty.bin", {}).find("too short") != std::string::npos);
  CHECK(error_of("text.bin", bytes_of("hello, this is not a checkpoint at all"))
            .find("not a zip archive") != std::string::npos);
  CHECK(error_of("pickle.bin", bytes_of("\x80\x02}q\x00.")).find("a bare pickle") !=
        std::string::npos);
  Bytes tar(1024, std::byte{0});
  std::memcpy(tar.data() + 257, "ustar", 5);
  CHECK(error_of("old.tar", tar).find("a tar archive") != std::string::npos);
  // A synthetic archive written to disk loads through the public constructor.
  CHECK(error_of("ok.bin", one_tensor_checkpoint(4, 0, {4}, {1})).empty());
  const TorchCheckpoint ck(dir / "ok.bin");
  CHECK(ck.names() == std::vector<std::string>{"w"});

  const auto missing = dir / "missing.bin";
  try {
    TorchCheckpoint bad(missing);
    FAIL("opening a missing file did not throw");
  } catch (const MissingFile& e) {  // FileNotFoundError in Python
    CHECK(std::string(e.what()).find(missing.string() + ": no such file") != std::string::npos);
  }
  try {
    TorchCheckpoint bad(dir);
    FAIL("opening a directory did not throw");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("not a regular file") != std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

namespace {

// Indexes `bytes` from an exact-size heap copy; on success reads every tensor. Any
// exception other than seqpar::Error escapes and fails the test.
bool load_and_read(std::span<const std::byte> bytes) {
  const ExactBuffer buf(bytes);
  try {
    const auto index = detail::index_torch_checkpoint(buf.span(), "damaged.bin");
    std::uint64_t sum = 0;
    for (const auto& e : index.entries) {
      // Every byte of the span lies inside the buffer (a sanitizer catches a read past it).
      for (std::byte b : e.bytes) sum += static_cast<std::uint8_t>(b);
      if (e.dtype == DType::f32 || e.dtype == DType::f16 || e.dtype == DType::bf16 ||
          e.dtype == DType::f64) {
        std::vector<double> v(static_cast<std::size_t>(e.numel()));
        read_tensor<double>(e, v);
      }
    }
    return sum != ~std::uint64_t{0};
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

TEST_CASE(
    "torch fixtures corruption sweep: truncations and flipped bytes give seqpar::Error only") {
  const std::string files[] = {"bloom_tiny_f16.bin", "dtypes.bin", "views.bin",
                               "nested.bin",         "proto4.bin", "zip64.bin"};
  std::mt19937 rng(1234);
  const std::size_t stride = test::sweep_stride();  // every position unless CI's ASan stage
  for (const std::string& name : files) {
    CAPTURE(name);
    const Bytes original = read_bytes(fixture(name));
    REQUIRE(original.size() > 100);
    REQUIRE(load_and_read(original));
    const std::size_t n = original.size();

    // Every truncation loses the end record, so none of them loads.
    std::size_t truncated_loads = 0;
    for (std::size_t len = 0; len < n; len += stride)
      if (load_and_read(std::span(original).first(len))) ++truncated_loads;
    CHECK(truncated_loads == 0);

    // Flips of single bits and whole bytes at every position, and runs of 0xff that
    // turn lengths and offsets huge.
    std::size_t loads = 0, errors = 0;
    Bytes damaged = original;
    for (std::size_t pos = 0; pos < n; pos += stride) {
      for (std::uint8_t mask : {std::uint8_t{0x01}, std::uint8_t{0xff}}) {
        damaged[pos] ^= std::byte{mask};
        (load_and_read(damaged) ? loads : errors)++;
        damaged[pos] = original[pos];
      }
      const std::size_t run = std::min<std::size_t>(4, n - pos);
      for (std::size_t k = 0; k < run; ++k) damaged[pos + k] = std::byte{0xff};
      (load_and_read(damaged) ? loads : errors)++;
      for (std::size_t k = 0; k < run; ++k) damaged[pos + k] = original[pos + k];
    }
    // Random multi-byte damage.
    for (int trial = 0; trial < 1000 / static_cast<int>(stride); ++trial) {
      const int flips = 1 + static_cast<int>(rng() % 8);
      for (int f = 0; f < flips; ++f) damaged[rng() % n] = static_cast<std::byte>(rng() & 0xff);
      (load_and_read(damaged) ? loads : errors)++;
      damaged = original;
    }
    MESSAGE(name, ": ", n, " bytes; damaged copies: ", loads, " loaded, ", errors,
            " refused with seqpar::Error");
    CHECK(errors > 0);
  }
}

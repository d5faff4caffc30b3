#pragma once
// Helpers of the PyTorch checkpoint tests: the fixture value formula (the same as
// tools/make_torch_fixtures.py), raw element access, a minimal safetensors reader
// for cross-checks, and writers of stored zip archives and pickles for synthetic
// files.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../support/files.hpp"
#include "seqpar/io/torch_checkpoint.hpp"

namespace seqpar::test_torch {

inline std::filesystem::path fixture(std::string_view name) {
  return std::filesystem::path(SEQPAR_TEST_DIR) / "fixtures" / "torch" / name;
}

// seed(name) = byte sum mod 61; k(name, i) = (7 i + seed) mod 61.
inline std::int64_t formula_k(std::string_view name, std::int64_t i) {
  std::int64_t s = 0;
  for (unsigned char c : name) s += c;
  return (7 * i + s % 61) % 61;
}
inline double formula_float(std::string_view name, std::int64_t i) {
  return static_cast<double>(formula_k(name, i)) * 0.25 - 7.5;
}
// The integer value the fixtures store for element i of an integer tensor.
inline std::int64_t formula_int(DType dtype, std::string_view name, std::int64_t i) {
  const std::int64_t k = formula_k(name, i);
  switch (dtype) {
    case DType::i64: return k - 30 + (i % 3) * (std::int64_t{1} << 40);
    case DType::i32: return (k - 30) * 1000;
    case DType::i16: return (k - 30) * 100;
    case DType::i8: return k - 30;
    case DType::u8: return k * 4;
    case DType::boolean: return k % 2;
    default: return 0;
  }
}

// Element offsets (in elements, from the first element) of a tensor in row-major order.
inline std::vector<std::int64_t> element_offsets(const TensorEntry& e) {
  std::vector<std::int64_t> out;
  const std::int64_t n = e.numel();
  std::vector<std::int64_t> idx(e.shape.size(), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t off = 0;
    for (std::size_t d = 0; d < idx.size(); ++d) off += idx[d] * e.strides[d];
    out.push_back(off);
    for (std::size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < e.shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// An integer element read straight from the bytes.
inline std::int64_t load_int(const TensorEntry& e, std::int64_t off) {
  const std::byte* p = e.bytes.data() + off * static_cast<std::int64_t>(dtype_size(e.dtype));
  switch (e.dtype) {
    case DType::i64: {
      std::int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case DType::i32: {
      std::int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::i16: {
      std::int16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case DType::i8: return static_cast<std::int8_t>(*p);
    case DType::u8:
    case DType::boolean: return static_cast<std::uint8_t>(*p);
    default: return 0;
  }
}

// The tensor's elements, gathered to row-major order, as raw bytes.
inline std::vector<std::byte> gather_bytes(const TensorEntry& e) {
  const std::size_t es = dtype_size(e.dtype);
  std::vector<std::byte> out;
  for (auto off : element_offsets(e)) {
    const std::byte* p = e.bytes.data() + off * static_cast<std::int64_t>(es);
    out.insert(out.end(), p, p + es);
  }
  return out;
}

using test::read_bytes;
using test::write_bytes;

/// A tensor of a safetensors file: dtype name, shape and its row-major bytes.
struct SafeTensor {
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> bytes;
};

// Independent of the library's own safetensors reader: 8-byte header length, JSON header,
// data.
inline std::map<std::string, SafeTensor> read_safetensors(const std::filesystem::path& path) {
  const auto file = read_bytes(path);
  std::uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  const auto header = nlohmann::json::parse(std::string_view(
      reinterpret_cast<const char*>(file.data()) + 8, static_cast<std::size_t>(n)));
  std::map<std::string, SafeTensor> out;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") continue;
    SafeTensor t;
    t.dtype = v["dtype"].get<std::string>();
    t.shape = v["shape"].get<std::vector<std::int64_t>>();
    const auto begin = v["data_offsets"][0].get<std::size_t>();
    const auto end = v["data_offsets"][1].get<std::size_t>();
    const auto* base = file.data() + 8 + n;
    t.bytes.assign(base + begin, base + end);
    out.emplace(name, std::move(t));
  }
  return out;
}

/// A heap copy of exactly `bytes.size()` bytes, so that a sanitizer sees any read past it.
struct ExactBuffer {
  explicit ExactBuffer(std::span<const std::byte> bytes)
      : data(new std::byte[bytes.size() == 0 ? 1 : bytes.size()]), size(bytes.size()) {
    if (size > 0) std::memcpy(data.get(), bytes.data(), size);
  }
  std::span<const std::byte> span() const { return {data.get(), size}; }
  std::unique_ptr<std::byte[]> data;
  std::size_t size;
};

// ---- writers of synthetic archives ----

inline std::uint32_t crc32(std::span<const std::byte> data) {
  std::uint32_t c = 0xffffffffu;
  for (std::byte b : data) {
    c ^= static_cast<std::uint8_t>(b);
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return ~c;
}

/// One record of a synthetic zip archive.
struct ZipEntry {
  std::string name;
  std::vector<std::byte> data;
  std::uint16_t method = 0;
  std::uint16_t flags = 0;
};

inline void put_le(std::vector<std::byte>& out, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xffu));
}

inline std::vector<std::byte> bytes_of(std::string_view s) {
  std::vector<std::byte> out(s.size());
  if (!s.empty()) std::memcpy(out.data(), s.data(), s.size());
  return out;
}

/// A zip archive written the plain way: local headers, data, central directory, end record.
inline std::vector<std::byte> make_zip(const std::vector<ZipEntry>& entries) {
  std::vector<std::byte> out, central;
  for (const auto& e : entries) {
    const std::uint64_t offset = out.size();
    const std::uint32_t crc = crc32(e.data);
    put_le(out, 0x04034b50u, 4);
    put_le(out, 20, 2);
    put_le(out, e.flags, 2);
    put_le(out, e.method, 2);
    put_le(out, 0, 4);  // time, date
    put_le(out, crc, 4);
    put_le(out, e.data.size(), 4);
    put_le(out, e.data.size(), 4);
    put_le(out, e.name.size(), 2);
    put_le(out, 0, 2);
    const auto name = bytes_of(e.name);
    out.insert(out.end(), name.begin(), name.end());
    out.insert(out.end(), e.data.begin(), e.data.end());

    put_le(central, 0x02014b50u, 4);
    put_le(central, 20, 2);
    put_le(central, 20, 2);
    put_le(central, e.flags, 2);
    put_le(central, e.method, 2);
    put_le(central, 0, 4);
    put_le(central, crc, 4);
    put_le(central, e.data.size(), 4);
    put_le(central, e.data.size(), 4);
    put_le(central, e.name.size(), 2);
    put_le(central, 0, 2);  // extra
    put_le(central, 0, 2);  // comment
    put_le(central, 0, 2);  // disk
    put_le(central, 0, 2);  // internal attributes
    put_le(central, 0, 4);  // external attributes
    put_le(central, offset, 4);
    central.insert(central.end(), name.begin(), name.end());
  }
  const std::uint64_t cd_offset = out.size();
  out.insert(out.end(), central.begin(), central.end());
  put_le(out, 0x06054b50u, 4);
  put_le(out, 0, 2);
  put_le(out, 0, 2);
  put_le(out, entries.size(), 2);
  put_le(out, entries.size(), 2);
  put_le(out, central.size(), 4);
  put_le(out, cd_offset, 4);
  put_le(out, 0, 2);
  return out;
}

/// Writes pickle opcodes.
class PickleWriter {
 public:
  PickleWriter& op(std::uint8_t code) {
    out_.push_back(static_cast<std::byte>(code));
    return *this;
  }
  PickleWriter& raw(std::string_view s) {
    for (char c : s) out_.push_back(static_cast<std::byte>(c));
    return *this;
  }
  PickleWriter& proto(int p = 2) { return op(0x80).op(static_cast<std::uint8_t>(p)); }
  PickleWriter& str(std::string_view s) {
    op('X');
    put_le(out_, s.size(), 4);
    return raw(s);
  }
  PickleWriter& integer(std::int64_t v) {
    if (v >= 0 && v < 256) return op('K').op(static_cast<std::uint8_t>(v));
    if (v >= INT32_MIN && v <= INT32_MAX) {
      op('J');
      put_le(out_, static_cast<std::uint32_t>(v), 4);
      return *this;
    }
    op(0x8a).op(8);
    put_le(out_, static_cast<std::uint64_t>(v), 8);
    return *this;
  }
  PickleWriter& global(std::string_view module, std::string_view name) {
    return op('c').raw(module).raw("\n").raw(name).raw("\n");
  }
  PickleWriter& mark() { return op('('); }
  PickleWriter& tuple() { return op('t'); }
  PickleWriter& reduce() { return op('R'); }
  PickleWriter& ints(const std::vector<std::int64_t>& v) {
    mark();
    for (auto x : v) integer(x);
    return tuple();
  }
  /// _rebuild_tensor_v2(('storage', torch.<type>, key, 'cpu', numel), offset, shape, strides,
  /// False, OrderedDict())
  PickleWriter& tensor(std::string_view storage_type, std::string_view key, std::int64_t numel,
                       std::int64_t offset, const std::vector<std::int64_t>& shape,
                       const std::vector<std::int64_t>& strides) {
    global("torch._utils", "_rebuild_tensor_v2").mark();
    mark().str("storage").global("torch", storage_type).str(key).str("cpu").integer(numel).tuple();
    op('Q').integer(offset).ints(shape).ints(strides).op(0x89);
    global("collections", "OrderedDict").op(')').reduce();
    return tuple().reduce();
  }
  std::vector<std::byte> bytes() const { return out_; }

 private:
  std::vector<std::byte> out_;
};

inline std::vector<std::byte> f32_bytes(std::string_view name, std::int64_t n) {
  std::vector<std::byte> out(static_cast<std::size_t>(n) * 4);
  for (std::int64_t i = 0; i < n; ++i) {
    const float f = static_cast<float>(formula_float(name, i));
    std::memcpy(out.data() + i * 4, &f, 4);
  }
  return out;
}

/// A torch.save-like archive "archive/..." around a pickle and storage records.
inline std::vector<std::byte> make_checkpoint(
    std::vector<std::byte> pickle,
    std::vector<std::pair<std::string, std::vector<std::byte>>> storages,
    std::string_view prefix = "archive") {
  std::vector<ZipEntry> entries;
  entries.push_back({std::string(prefix) + "/data.pkl", std::move(pickle)});
  entries.push_back({std::string(prefix) + "/byteorder", bytes_of("little")});
  for (auto& [key, data] : storages)
    entries.push_back({std::string(prefix) + "/data/" + key, std::move(data)});
  entries.push_back({std::string(prefix) + "/version", bytes_of("3\n")});
  return make_zip(entries);
}

/// Indexes an in-memory archive from an exact-size heap copy.
inline detail::TorchIndex index_bytes(std::span<const std::byte> bytes,
                                      const std::string& file = "synthetic.bin") {
  const ExactBuffer buf(bytes);
  auto index = detail::index_torch_checkpoint(buf.span(), file);
  // The spans point into buf, which is freed here: callers only look at metadata.
  for (auto& e : index.entries) e.bytes = {};
  return index;
}

/// The message of the seqpar::Error that indexing `bytes` throws, or "" when it loads.
inline std::string index_error(std::span<const std::byte> bytes,
                               const std::string& file = "synthetic.bin") {
  try {
    index_bytes(bytes, file);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace seqpar::test_torch

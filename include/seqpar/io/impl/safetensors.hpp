#pragma once
// The definitions of io/safetensors.hpp: in its headers' units, or compiled once
// (core/separate_compilation.hpp).

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "seqpar/core/crc32c.hpp"
#include "seqpar/io/atomic_file.hpp"
#include "seqpar/io/detail/json_kind.hpp"
#include "seqpar/io/detail/json_unique.hpp"
#include "seqpar/io/safetensors.hpp"

namespace seqpar::inline v0 {

namespace detail::safetensors {

// The reference implementation refuses headers above 100 MB; a header is valid below it.
inline constexpr std::uint64_t header_limit = 100'000'000;

// Deeper than any valid header (object > entry > shape array); bounds the parser's work.
inline constexpr int max_depth = 64;

inline constexpr std::array<DType, 10> supported = {
    DType::f64, DType::f32, DType::f16, DType::bf16, DType::i64,
    DType::i32, DType::i16, DType::i8,  DType::u8,   DType::boolean};

// Valid safetensors dtypes that have no DType.
inline constexpr std::array<std::string_view, 10> unsupported_dtypes = {
    "F4", "F6_E2M3", "F6_E3M2", "F8_E5M2", "F8_E4M3", "F8_E8M0", "U16", "U32", "U64", "C64"};

inline std::optional<DType> dtype_from_name(std::string_view name) {
  for (DType t : supported)
    if (dtype_name(t) == name) return t;
  return std::nullopt;
}

inline std::string supported_dtypes() {
  std::string s;
  for (DType t : supported) {
    if (!s.empty()) s += ' ';
    s += dtype_name(t);
  }
  return s;
}

// Product of the dims, or nullopt when the product of the non-zero dims exceeds int64.
// Bounding the non-zero product bounds every partial product, so numel() and
// contiguous_strides() cannot overflow on an accepted shape, even one holding a zero.
inline std::optional<std::int64_t> checked_numel(std::span<const std::int64_t> shape) {
  std::int64_t nonzero = 1;
  bool has_zero = false;
  for (auto d : shape) {
    if (d == 0) {
      has_zero = true;
      continue;
    }
    if (d < 0 || nonzero > std::numeric_limits<std::int64_t>::max() / d) return std::nullopt;
    nonzero *= d;
  }
  return has_zero ? 0 : nonzero;
}

// Byte size of numel elements, or nullopt when it does not fit in 64 bits.
inline std::optional<std::uint64_t> checked_nbytes(std::int64_t numel, DType dtype) {
  const auto n = static_cast<std::uint64_t>(numel);
  const std::uint64_t esize = dtype_size(dtype);
  if (n > std::numeric_limits<std::uint64_t>::max() / esize) return std::nullopt;
  return n * esize;
}

// Reads one non-negative integer field value; `what` names it in errors ("shape[1]").
inline std::uint64_t header_uint(const nlohmann::json& v, const std::string& file,
                                 const std::string& tensor, const std::string& what) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer()) {
    const auto i = v.get<std::int64_t>();
    SEQPAR_CHECK(i >= 0, file, ": tensor '", tensor, "': ", what, " is ", i,
                 "; expected a non-negative integer");
    return static_cast<std::uint64_t>(i);
  }
  fail(file, ": tensor '", tensor, "': ", what, " is ", json_kind(v),
       "; expected a non-negative integer");
}

struct HeaderTensor {
  TensorEntry entry;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

inline HeaderTensor parse_header_tensor(const std::string& name, const nlohmann::json& v,
                                        const std::string& file) {
  SEQPAR_CHECK(v.is_object(), file, ": tensor '", name, "': entry is ", json_kind(v),
               "; expected an object with dtype, shape and data_offsets");
  HeaderTensor t;
  t.entry.name = name;
  t.entry.file = file;

  const auto dt = v.find("dtype");
  SEQPAR_CHECK(dt != v.end(), file, ": tensor '", name, "' has no 'dtype'");
  SEQPAR_CHECK(dt->is_string(), file, ": tensor '", name, "': 'dtype' is ", json_kind(*dt),
               "; expected a string such as \"F32\"");
  const auto& dtype_str = dt->get_ref<const std::string&>();
  const auto dtype = dtype_from_name(dtype_str);
  if (!dtype) {
    const bool known = std::find(unsupported_dtypes.begin(), unsupported_dtypes.end(), dtype_str) !=
                       unsupported_dtypes.end();
    if (known)
      fail(file, ": tensor '", name, "': dtype ", dtype_str, " is not supported; expected one of ",
           supported_dtypes());
    fail(file, ": tensor '", name, "': unknown dtype '", dtype_str, "'; expected one of ",
         supported_dtypes());
  }
  t.entry.dtype = *dtype;

  const auto sh = v.find("shape");
  SEQPAR_CHECK(sh != v.end(), file, ": tensor '", name, "' has no 'shape'");
  SEQPAR_CHECK(sh->is_array(), file, ": tensor '", name, "': 'shape' is ", json_kind(*sh),
               "; expected an array of non-negative integers");
  t.entry.shape.reserve(sh->size());
  for (std::size_t i = 0; i < sh->size(); ++i) {
    const std::string what = "shape[" + std::to_string(i) + "]";
    const std::uint64_t d = header_uint((*sh)[i], file, name, what);
    SEQPAR_CHECK(d <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()), file,
                 ": tensor '", name, "': ", what, " is ", d, "; expected at most 2^63 - 1");
    t.entry.shape.push_back(static_cast<std::int64_t>(d));
  }
  const auto numel = checked_numel(t.entry.shape);
  SEQPAR_CHECK(numel.has_value(), file, ": tensor '", name, "': shape ",
               shape_string(t.entry.shape),
               " has more elements than a 64-bit count holds; expected a real tensor shape");
  t.entry.strides = contiguous_strides(t.entry.shape);

  const auto off = v.find("data_offsets");
  SEQPAR_CHECK(off != v.end(), file, ": tensor '", name, "' has no 'data_offsets'");
  SEQPAR_CHECK(off->is_array() && off->size() == 2, file, ": tensor '", name,
               "': 'data_offsets' is ", json_kind(*off),
               off->is_array() ? " of " + std::to_string(off->size()) + " values" : "",
               "; expected an array [begin, end] of two non-negative integers");
  t.begin = header_uint((*off)[0], file, name, "data_offsets[0]");
  t.end = header_uint((*off)[1], file, name, "data_offsets[1]");
  SEQPAR_CHECK(t.begin <= t.end, file, ": tensor '", name, "': data_offsets [", t.begin, ", ",
               t.end, "] begin after end; expected begin <= end");

  const auto nbytes = checked_nbytes(*numel, t.entry.dtype);
  SEQPAR_CHECK(nbytes.has_value(), file, ": tensor '", name, "': shape ",
               shape_string(t.entry.shape), " of ", dtype_str,
               " needs more bytes than 64 bits count; expected a real tensor shape");
  SEQPAR_CHECK(t.end - t.begin == *nbytes, file, ": tensor '", name, "': data_offsets [", t.begin,
               ", ", t.end, "] hold ", t.end - t.begin, " bytes; expected ", *nbytes, " (", *numel,
               " elements of ", dtype_str, ", shape ", shape_string(t.entry.shape), ")");
  return t;
}

// A checksum as the metadata holds it: eight hex digits.
inline std::string checksum_text(std::uint32_t crc) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", static_cast<unsigned>(crc));
  return text;
}

inline std::uint32_t parse_checksum(const std::string& text, const std::string& file,
                                    const std::string& key) {
  // Lowercase only, as written: then no change to the text leaves its value alone.
  const bool hex =
      text.size() == 8 && text.find_first_not_of("0123456789abcdef") == std::string::npos;
  SEQPAR_CHECK(hex, file, ": metadata '", key, "' is '", text,
               "'; expected a CRC-32C as eight lowercase hexadecimal digits");
  return static_cast<std::uint32_t>(std::stoul(text, nullptr, 16));
}

SEQPAR_DECL std::uint32_t metadata_crc32c(const std::map<std::string, std::string>& metadata) {
  const std::string prefix = checksum_key("");
  std::uint32_t crc = 0;
  const auto add = [&crc](std::string_view s) {
    std::array<std::byte, 8> length{};
    for (std::size_t i = 0; i < 8; ++i)
      length[i] = static_cast<std::byte>((static_cast<std::uint64_t>(s.size()) >> (8 * i)) & 0xff);
    crc = crc32c(length, crc);
    crc = crc32c(std::as_bytes(std::span<const char>(s.data(), s.size())), crc);
  };
  for (const auto& [key, value] : metadata) {
    if (key.starts_with(prefix)) continue;
    add(key);
    add(value);
  }
  return crc;
}

// A file with checksums has one for every tensor and one for its metadata, and each names
// a tensor it holds; with `verify`, each is compared with the bytes, in data-offset order.
inline void check_checksums(const SafetensorsIndex& index, const std::string& file,
                            Checksums verify) {
  const std::string meta_key = checksum_key("__metadata__");
  std::set<std::string_view> names;
  for (const auto& e : index.entries) names.insert(e.name);
  for (const auto& [name, crc] : index.checksums)
    SEQPAR_CHECK(name == "__metadata__" || names.count(name), file, ": metadata '",
                 checksum_key(name), "' is the checksum of tensor '", name,
                 "', which the file does not hold (is the header damaged?)");
  const std::size_t others = index.checksums.size() - index.checksums.count("__metadata__");
  for (const auto& e : index.entries)
    SEQPAR_CHECK(index.checksums.count(e.name), file, ": tensor '", e.name,
                 "' has no checksum (metadata '", checksum_key(e.name), "') though ", others,
                 " other tensors have one; expected one for every tensor (is the header damaged?)");
  const auto meta = index.checksums.find("__metadata__");
  SEQPAR_CHECK(meta != index.checksums.end(), file,
               ": the tensors have checksums but the metadata has none (metadata '", meta_key,
               "'); expected both (is the header damaged?)");
  if (verify == Checksums::none) return;
  const std::uint32_t got = metadata_crc32c(index.metadata);
  SEQPAR_CHECK(got == meta->second, file, ": the metadata's CRC-32C is ", checksum_text(got),
               " but the file records ", checksum_text(meta->second), " (metadata '", meta_key,
               "'): a metadata value was changed or damaged; expected an intact copy of the file");
  for (const auto& e : index.entries) {
    const std::uint32_t want = index.checksums.at(e.name), have = crc32c(e.bytes);
    SEQPAR_CHECK(have == want, file, ": tensor '", e.name, "': its bytes' CRC-32C is ",
                 checksum_text(have), " but the file records ", checksum_text(want), " (metadata '",
                 checksum_key(e.name),
                 "'): the file is damaged (a flipped bit, a torn or altered copy); expected an "
                 "intact copy of the file");
  }
}

SEQPAR_DECL SafetensorsIndex parse(std::span<const std::byte> bytes, const std::string& file_name,
                                   Checksums verify) {
  const std::string& file = file_name;
  SEQPAR_CHECK(bytes.size() >= 8, file, ": file is ", bytes.size(),
               " bytes; expected at least 8 (the safetensors header length)");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | std::to_integer<std::uint64_t>(bytes[i]);
  SEQPAR_CHECK(n < header_limit, file, ": header length is ", n, " bytes; expected below ",
               header_limit);
  SEQPAR_CHECK(n <= bytes.size() - 8, file, ": header length ", n,
               " runs past the end of the file; expected at most ", bytes.size() - 8,
               " (file size ", bytes.size(), " minus 8)");
  const std::string_view header(reinterpret_cast<const char*>(bytes.data()) + 8,
                                static_cast<std::size_t>(n));
  SEQPAR_CHECK(!header.empty() && header.front() == '{', file,
               ": header does not start with '{'; expected a JSON object (space padding is "
               "allowed only after it)");
  // The JSON parser stops at a NUL byte as if the input ended there.
  const auto nul = header.find('\0');
  SEQPAR_CHECK(nul == std::string_view::npos, file, ": header has a NUL byte at offset ", 8 + nul,
               "; expected UTF-8 JSON text");

  // Duplicate keys: the DOM keeps only the last one, so they are caught while parsing.
  UniqueKeys keys;
  const nlohmann::json::parser_callback_t on_event =
      [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        using E = nlohmann::json::parse_event_t;
        if (event == E::object_start || event == E::array_start)
          SEQPAR_CHECK(depth < max_depth, file, ": header nests deeper than ", max_depth,
                       " levels; expected a flat safetensors header");
        if (const auto* path = keys.see(depth, event, parsed)) {
          const std::string& top = path->front();
          const std::string& k = path->back();
          if (path->size() == 1 && k == "__metadata__")
            fail(file, ": header has '__metadata__' twice; expected it at most once");
          if (path->size() == 1)
            fail(file, ": tensor '", k, "' appears twice in the header; expected unique names");
          if (top == "__metadata__")
            fail(file, ": __metadata__ has key '", k, "' twice; expected unique keys");
          fail(file, ": tensor '", top, "': key '", k, "' appears twice; expected each field once");
        }
        return true;
      };
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(header.begin(), header.end(), on_event);
  } catch (const nlohmann::json::exception& e) {
    fail(file, ": header is not valid JSON: ", e.what());
  }

  SafetensorsIndex index;
  std::vector<HeaderTensor> tensors;
  tensors.reserve(root.size());
  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      if (value.is_null()) continue;  // the reference reader takes null as "no metadata"
      SEQPAR_CHECK(value.is_object(), file, ": __metadata__ is ", json_kind(value),
                   "; expected an object mapping strings to strings");
      for (const auto& [mk, mv] : value.items()) {
        SEQPAR_CHECK(mv.is_string(), file, ": __metadata__ key '", mk, "' holds ", json_kind(mv),
                     "; expected a string");
        index.metadata.emplace(mk, mv.get<std::string>());
      }
      continue;
    }
    tensors.push_back(parse_header_tensor(key, value, file));
  }
  const std::string prefix = checksum_key("");
  for (auto it = index.metadata.begin(); it != index.metadata.end();) {
    if (!it->first.starts_with(prefix)) {
      ++it;
      continue;
    }
    index.checksums.emplace(it->first.substr(prefix.size()),
                            parse_checksum(it->second, file, it->first));
    it = index.metadata.erase(it);
  }

  const std::uint64_t data_size = bytes.size() - 8 - n;
  std::sort(tensors.begin(), tensors.end(), [](const HeaderTensor& a, const HeaderTensor& b) {
    return std::tie(a.begin, a.end, a.entry.name) < std::tie(b.begin, b.end, b.entry.name);
  });
  for (const auto& t : tensors)
    SEQPAR_CHECK(t.end <= data_size, file, ": tensor '", t.entry.name, "': data_offsets [", t.begin,
                 ", ", t.end, "] end past the data, which holds ", data_size,
                 " bytes; expected end <= ", data_size, " (is the file truncated?)");
  std::uint64_t covered = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    if (t.begin > covered) {
      if (i == 0)
        fail(file, ": tensor '", t.entry.name, "' is the first in the data but starts at offset ",
             t.begin, "; expected 0");
      fail(file, ": data bytes [", covered, ", ", t.begin,
           ") belong to no tensor (a hole before tensor '", t.entry.name, "', after tensor '",
           tensors[i - 1].entry.name, "'); expected the tensors to cover the data contiguously");
    }
    SEQPAR_CHECK(t.begin == covered, file, ": tensor '", t.entry.name, "': data_offsets [", t.begin,
                 ", ", t.end, "] overlap tensor '", tensors[i - 1].entry.name, "', which ends at ",
                 covered, "; expected no overlap");
    covered = t.end;
  }
  if (covered != data_size) {
    if (tensors.empty())
      fail(file, ": the header lists no tensors but ", data_size,
           " data bytes follow it; expected the file to end with the header");
    fail(file, ": the tensors end at data offset ", covered, " (tensor '",
         tensors.back().entry.name, "') but the data holds ", data_size,
         " bytes; expected the file to end where the last tensor ends");
  }

  const std::byte* data = bytes.data() + 8 + n;
  index.entries.reserve(tensors.size());
  for (auto& t : tensors) {
    t.entry.bytes = std::span<const std::byte>(data + t.begin, t.end - t.begin);
    index.entries.push_back(std::move(t.entry));
  }
  if (!index.checksums.empty()) check_checksums(index, file, verify);
  return index;
}

}  // namespace detail::safetensors

SEQPAR_DECL SafetensorsFile::SafetensorsFile(const std::filesystem::path& path, Checksums verify)
    : path_(path), map_(path) {
  auto index = detail::safetensors::parse(map_.bytes(), path_.string(), verify);
  entries_ = std::move(index.entries);
  metadata_ = std::move(index.metadata);
  checksums_ = std::move(index.checksums);
  for (std::size_t i = 0; i < entries_.size(); ++i) by_name_.emplace(entries_[i].name, i);
}

SEQPAR_DECL void write_safetensors(const std::filesystem::path& path,
                                   std::span<const TensorToWrite> tensors,
                                   const std::map<std::string, std::string>& metadata,
                                   Checksums checksums) {
  namespace st = detail::safetensors;
  const std::string file = path.string();
  const bool sums = checksums == Checksums::crc32c;
  std::map<std::string, std::string> meta = metadata;
  if (sums) {
    const std::string prefix = checksum_key("");
    for (const auto& [key, value] : metadata)
      SEQPAR_CHECK(!key.starts_with(prefix), file, ": metadata key '", key,
                   "' is one of the checksums the writer adds; expected none of the caller's "
                   "keys to start with '",
                   prefix, "' (or Checksums::none)");
    meta[checksum_key("__metadata__")] = st::checksum_text(st::metadata_crc32c(metadata));
  }
  std::set<std::string_view> seen;
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!meta.empty()) header["__metadata__"] = nullptr;  // first in the header, filled below
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    SEQPAR_CHECK(t.name != "__metadata__", file,
                 ": tensor '__metadata__' is not allowed; that key holds the metadata");
    SEQPAR_CHECK(seen.insert(t.name).second, file, ": tensor '", t.name,
                 "' is given twice; expected unique names");
    for (auto d : t.shape)
      SEQPAR_CHECK(d >= 0, file, ": tensor '", t.name, "': shape ", detail::shape_string(t.shape),
                   " has a negative dimension; expected non-negative dimensions");
    const auto numel = st::checked_numel(t.shape);
    const auto nbytes = numel ? st::checked_nbytes(*numel, t.dtype) : std::nullopt;
    SEQPAR_CHECK(nbytes.has_value(), file, ": tensor '", t.name, "': shape ",
                 detail::shape_string(t.shape), " has more bytes than 64 bits count");
    SEQPAR_CHECK(t.bytes.size() == *nbytes, file, ": tensor '", t.name, "' has ", t.bytes.size(),
                 " bytes; expected ", *nbytes, " (", *numel, " elements of ", dtype_name(t.dtype),
                 ", shape ", detail::shape_string(t.shape), ")");
    auto& entry = header[t.name];
    entry["dtype"] = dtype_name(t.dtype);
    entry["shape"] = t.shape;
    entry["data_offsets"] = {offset, offset + *nbytes};
    offset += *nbytes;
    if (sums) meta[checksum_key(t.name)] = st::checksum_text(crc32c(t.bytes));
  }
  if (!meta.empty()) header["__metadata__"] = meta;
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    ::seqpar::detail::fail(file,
                           ": a tensor name or metadata string is not valid UTF-8: ", e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  SEQPAR_CHECK(text.size() < st::header_limit, file, ": header would be ", text.size(),
               " bytes; expected below ", st::header_limit);
  std::array<std::byte, 8> length{};
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<std::byte>((static_cast<std::uint64_t>(text.size()) >> (8 * i)) & 0xff);

  detail::AtomicFile out(path);
  out.write(length, "writing the header");
  out.write(text, "writing the header");
  for (const auto& t : tensors) out.write(t.bytes, "writing the data");
  out.commit();
}

}  // namespace seqpar::inline v0

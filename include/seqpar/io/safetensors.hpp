#pragma once
// SafetensorsFile (memory-mapped, validated and checksum-verified on open) and write_safetensors
// (atomic, checksummed): docs/safetensors.md. Definitions: io/impl/safetensors.hpp.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/core/dtype.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/separate_compilation.hpp"
#include "seqpar/io/detail/mapped_file.hpp"
#include "seqpar/io/tensor_source.hpp"

namespace seqpar::inline v0 {

/// Whether write_safetensors stores a CRC-32C of every tensor and of the metadata (crc32c,
/// the default) or writes the metadata exactly as given (none); and whether SafetensorsFile
/// verifies the checksums a file holds against its bytes (crc32c) or only reads them (none).
enum class Checksums : std::uint8_t { crc32c, none };

/// The metadata key of tensor `name`'s CRC-32C: "seqpar.crc32c.<name>"; the metadata's own
/// is checksum_key("__metadata__"), a name no tensor can have.
inline std::string checksum_key(std::string_view name) {
  return "seqpar.crc32c." + std::string(name);
}

namespace detail::safetensors {

/// The validated contents of a safetensors image: tensors in data-offset order, the
/// metadata without the checksum keys, and the CRC-32C of each tensor (empty when the file
/// has none; "__metadata__" names the metadata's).
struct SafetensorsIndex {
  std::vector<TensorEntry> entries;
  std::map<std::string, std::string> metadata;
  std::map<std::string, std::uint32_t> checksums;
};

/// Validates a whole safetensors image (`file` bytes, `file_name` for messages) and
/// returns its tensors viewed in place, sorted by data offset. With Checksums::crc32c, the
/// checksums the image holds are verified against its bytes.
SEQPAR_DECL SafetensorsIndex parse(std::span<const std::byte> bytes, const std::string& file_name,
                                   Checksums verify = Checksums::crc32c);

/// The CRC-32C of metadata entries as the checksum "seqpar.crc32c.__metadata__" covers them:
/// each (key, value) in key order as the key's byte length (8 bytes, little-endian), its
/// bytes, the value's byte length and its bytes. Checksum keys are left out.
SEQPAR_DECL std::uint32_t metadata_crc32c(const std::map<std::string, std::string>& metadata);

}  // namespace detail::safetensors

/// A read-only, memory-mapped safetensors file, fully validated on open: a file with
/// checksums (write_safetensors writes them) is read whole and each tensor's CRC-32C checked,
/// so a flipped bit is refused naming the file and the tensor; a file without them (from
/// another writer) opens as before. The TensorEntry bytes point into the mapping and live as
/// long as this object.
class SafetensorsFile {
 public:
  /// Opens and validates `path`; Checksums::none skips reading the data to verify them.
  SEQPAR_DECL explicit SafetensorsFile(const std::filesystem::path& path,
                                       Checksums verify = Checksums::crc32c);
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  SafetensorsFile(SafetensorsFile&&) noexcept = default;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept = default;
  ~SafetensorsFile() = default;

  const std::filesystem::path& path() const { return path_; }

  /// The tensor called `name`, or nullptr when the file has none.
  const TensorEntry* find(std::string_view name) const {
    const auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &entries_[it->second];
  }

  /// The tensor called `name`; throws seqpar::Error naming the file and the tensor.
  const TensorEntry& at(std::string_view name) const {
    const TensorEntry* e = find(name);
    SEQPAR_CHECK(e != nullptr, path_.string(), ": no tensor '", name, "'; the file holds ",
                 entries_.size(), " tensors");
    return *e;
  }

  /// Tensor names in data-offset order.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    out.reserve(entries_.size());
    for (const auto& e : entries_) out.push_back(e.name);
    return out;
  }

  /// All tensors in data-offset order.
  std::span<const TensorEntry> entries() const { return entries_; }

  std::size_t size() const { return entries_.size(); }

  /// The "__metadata__" map (empty when the file has none), without the checksum keys.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  /// The CRC-32C of each tensor by name, and of the metadata under "__metadata__"; empty
  /// when the file has no checksums.
  const std::map<std::string, std::uint32_t>& checksums() const { return checksums_; }

 private:
  std::filesystem::path path_;
  detail::MappedFile map_;
  std::vector<TensorEntry> entries_;
  std::map<std::string, std::size_t, std::less<>> by_name_;
  std::map<std::string, std::string> metadata_;
  std::map<std::string, std::uint32_t> checksums_;
};

/// One tensor to write: bytes are numel * dtype_size, row-major.
struct TensorToWrite {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  std::span<const std::byte> bytes;
};

/// Writes `tensors` (data in the given order) and `metadata` to a safetensors file, with
/// the CRC-32C of every tensor and of the metadata added to the metadata (Checksums::none:
/// the metadata as given; with checksums, a key of the caller's that starts with
/// "seqpar.crc32c." is refused). Atomic: everything is checked first, then written to a
/// temporary file in the same folder, fsynced and renamed over `path`. On any failure
/// `path` is untouched, the temporary file is removed and seqpar::Error names the file and
/// the tensor. The header is padded with spaces so the data starts at a multiple of 8 bytes.
SEQPAR_DECL void write_safetensors(const std::filesystem::path& path,
                                   std::span<const TensorToWrite> tensors,
                                   const std::map<std::string, std::string>& metadata = {},
                                   Checksums checksums = Checksums::crc32c);

}  // namespace seqpar::inline v0

#if !defined(SEQPAR_SEPARATE_COMPILATION)
#include "seqpar/io/impl/safetensors.hpp"
#endif

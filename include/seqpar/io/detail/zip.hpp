#pragma once
// An index of the records of a zip archive
// whose records are stored uncompressed (what torch.save writes). Zip64 sizes and
// offsets are understood; compressed, encrypted and multi-disk archives are refused.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/io/detail/mapped_file.hpp"

namespace seqpar::inline v0::detail::zip {

/// Little-endian reads at checked offsets of a byte span; a read past the end throws
/// seqpar::Error naming the file and the structure being read.
class ByteReader {
 public:
  ByteReader(std::span<const std::byte> data, const std::string& file) : data_(data), file_(file) {}

  bool fits(std::uint64_t off, std::uint64_t n) const {
    return off <= data_.size() && n <= data_.size() - off;
  }

  void need(std::uint64_t off, std::uint64_t n, std::string_view what) const {
    SEQPAR_CHECK(fits(off, n), file_, ": truncated or corrupt zip archive (", what, " at byte ",
                 off, " needs ", n, " bytes; the file has ", data_.size(), ")");
  }

  std::uint64_t le(std::uint64_t off, int n, std::string_view what) const {
    need(off, static_cast<std::uint64_t>(n), what);
    std::uint64_t v = 0;
    for (int i = n; i-- > 0;)
      v = (v << 8) | static_cast<std::uint8_t>(data_[static_cast<std::size_t>(off) + i]);
    return v;
  }
  std::uint16_t u16(std::uint64_t off, std::string_view what) const {
    return static_cast<std::uint16_t>(le(off, 2, what));
  }
  std::uint32_t u32(std::uint64_t off, std::string_view what) const {
    return static_cast<std::uint32_t>(le(off, 4, what));
  }
  std::uint64_t u64(std::uint64_t off, std::string_view what) const { return le(off, 8, what); }

  std::string_view text(std::uint64_t off, std::uint64_t n, std::string_view what) const {
    need(off, n, what);
    return {reinterpret_cast<const char*>(data_.data()) + off, static_cast<std::size_t>(n)};
  }

  std::uint64_t size() const { return data_.size(); }

 private:
  std::span<const std::byte> data_;
  const std::string& file_;
};

inline constexpr std::uint32_t kLocalHeaderSig = 0x04034b50u;
inline constexpr std::uint32_t kCentralHeaderSig = 0x02014b50u;
inline constexpr std::uint32_t kEndSig = 0x06054b50u;
inline constexpr std::uint32_t kEnd64Sig = 0x06064b50u;
inline constexpr std::uint32_t kEnd64LocatorSig = 0x07064b50u;
inline constexpr std::size_t kEndSize = 22;
inline constexpr std::size_t kCentralHeaderSize = 46;
inline constexpr std::size_t kLocalHeaderSize = 30;

/// One entry of the central directory.
struct ZipRecord {
  std::string name;
  std::uint64_t header_offset = 0;  // of the local file header
  std::uint64_t size = 0;           // uncompressed
  std::uint64_t compressed_size = 0;
  std::uint16_t method = 0;  // 0 = stored
  std::uint16_t flags = 0;   // bit 0 = encrypted
};

/// The central directory of a zip archive held in memory, and checked access to the
/// contents of its stored records.
class ZipArchive {
 public:
  ZipArchive(std::span<const std::byte> data, std::string file)
      : data_(data), file_(std::move(file)) {
    const ByteReader r(data_, file_);
    const std::uint64_t end = find_end(r);
    std::uint64_t count = r.u16(end + 10, "end of central directory");
    std::uint64_t cd_size = r.u32(end + 12, "end of central directory");
    std::uint64_t cd_offset = r.u32(end + 16, "end of central directory");
    std::uint64_t cd_limit = end;
    if (end < 20 || r.u32(end - 20, "zip64 locator") != kEnd64LocatorSig) {
      SEQPAR_CHECK(r.u16(end + 4, "end of central directory") == 0 &&
                       r.u16(end + 6, "end of central directory") == 0,
                   file_, ": multi-disk zip archives are not supported");
    } else {  // zip64: the 32-bit fields may be saturated; the zip64 record has them all
      const std::uint64_t loc = end - 20;
      const std::uint64_t end64 = r.u64(loc + 8, "zip64 locator");
      SEQPAR_CHECK(r.u32(loc + 4, "zip64 locator") == 0 && r.u32(loc + 16, "zip64 locator") <= 1,
                   file_, ": multi-disk zip archives are not supported");
      SEQPAR_CHECK(
          end64 < loc && r.u32(end64, "zip64 end of central directory") == kEnd64Sig, file_,
          ": corrupt zip archive (zip64 end of central directory not found at byte ", end64, ")");
      r.need(end64, 56, "zip64 end of central directory");
      SEQPAR_CHECK(r.u32(end64 + 16, "zip64 end") == 0 && r.u32(end64 + 20, "zip64 end") == 0,
                   file_, ": multi-disk zip archives are not supported");
      count = r.u64(end64 + 32, "zip64 end of central directory");
      cd_size = r.u64(end64 + 40, "zip64 end of central directory");
      cd_offset = r.u64(end64 + 48, "zip64 end of central directory");
      cd_limit = end64;
    }
    SEQPAR_CHECK(cd_offset <= cd_limit && cd_size <= cd_limit - cd_offset, file_,
                 ": corrupt zip archive (central directory of ", cd_size, " bytes at byte ",
                 cd_offset, " overlaps its end record at byte ", cd_limit, ")");
    SEQPAR_CHECK(count <= cd_size / kCentralHeaderSize, file_, ": corrupt zip archive (", count,
                 " records cannot fit in a central directory of ", cd_size, " bytes)");
    records_.reserve(static_cast<std::size_t>(count));
    std::uint64_t p = cd_offset;
    const std::uint64_t cd_end = cd_offset + cd_size;
    for (std::uint64_t i = 0; i < count; ++i) {
      SEQPAR_CHECK(p <= cd_end && cd_end - p >= kCentralHeaderSize &&
                       r.u32(p, "central directory") == kCentralHeaderSig,
                   file_, ": corrupt zip archive (central directory record ", i, " at byte ", p,
                   ")");
      ZipRecord rec;
      rec.flags = r.u16(p + 8, "central directory");
      rec.method = r.u16(p + 10, "central directory");
      rec.compressed_size = r.u32(p + 20, "central directory");
      rec.size = r.u32(p + 24, "central directory");
      const std::uint64_t name_len = r.u16(p + 28, "central directory");
      const std::uint64_t extra_len = r.u16(p + 30, "central directory");
      const std::uint64_t comment_len = r.u16(p + 32, "central directory");
      std::uint32_t disk = r.u16(p + 34, "central directory");
      rec.header_offset = r.u32(p + 42, "central directory");
      const std::uint64_t var_len = name_len + extra_len + comment_len;
      SEQPAR_CHECK(cd_end - p - kCentralHeaderSize >= var_len, file_,
                   ": corrupt zip archive (central directory record ", i,
                   " overruns the directory)");
      rec.name = std::string(r.text(p + kCentralHeaderSize, name_len, "record name"));
      read_zip64_extra(r, p + kCentralHeaderSize + name_len, extra_len, rec, disk);
      SEQPAR_CHECK(disk == 0, file_, ": multi-disk zip archives are not supported");
      p += kCentralHeaderSize + var_len;
      const auto [it, inserted] = index_.emplace(rec.name, records_.size());
      SEQPAR_CHECK(inserted, file_, ": corrupt zip archive (record '", rec.name,
                   "' appears twice)");
      records_.push_back(std::move(rec));
    }
  }

  const std::string& file() const { return file_; }
  const std::vector<ZipRecord>& records() const { return records_; }

  const ZipRecord* find(std::string_view name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &records_[it->second];
  }

  /// The bytes of a stored record, checked against its local header and the file size.
  std::span<const std::byte> contents(const ZipRecord& rec) const {
    SEQPAR_CHECK((rec.flags & 1u) == 0, file_, ": zip record '", rec.name,
                 "' is encrypted; encrypted archives are not supported");
    SEQPAR_CHECK(rec.method == 0, file_, ": zip record '", rec.name, "' is compressed (method ",
                 rec.method,
                 "); torch.save stores records uncompressed, so re-save the checkpoint with "
                 "torch.save instead of re-zipping it");
    SEQPAR_CHECK(rec.compressed_size == rec.size, file_, ": corrupt zip archive (stored record '",
                 rec.name, "' has ", rec.compressed_size, " stored bytes but a size of ", rec.size,
                 ")");
    const ByteReader r(data_, file_);
    const std::uint64_t h = rec.header_offset;
    SEQPAR_CHECK(r.fits(h, kLocalHeaderSize) && r.u32(h, "local header") == kLocalHeaderSig, file_,
                 ": corrupt zip archive (no local header for record '", rec.name, "' at byte ", h,
                 ")");
    const std::uint64_t name_len = r.u16(h + 26, "local header");
    const std::uint64_t extra_len = r.u16(h + 28, "local header");
    SEQPAR_CHECK(r.fits(h + kLocalHeaderSize, name_len) &&
                     r.text(h + kLocalHeaderSize, name_len, "local header") == rec.name,
                 file_, ": corrupt zip archive (local header at byte ", h,
                 " does not name record '", rec.name, "')");
    const std::uint64_t start = h + kLocalHeaderSize + name_len + extra_len;
    SEQPAR_CHECK(r.fits(start, rec.size), file_, ": truncated or corrupt zip archive (record '",
                 rec.name, "' needs bytes ", start, " to ", start, " + ", rec.size,
                 "; the file has ", r.size(), ")");
    return data_.subspan(static_cast<std::size_t>(start), static_cast<std::size_t>(rec.size));
  }

 private:
  // The end record is the last 22 bytes unless the archive has a comment; the
  // comment is at most 65535 bytes, so search that far back.
  std::uint64_t find_end(const ByteReader& r) const {
    const std::uint64_t n = r.size();
    SEQPAR_CHECK(n >= kEndSize, file_, ": not a zip archive (", n,
                 " bytes is too short for a PyTorch checkpoint)");
    const std::uint64_t lowest = n - kEndSize > 0xffff ? n - kEndSize - 0xffff : 0;
    static constexpr unsigned char kSig[4] = {0x50, 0x4b, 0x05, 0x06};
    for (std::uint64_t p = n - kEndSize + 1; p-- > lowest;) {
      if (std::memcmp(data_.data() + p, kSig, 4) == 0 &&
          p + kEndSize + r.u16(p + 20, "end of central directory") == n)
        return p;
    }
    fail(file_,
         ": not a zip archive or truncated (no end of central directory record); a PyTorch "
         "checkpoint written by torch.save is a zip archive");
  }

  // Fields saturated at 0xffff... in the central record are given, in this order, by
  // the zip64 extra field (id 1).
  void read_zip64_extra(const ByteReader& r, std::uint64_t p, std::uint64_t len, ZipRecord& rec,
                        std::uint32_t& disk) const {
    const std::uint64_t end = p + len;
    while (end - p >= 4) {
      const std::uint16_t id = r.u16(p, "extra field");
      const std::uint64_t size = r.u16(p + 2, "extra field");
      SEQPAR_CHECK(size <= end - p - 4, file_, ": corrupt zip archive (extra field of record '",
                   rec.name, "' overruns its record)");
      if (id == 1) {
        std::uint64_t q = p + 4;
        const std::uint64_t q_end = q + size;
        auto take = [&](std::uint64_t& field) {
          SEQPAR_CHECK(q_end - q >= 8, file_, ": corrupt zip archive (zip64 field of record '",
                       rec.name, "' is too short)");
          field = r.u64(q, "zip64 extra field");
          q += 8;
        };
        if (rec.size == 0xffffffffu) take(rec.size);
        if (rec.compressed_size == 0xffffffffu) take(rec.compressed_size);
        if (rec.header_offset == 0xffffffffu) take(rec.header_offset);
        if (disk == 0xffffu) {
          SEQPAR_CHECK(q_end - q >= 4, file_, ": corrupt zip archive (zip64 field of record '",
                       rec.name, "' is too short)");
          disk = r.u32(q, "zip64 extra field");
        }
        return;
      }
      p += 4 + size;
    }
  }

  std::span<const std::byte> data_;
  std::string file_;
  std::vector<ZipRecord> records_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

}  // namespace seqpar::inline v0::detail::zip

#pragma once
// Files replaced whole or not at all: a temporary in the same folder, fsync, rename, fsync of
// the folder. Every writer of seqpar goes through it, so a killed write leaves one kind of
// temporary, ".<name>.tmp.<hex>", which is_temporary_of recognises. POSIX only.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>

#include "seqpar/core/error.hpp"

namespace seqpar::inline v0::detail {

/// The file name a temporary of an atomic write stands for (".x.json.tmp.1f" -> "x.json"), or
/// nothing when `file_name` is not named as such a temporary.
inline std::optional<std::string> temporary_target(std::string_view file_name) {
  constexpr std::string_view mark = ".tmp.";
  if (!file_name.starts_with('.')) return std::nullopt;
  const auto at = file_name.rfind(mark);
  if (at == std::string_view::npos || at < 2) return std::nullopt;
  const std::string_view hex = file_name.substr(at + mark.size());
  if (hex.empty() || hex.find_first_not_of("0123456789abcdef") != std::string_view::npos)
    return std::nullopt;
  return std::string(file_name.substr(1, at - 1));
}

/// Whether `file_name` is a temporary that an atomic write of the file named `name` leaves when
/// it is killed (".<name>.tmp.<hex>", in the same folder).
inline bool is_temporary_of(std::string_view file_name, std::string_view name) {
  const auto target = temporary_target(file_name);
  return target && *target == name;
}

/// A fresh temporary's name for an atomic write of `name`: ".<name>.tmp.<hex>".
inline std::string temporary_name(std::string_view name, std::random_device& rd) {
  std::ostringstream out;
  out << '.' << name << ".tmp." << std::hex << rd() << rd();
  return out.str();
}

inline std::string errno_text(int err) {
  return std::error_code(err, std::generic_category()).message();
}

/// A file being written through a temporary in its folder: `commit` fsyncs it, renames it over
/// the path and fsyncs the folder; until then (and on any failure, or when destroyed
/// uncommitted) the path is untouched and the temporary is removed. Errors name the path.
class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path path) : path_(std::move(path)) {
    const std::filesystem::path dir = folder();
    std::random_device rd;
    for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
      tmp_ = dir / temporary_name(path_.filename().string(), rd);
      fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd_ < 0 && errno != EEXIST) break;
    }
    SEQPAR_CHECK(fd_ >= 0, path_.string(), ": cannot create a temporary file in ", dir.string(),
                 ": ", errno_text(errno));
    struct stat old {};
    if (::stat(path_.c_str(), &old) == 0 && S_ISREG(old.st_mode))
      ::fchmod(fd_, old.st_mode & 07777);  // keep the permissions of the file being replaced
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }

  /// Appends `bytes`; `step` names the write in the error ("writing the header").
  void write(std::span<const std::byte> bytes, const char* step = "writing") {
    constexpr std::size_t chunk = std::size_t{1} << 30;  // write() caps single calls near 2 GiB
    while (!bytes.empty()) {
      const ssize_t w = ::write(fd_, bytes.data(), std::min(bytes.size(), chunk));
      if (w < 0) {
        if (errno == EINTR) continue;
        abandon(step);
      }
      bytes = bytes.subspan(static_cast<std::size_t>(w));
    }
  }
  void write(std::string_view text, const char* step = "writing") {
    write(std::as_bytes(std::span<const char>(text)), step);
  }

  /// Makes the written bytes the file at the path.
  void commit() {
    if (::fsync(fd_) != 0) abandon("fsync");
    const int closed = ::close(fd_);
    fd_ = -1;
    if (closed != 0) abandon("close");
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) abandon("renaming the temporary file over it");
    committed_ = true;
    sync_folder(folder());
  }

  /// Persists a rename in `dir`; the renamed file is complete either way.
  static void sync_folder(const std::filesystem::path& dir) {
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
  }

 private:
  std::filesystem::path folder() const {
    return path_.has_parent_path() ? path_.parent_path() : std::filesystem::path(".");
  }
  [[noreturn]] void abandon(const char* step) {
    const int err = errno;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    ::unlink(tmp_.c_str());
    fail(path_.string(), ": ", step, " failed: ", errno_text(err), "; the file was left unchanged");
  }

  std::filesystem::path path_;
  std::filesystem::path tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

/// Why files cannot be written into folder `dir` (made where missing), or an empty string
/// when they can: a file in the way (`dir` or its nearest existing ancestor), or a folder
/// where no file can be created (read-only), found by creating and removing a temporary.
inline std::string folder_write_problem(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path at = dir.empty() ? fs::path(".") : dir;
  while (!fs::exists(at, ec) && at.has_parent_path() && at.parent_path() != at)
    at = at.parent_path();
  if (!fs::exists(at, ec)) at = ".";
  if (!fs::is_directory(at, ec))
    return at == dir
               ? dir.string() + " is a file; expected a folder (or a path where one can be made)"
               : dir.string() + ": " + at.string() +
                     " is a file; expected a folder (or a path where one can be made)";
  std::random_device rd;
  const fs::path probe = at / temporary_name("write-check", rd);
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return dir.string() + ": no file can be created in " + at.string() + " (" + errno_text(errno) +
           ")";
  ::close(fd);
  ::unlink(probe.c_str());
  return {};
}

/// Writes `content` to `path` atomically, creating its folder when missing.
inline void write_file_atomic(const std::filesystem::path& path, std::string_view content) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  AtomicFile f(path);
  f.write(content);
  f.commit();
}

/// Copies `from` to `to` (replacing it) through a temporary, so `to` is whole or absent. A
/// copy, never a link: the two files stay independent.
inline void copy_file_atomic(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::ifstream in(from, std::ios::binary);
  SEQPAR_CHECK(in.good(), from.string(), ": cannot be opened to be copied to ", to.string());
  AtomicFile out(to);
  std::array<char, std::size_t{1} << 20> buffer{};
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    out.write(std::string_view(buffer.data(), static_cast<std::size_t>(in.gcount())), "copying");
  }
  SEQPAR_CHECK(!in.bad(), from.string(), ": reading failed while copying it to ", to.string());
  out.commit();
}

}  // namespace seqpar::inline v0::detail

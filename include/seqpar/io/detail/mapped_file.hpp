#pragma once
// MappedFile: a whole regular file mapped read-only (POSIX mmap) for the object's
// lifetime; the checkpoint readers view their tensors in place through it.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <utility>

#include "seqpar/core/error.hpp"

namespace seqpar::inline v0::detail {

class MappedFile {
 public:
  MappedFile() = default;

  /// Errors name the file: it cannot be opened, is not a regular file, or cannot be mapped.
  explicit MappedFile(const std::filesystem::path& path) {
    const std::string name = path.string();
    const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) fail_missing(name, ": no such file");
    SEQPAR_CHECK(fd >= 0, name, ": cannot open for reading: ", std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      fail(name, ": not a regular file");
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      const int err = errno;
      ::close(fd);
      SEQPAR_CHECK(p != MAP_FAILED, name, ": cannot map ", size_, " bytes: ", std::strerror(err));
      data_ = static_cast<const std::byte*>(p);
    } else {
      ::close(fd);
    }
  }
  MappedFile(MappedFile&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  MappedFile& operator=(MappedFile&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() { release(); }

  std::span<const std::byte> bytes() const { return {data_, size_}; }

 private:
  void release() noexcept {
    if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
    data_ = nullptr;
    size_ = 0;
  }
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace seqpar::inline v0::detail

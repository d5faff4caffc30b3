// The output folder of a training run: one run at a time (a lock file holding the owner's
// pid), leftover temporary files of a killed save removed, checkpoints OUT/step-N.safetensors
// rotated (the newest K kept) and the newest complete one found for --resume.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/io/safetensors.hpp"

namespace ner {

namespace fs = std::filesystem;

/// OUT/seqgpt_ner.lock, created exclusively and holding this process's pid while a training
/// run owns the folder. A second run on the same folder is refused while the owner lives; a
/// lock whose pid is dead (a killed run) is taken over, saying so.
class RunLock {
 public:
  explicit RunLock(const fs::path& dir) : path_(dir / "seqgpt_ner.lock") {
    for (int attempt = 0; attempt < 2; ++attempt) {
      const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd >= 0) {
        const std::string pid = std::to_string(::getpid()) + "\n";
        const bool ok = ::write(fd, pid.data(), pid.size()) == static_cast<ssize_t>(pid.size());
        ::close(fd);
        SEQPAR_CHECK(ok, path_.string(), ": cannot write the lock file: ", std::strerror(errno));
        return;
      }
      SEQPAR_CHECK(errno == EEXIST, path_.string(),
                   ": cannot create the lock file: ", std::strerror(errno));
      std::ifstream f(path_);
      std::string text;
      std::getline(f, text);
      const auto pid = seqpar::detail::parse_number<std::int64_t>(text);
      // kill(pid, 0) probes without a signal: EPERM means the process exists (not ours).
      const bool alive = pid && *pid > 0 && *pid <= INT32_MAX &&
                         (::kill(static_cast<pid_t>(*pid), 0) == 0 || errno == EPERM);
      SEQPAR_CHECK(!alive, dir.string(), ": another seqgpt_ner run (pid ", text,
                   ") is using this output folder (", path_.string(),
                   "); wait for it to end or pass another --out");
      std::printf("taking over the stale lock %s of pid %s (no such process)\n",
                  path_.string().c_str(), text.empty() ? "?" : text.c_str());
      fs::remove(path_);
    }
    seqpar::detail::fail(path_.string(),
                         ": the lock file came back while it was taken over; another "
                         "run is starting on this output folder");
  }
  ~RunLock() {
    std::error_code ec;
    fs::remove(path_, ec);
  }
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  fs::path path_;
};

/// Removes what a killed save leaves behind: only files named as our writers name their
/// temporaries (write_safetensors: ".<name>.tmp.<hex>", write_file_atomic: "<name>.tmp")
/// for the files this program writes. Returns the names removed.
inline std::vector<std::string> remove_stale_temporaries(const fs::path& dir) {
  static const std::regex top(
      R"(\.(step-[0-9]+\.safetensors|model\.safetensors|checkpoint\.safetensors)\.tmp\.[0-9a-f]+|(run|tokenizer)\.json\.tmp)");
  static const std::regex cache(R"(\.[a-z]+\.tokens\.safetensors\.tmp\.[0-9a-f]+)");
  std::vector<std::string> removed;
  for (const auto& [folder, pattern] : {std::pair{dir, &top}, std::pair{dir / "cache", &cache}}) {
    std::error_code ec;
    if (!fs::is_directory(folder, ec)) continue;
    for (const auto& e : fs::directory_iterator(folder)) {
      const std::string name = e.path().filename().string();
      if (e.is_regular_file() && std::regex_match(name, *pattern)) {
        fs::remove(e.path());
        removed.push_back(e.path().string());
      }
    }
  }
  return removed;
}

/// The checkpoints OUT/step-N.safetensors of a run, by step.
struct Checkpoints {
  fs::path dir;

  fs::path path(std::int64_t step) const {
    return dir / ("step-" + std::to_string(step) + ".safetensors");
  }

  /// The steps that have a checkpoint file, newest first.
  std::vector<std::int64_t> steps() const {
    static const std::regex name(R"(step-([0-9]+)\.safetensors)");
    std::vector<std::int64_t> out;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return out;
    for (const auto& e : fs::directory_iterator(dir)) {
      std::smatch m;
      const std::string n = e.path().filename().string();
      if (e.is_regular_file() && std::regex_match(n, m, name))
        if (const auto s = seqpar::detail::parse_number<std::int64_t>(m[1].str()))
          out.push_back(*s);
    }
    std::sort(out.rbegin(), out.rend());
    return out;
  }

  /// The newest checkpoint that opens whole (its header and size agree, and it records
  /// the step its name says). With `set_aside`, newer ones that do not are renamed
  /// step-N.safetensors.incomplete (kept for a look, out of the rotation), saying so.
  std::optional<fs::path> newest_complete(bool set_aside = false) const {
    for (const std::int64_t s : steps()) {
      try {
        const seqpar::SafetensorsFile f(path(s));
        const auto it = f.metadata().find("seqpar.step");
        SEQPAR_CHECK(it != f.metadata().end() && it->second == std::to_string(s), path(s).string(),
                     ": records step ", it == f.metadata().end() ? std::string("?") : it->second,
                     ", not the step of its name");
        return path(s);
      } catch (const seqpar::Error& e) {
        std::printf("passing over an incomplete checkpoint: %s\n", e.what());
        if (set_aside) fs::rename(path(s), path(s).string() + ".incomplete");
      }
    }
    return std::nullopt;
  }

  /// Removes every checkpoint (a fresh run's own sequence replaces an earlier run's);
  /// returns the files removed.
  std::vector<std::string> remove_all() const {
    std::vector<std::string> removed;
    for (const std::int64_t s : steps()) {
      fs::remove(path(s));
      removed.push_back(path(s).string());
    }
    return removed;
  }

  /// Keeps the newest `keep` checkpoints, removing the others.
  void rotate(std::int64_t keep) const {
    const auto all = steps();
    for (std::size_t i = static_cast<std::size_t>(keep); i < all.size(); ++i)
      fs::remove(path(all[i]));
  }
};

}  // namespace ner

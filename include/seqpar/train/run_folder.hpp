#pragma once
// The output folder of a training run: one run at a time (OutputLock: the owner's pid and
// host), its checkpoints step-N.safetensors (CheckpointDir: newest complete, rotation), the
// leftovers of a killed save, and RunFolder, which looks at a folder without writing to it
// (every refusal comes first) and only then takes it.
//
// TrainingRun (train/run.hpp) looks at the folder, compares the checkpoint, agrees with
// every rank and only then takes the folder: a refused run has written nothing.

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/io/atomic_file.hpp"
#include "seqpar/io/safetensors.hpp"
#include "seqpar/train/launch.hpp"  // host_name
#include "seqpar/train/run_spec.hpp"

namespace seqpar::inline v0 {

/// A lock file holding "<pid> <host>" while a run owns its folder; only a dead holder on this
/// host is taken over. Taking it is atomic (link(2); stale locks removed under an flock of
/// `<lock>.guard`, a file left in place so that two starts never flock different files).
class OutputLock {
 public:
  /// Who holds the lock file at `path`: pid, host (empty in a lock written before hosts were
  /// recorded: this host's), and whether that process is known to live.
  struct Holder {
    std::int64_t pid = 0;
    std::string host;
    bool known = true;  // the file names a pid (not empty, not unreadable)
    bool here = true;   // on this host (its process can be probed)
    bool alive = true;  // probed alive, or on another host or unknown (assumed alive)
    std::string text() const {
      if (!known) return "no one (the lock file names no process)";
      return "pid " + std::to_string(pid) + (host.empty() ? "" : " on " + host);
    }
  };

  /// The holder of `path`; none when there is no such file.
  static std::optional<Holder> holder(const std::filesystem::path& path) {
    std::ifstream f(path);
    if (!f.is_open()) return std::nullopt;
    std::string pid_text, host;
    f >> pid_text >> host;
    Holder h;
    const auto pid = detail::parse_number<std::int64_t>(pid_text);
    h.known = pid && *pid > 0 && *pid <= INT32_MAX;
    h.pid = pid.value_or(0);
    h.host = host;
    h.here = host.empty() || host == host_name();
    // kill(pid, 0) probes without a signal: EPERM means the process exists (not ours).
    h.alive = !h.known || !h.here || ::kill(static_cast<pid_t>(*pid), 0) == 0 || errno == EPERM;
    return h;
  }

  /// Throws when a run that lives (or may live: on another host, or unknown) holds `path`.
  static void check_free(const std::filesystem::path& path) {
    const auto h = holder(path);
    if (!h || !h->alive) return;
    const std::string dir = path.parent_path().string();
    if (!h->known)
      detail::fail(dir, ": the lock ", path.string(),
                   " names no run (it is empty or unreadable: left by a start that could not "
                   "write it, e.g. on a full disk); whether a run uses the folder cannot be "
                   "known from it, so it is not taken over: remove it once no run uses this "
                   "folder, or choose another output folder");
    if (h->here)
      detail::fail(dir, ": another run (", h->text(), ") is using this output folder (",
                   path.string(), "); wait for it to end or choose another output folder");
    detail::fail(dir, ": the lock ", path.string(), " is held by ", h->text(), ", not this host (",
                 host_name(),
                 "): a run on another node sharing this file system may be using the folder, and "
                 "its process cannot be checked from here; choose another output folder, or "
                 "remove the lock once that run has ended");
  }

  /// Takes the lock at `path`; a stale lock of this host is taken over, and `note` (when
  /// given) is told so.
  explicit OutputLock(std::filesystem::path path, std::vector<std::string>* notes = nullptr)
      : path_(std::move(path)) {
    const Guard guard(path_.string() + ".guard");
    if (const auto h = holder(path_)) {
      check_free(path_);
      if (notes)
        notes->push_back("taking over the stale lock " + path_.string() + " of " + h->text() +
                         " (no such process)");
      std::error_code ec;
      std::filesystem::remove(path_, ec);
      SEQPAR_CHECK(!ec, path_.string(), ": cannot remove the stale lock: ", ec.message());
    }
    // The text whole in a file of this process first, then linked into place.
    const std::string tmp = path_.string() + "." + std::to_string(::getpid()) + ".tmp";
    const std::string text = std::to_string(::getpid()) + " " + host_name() + "\n";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    SEQPAR_CHECK(fd >= 0, tmp, ": cannot create the lock file: ", std::strerror(errno));
    const bool written =
        ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
        ::fsync(fd) == 0;
    const int write_errno = errno;
    ::close(fd);
    if (!written) {
      ::unlink(tmp.c_str());
      detail::fail(path_.string(), ": cannot write the lock file: ", std::strerror(write_errno));
    }
    const int linked = ::link(tmp.c_str(), path_.c_str());
    const int link_errno = errno;
    ::unlink(tmp.c_str());
    if (linked != 0 && link_errno == EEXIST)
      detail::fail(path_.string(),
                   ": the lock file came back while it was taken over; another run is starting "
                   "on this output folder");
    SEQPAR_CHECK(linked == 0, path_.string(),
                 ": cannot create the lock file: ", std::strerror(link_errno));
  }
  ~OutputLock() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  // An flock of `path` (created when missing, never removed) held for its lifetime; nothing
  // where the file system has no flock.
  class Guard {
   public:
    explicit Guard(const std::string& path) {
      fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      SEQPAR_CHECK(fd_ >= 0, path, ": cannot create the lock's guard file: ", std::strerror(errno));
      int r;
      while ((r = ::flock(fd_, LOCK_EX)) != 0 && errno == EINTR) {
      }
      if (r != 0 && errno != ENOLCK && errno != EOPNOTSUPP && errno != EINVAL) {
        const int e = errno;
        ::close(fd_);
        detail::fail(path, ": cannot lock the lock's guard file: ", std::strerror(e));
      }
    }
    ~Guard() { ::close(fd_); }  // closing releases the flock
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    int fd_ = -1;
  };

  std::filesystem::path path_;
};

/// The checkpoints DIR/step-N.safetensors of a run, by step.
struct CheckpointDir {
  std::filesystem::path dir;

  std::filesystem::path path(std::int64_t step) const {
    return dir / ("step-" + std::to_string(step) + ".safetensors");
  }

  /// The steps that have a checkpoint file, newest first.
  std::vector<std::int64_t> steps() const {
    static const std::regex name(R"(step-([0-9]+)\.safetensors)");
    std::vector<std::int64_t> out;
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) return out;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      std::smatch m;
      const std::string n = e.path().filename().string();
      if (e.is_regular_file() && std::regex_match(n, m, name))
        if (const auto s = detail::parse_number<std::int64_t>(m[1].str())) out.push_back(*s);
    }
    std::sort(out.rbegin(), out.rend());
    return out;
  }

  /// Checks that `path` opens whole as a training checkpoint (its header and size agree and
  /// it records a step; for step-N files, N) and returns its metadata.
  static std::map<std::string, std::string> open_metadata(const std::filesystem::path& path) {
    const SafetensorsFile f(path);
    const auto it = f.metadata().find("seqpar.step");
    SEQPAR_CHECK(it != f.metadata().end(), path.string(),
                 ": not a training checkpoint (metadata 'seqpar.step' is missing)");
    static const std::regex name(R"(step-([0-9]+)\.safetensors)");
    std::smatch m;
    const std::string file = path.filename().string();
    if (std::regex_match(file, m, name))
      SEQPAR_CHECK(it->second == m[1].str(), path.string(), ": records step ", it->second,
                   ", not the step of its name");
    return f.metadata();
  }

  /// The newest checkpoint that opens whole; the newer ones that do not are added to
  /// `incomplete` with why (a save killed midway cannot leave one, since the writer renames
  /// a complete file into place, but a disk can lose one).
  std::optional<std::filesystem::path> newest_complete(
      std::vector<std::pair<std::filesystem::path, std::string>>* incomplete = nullptr) const {
    for (const std::int64_t s : steps()) {
      try {
        open_metadata(path(s));
        return path(s);
      } catch (const Error& e) {
        if (incomplete) incomplete->emplace_back(path(s), e.what());
      }
    }
    return std::nullopt;
  }

  /// Keeps the newest `keep` checkpoints, and the one of step `also` where given; returns
  /// the files removed.
  std::vector<std::filesystem::path> rotate(std::int64_t keep,
                                            std::optional<std::int64_t> also = {}) const {
    std::vector<std::filesystem::path> removed;
    const auto all = steps();
    for (std::size_t i = static_cast<std::size_t>(std::max<std::int64_t>(keep, 0)); i < all.size();
         ++i) {
      if (also == all[i]) continue;
      std::filesystem::remove(path(all[i]));
      removed.push_back(path(all[i]));
    }
    return removed;
  }
};

/// A run's output folder, looked at (the constructor writes nothing) and then taken.
class RunFolder {
 public:
  /// The folder spec.output_dir, looked at. Refuses, before anything is written: a file; a
  /// folder a live run holds; for a fresh run, an earlier run's checkpoints (unless
  /// spec.overwrite_output_dir); for a resume, no complete checkpoint, or a named one that
  /// does not exist or does not open whole.
  explicit RunFolder(const RunSpec& spec) : dir_(spec.output_dir), options_(spec) {
    std::error_code ec;
    SEQPAR_CHECK(!dir_.empty(), "RunSpec::output_dir is empty; expected the run's folder");
    SEQPAR_CHECK(!std::filesystem::exists(dir_, ec) || std::filesystem::is_directory(dir_, ec),
                 "RunSpec::output_dir ", dir_.string(),
                 " is a file, not a folder; the output folder of a run must be a folder (or not "
                 "exist yet)");
    const std::filesystem::path lock = dir_ / options_.lock_name;
    OutputLock::check_free(lock);
    const CheckpointDir here{dir_};
    if (!options_.resume) {
      const auto earlier = here.steps();
      if (!earlier.empty() && !options_.overwrite_output_dir)
        detail::fail(dir_.string(), ": holds checkpoints of an earlier run (",
                     here.path(earlier.front()).filename().string(),
                     "); RunSpec::resume continues that run, RunSpec::overwrite_output_dir "
                     "deletes them and starts afresh");
      return;
    }
    const bool named = !options_.resume_from.empty();
    const CheckpointDir from{named && std::filesystem::is_directory(options_.resume_from, ec)
                                 ? options_.resume_from
                                 : dir_};
    if (named && !std::filesystem::is_directory(options_.resume_from, ec)) {
      if (!std::filesystem::exists(options_.resume_from, ec))
        detail::fail_missing(
            "RunSpec::resume_from ", options_.resume_from.string(),
            " does not exist; expected a checkpoint step-N.safetensors or a run's folder");
      resume_metadata_ = CheckpointDir::open_metadata(options_.resume_from);
      resume_from_ = options_.resume_from;
      return;
    }
    resume_from_ = from.newest_complete(&incomplete_);
    SEQPAR_CHECK(resume_from_.has_value(), from.dir.string(),
                 ": no complete checkpoint step-N.safetensors to resume from",
                 incomplete_.empty() ? std::string() : " (" + incomplete_.front().second + ")");
    resume_metadata_ = CheckpointDir::open_metadata(*resume_from_);
  }

  const std::filesystem::path& dir() const { return dir_; }
  CheckpointDir checkpoints() const { return {dir_}; }
  /// The checkpoint a resume starts from; none for a fresh run.
  const std::optional<std::filesystem::path>& resume_from() const { return resume_from_; }
  /// Its metadata (read from the header alone); empty for a fresh run.
  const std::map<std::string, std::string>& resume_metadata() const { return resume_metadata_; }
  bool taken() const { return lock_.has_value(); }

  /// Takes the folder, once every check has passed: creates it, takes the lock, removes
  /// the temporaries a killed save left of the run's files, sets newer incomplete
  /// checkpoints aside (renamed step-N.safetensors.incomplete, kept for a look) and, for a
  /// fresh run, removes an earlier run's checkpoints. Returns what it did, a line each.
  std::vector<std::string> take() {
    SEQPAR_CHECK(!lock_, dir_.string(), ": the output folder is taken already");
    std::vector<std::string> notes;
    std::filesystem::create_directories(dir_);
    lock_.emplace(dir_ / options_.lock_name, &notes);
    for (const auto& f : remove_temporaries())
      notes.push_back("removed " + f.string() + ", left by an interrupted save");
    for (const auto& [path, why] : incomplete_) {
      notes.push_back("passing over an incomplete checkpoint: " + why);
      std::filesystem::rename(path, path.string() + ".incomplete");
    }
    if (!options_.resume)
      for (const auto& f : checkpoints().rotate(0))
        notes.push_back("removed " + f.string() + " of an earlier run (a fresh run)");
    return notes;
  }

  /// Keeps the newest `keep` checkpoints and the one of step `also` (the writer, after each
  /// save).
  void rotate(std::int64_t keep, std::optional<std::int64_t> also = {}) const {
    checkpoints().rotate(keep, also);
  }

 private:
  // Removes, and returns, the temporaries a killed atomic write left (detail::AtomicFile's
  // names) of the run's own files and options.own_files; nothing else in the folder is touched.
  std::vector<std::filesystem::path> remove_temporaries() const {
    std::vector<std::string> files{"step-*.safetensors", "model.safetensors", "run.json",
                                   "metrics.jsonl", Evaluations::file_name};
    files.insert(files.end(), options_.own_files.begin(), options_.own_files.end());
    // `*` stands for a name's letters, digits, '_' and '-'.
    const auto matches = [](std::string_view name, std::string_view pattern) {
      const auto star = pattern.find('*');
      if (star == std::string_view::npos) return name == pattern;
      const auto head = pattern.substr(0, star), tail = pattern.substr(star + 1);
      if (name.size() <= head.size() + tail.size() || !name.starts_with(head) ||
          !name.ends_with(tail))
        return false;
      const auto middle = name.substr(head.size(), name.size() - head.size() - tail.size());
      return std::all_of(middle.begin(), middle.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
      });
    };
    std::map<std::filesystem::path, std::vector<std::string>> by_folder;
    for (const auto& f : files) {
      const std::filesystem::path p(f);
      by_folder[dir_ / p.parent_path()].push_back(p.filename().string());
    }
    std::vector<std::filesystem::path> removed;
    for (const auto& [folder, patterns] : by_folder) {
      std::error_code ec;
      if (!std::filesystem::is_directory(folder, ec)) continue;
      for (const auto& e : std::filesystem::directory_iterator(folder)) {
        if (!e.is_regular_file()) continue;
        const auto target = detail::temporary_target(e.path().filename().string());
        if (target && std::any_of(patterns.begin(), patterns.end(),
                                  [&](const std::string& p) { return matches(*target, p); })) {
          std::filesystem::remove(e.path());
          removed.push_back(e.path());
        }
      }
    }
    return removed;
  }

  std::filesystem::path dir_;
  RunSpec options_;
  std::optional<std::filesystem::path> resume_from_;
  std::map<std::string, std::string> resume_metadata_;
  std::vector<std::pair<std::filesystem::path, std::string>> incomplete_;
  std::optional<OutputLock> lock_;
};

}  // namespace seqpar::inline v0

#pragma once
// MetricsLog: a run's metrics.jsonl, one JSON object a line ("event": "start", "train",
// "resume", ...; "time" in seconds since the epoch added to each). A line that cannot be
// written ends the run with an Error naming the file: metrics are never lost silently. A
// resumed run supersedes what it redoes: the rows of steps after its checkpoint, logged
// before it stopped, are dropped, so the file holds each step at most once. A row a full disk
// or a kill left torn (no newline) is cut off before the file is written again.

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include "seqpar/core/error.hpp"
#include "seqpar/io/atomic_file.hpp"

namespace seqpar::inline v0 {

class MetricsLog {
 public:
  explicit MetricsLog(std::filesystem::path path) : path_(std::move(path)) {}
  const std::filesystem::path& path() const { return path_; }

  /// Cuts a torn last row (one without its newline: a write that a full disk or a kill
  /// ended) off the file, so that the next row starts a line of its own; returns the bytes
  /// cut (0 when the file ends with a whole row or does not exist).
  std::uintmax_t cut_torn_row() const {
    std::error_code ec;
    const std::uintmax_t size = std::filesystem::file_size(path_, ec);
    if (ec || size == 0) return 0;
    std::ifstream f(path_, std::ios::binary);
    SEQPAR_CHECK(f.is_open(), path_.string(), ": cannot be opened to read the metrics");
    // From the end backwards, a block at a time, to the last newline.
    std::uintmax_t end = size;
    std::string block;
    while (end > 0) {
      const std::uintmax_t n = std::min<std::uintmax_t>(end, 4096);
      block.resize(static_cast<std::size_t>(n));
      f.seekg(static_cast<std::streamoff>(end - n));
      f.read(block.data(), static_cast<std::streamsize>(n));
      SEQPAR_CHECK(f.good(), path_.string(), ": cannot read the metrics");
      const auto at = block.rfind('\n');
      if (at != std::string::npos) {
        end = end - n + at + 1;
        break;
      }
      end -= n;
    }
    if (end == size) return 0;
    f.close();
    std::filesystem::resize_file(path_, end, ec);
    SEQPAR_CHECK(!ec, path_.string(), ": cannot cut its torn last row: ", ec.message());
    return size - end;
  }

  /// Adds "time" (seconds since the epoch) to `event` and appends it as one line.
  void append(nlohmann::json event) const {
    event["time"] =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    std::ofstream f(path_, std::ios::app);
    SEQPAR_CHECK(f.is_open(), path_.string(), ": cannot be opened for appending metrics");
    f << line(event) << "\n";
    f.close();
    SEQPAR_CHECK(!f.fail(), path_.string(), ": writing the metrics failed (a full disk?)");
  }

  /// A run resumed at `step`: every row with a "step" above it (logged before, and done
  /// again now) is dropped, the file rewritten atomically; then `event` (its "event" set
  /// to "resume" and "step" to `step`) is appended. Rows without a step (start, memory,
  /// error, ...) stay: the file keeps the history of each attempt. A line that is not
  /// JSON is kept as it is.
  void resume(std::int64_t step, nlohmann::json event = nlohmann::json::object()) const {
    std::ifstream in(path_);
    if (in.is_open()) {
      std::string kept, text;
      bool dropped = false;
      while (std::getline(in, text)) {
        const auto j = nlohmann::json::parse(text, nullptr, false);
        if (j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
            j["step"].get<std::int64_t>() > step) {
          dropped = true;
          continue;
        }
        kept += text + "\n";
      }
      in.close();
      if (dropped) detail::write_file_atomic(path_, kept);
    }
    event["event"] = "resume";
    event["step"] = step;
    append(std::move(event));
  }

 private:
  static std::string line(const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }

  std::filesystem::path path_;
};

}  // namespace seqpar::inline v0

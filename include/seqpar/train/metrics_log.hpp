#pragma once
// MetricsLog: a run's metrics.jsonl, one JSON object a line ("event": "start", "train",
// "resume", ...; "time" in seconds since the epoch added to each). A line that cannot be
// written ends the run with an Error naming the file: metrics are never lost silently. A
// resumed run supersedes what it redoes: the rows of steps after its checkpoint, logged
// before it stopped, are dropped, so the file holds each step at most once.

#include <nlohmann/json.hpp>

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

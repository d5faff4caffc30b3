#pragma once
// MetricsLog: a run's metrics.jsonl, one JSON object a line ("event": "start", "train",
// "resume", ...; "time" in seconds since the epoch added to each), and the same rows fanned
// out to the reporters a run chose (RunSpec::report_to: TensorBoard's event files). A line
// that cannot be written ends the run with an Error naming the file: metrics are never lost
// silently. A resumed run supersedes what it redoes: the rows of steps after its checkpoint,
// logged before it stopped, are dropped, so the file holds each step at most once. A row a full
// disk or a kill left torn (no newline) is cut off before the file is written again.

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/io/atomic_file.hpp"
#include "seqpar/io/tensorboard.hpp"
#include "seqpar/train/launch.hpp"  // host_name

namespace seqpar::inline v0 {

/// Where a run's rows go besides metrics.jsonl, the run's own record (a resume rewrites it),
/// which is always written.
enum class Reporter : std::uint8_t {
  tensorboard,  // event files of the rows' numbers (TensorBoardReporter)
};
inline constexpr std::array reporters{Reporter::tensorboard};

inline std::string_view reporter_name(Reporter r) {
  switch (r) {
    case Reporter::tensorboard: return "tensorboard";
  }
  return "?";
}

/// The names of `rs`, comma-separated ("none" for none).
inline std::string reporter_names(std::span<const Reporter> rs) {
  std::string out;
  for (const Reporter r : rs) (out += out.empty() ? "" : ",") += reporter_name(r);
  return out.empty() ? "none" : out;
}

/// The reporters as the agreement between ranks shows them (core/fields.hpp).
inline std::string field_text(const std::vector<Reporter>& rs) { return reporter_names(rs); }

namespace detail {
// A row's number as a summary's float: beyond float's range, an infinity (a conversion out
// of range is undefined).
inline float summary_float(double x) {
  if (std::isnan(x) || std::abs(x) <= std::numeric_limits<float>::max())
    return static_cast<float>(x);
  const float inf = std::numeric_limits<float>::infinity();
  return x > 0 ? inf : -inf;
}

// The numbers of `j`, tagged `prefix` + their key (an object's: recursively, "key/").
inline void add_scalars(std::vector<Scalar>& out, const nlohmann::json& j,
                        const std::string& prefix) {
  for (const auto& [key, v] : j.items()) {
    if (v.is_object())
      add_scalars(out, v, prefix + key + "/");
    else if (v.is_number())
      out.push_back({prefix + key, summary_float(v.get<double>())});
  }
}
}  // namespace detail

/// The numbers of a measuring row ("train": a step's, "eval": an evaluation's) as TensorBoard
/// scalars tagged "<event>/<field>" (nested objects "<event>/<field>/<key>"), as transformers
/// tags them: every number but the step and the time, which the event carries. Other rows
/// (start, resume, ranks, end, ...) record the run's course and give none.
inline std::vector<Scalar> row_scalars(const nlohmann::json& row) {
  std::vector<Scalar> out;
  const auto event = row.find("event");
  if (event == row.end() || (*event != "train" && *event != "eval")) return out;
  nlohmann::json fields = row;
  for (const char* own : {"event", "step", "time"}) fields.erase(own);
  detail::add_scalars(out, fields, event->get<std::string>() + "/");
  return out;
}

/// A run's rows as TensorBoard scalars (row_scalars), in a new event file of `dir` (one an
/// attempt: TensorBoard reads them all). Each file's first scalars come after a session
/// start at their step, so that TensorBoard drops what an earlier attempt logged at or after
/// it (the steps a resume redoes), as MetricsLog::resume drops them from metrics.jsonl.
class TensorBoardReporter {
 public:
  explicit TensorBoardReporter(const std::filesystem::path& dir) : file_(dir, host_name()) {}
  const std::filesystem::path& path() const { return file_.path(); }

  /// The row's scalars at its "step", at its "time" (a row without a step gives none).
  void report(const nlohmann::json& row) {
    const auto step = row.find("step");
    if (step == row.end() || !step->is_number_integer()) return;
    const std::vector<Scalar> values = row_scalars(row);
    if (values.empty()) return;
    const double time = row.value("time", EventFileWriter::wall_time());
    if (!started_) file_.session_start(step->get<std::int64_t>(), time);
    started_ = true;
    file_.scalars(step->get<std::int64_t>(), time, values);
  }

 private:
  EventFileWriter file_;
  bool started_ = false;
};

class MetricsLog {
 public:
  /// metrics.jsonl at `path`; with Reporter::tensorboard in `report_to`, a new event file in
  /// `logging_dir` too.
  explicit MetricsLog(std::filesystem::path path, std::span<const Reporter> report_to = {},
                      const std::filesystem::path& logging_dir = {})
      : path_(std::move(path)) {
    for (const Reporter r : report_to)
      if (r == Reporter::tensorboard && !tensorboard_) tensorboard_.emplace(logging_dir);
  }
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

  /// Adds "time" (seconds since the epoch) to `event`, appends it as one line and hands it
  /// to each reporter.
  void append(nlohmann::json event) const {
    event["time"] =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    std::ofstream f(path_, std::ios::app);
    SEQPAR_CHECK(f.is_open(), path_.string(), ": cannot be opened for appending metrics");
    f << line(event) << "\n";
    f.close();
    SEQPAR_CHECK(!f.fail(), path_.string(), ": writing the metrics failed (a full disk?)");
    if (tensorboard_) tensorboard_->report(event);
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
  mutable std::optional<TensorBoardReporter> tensorboard_;  // appending changes no row
};

}  // namespace seqpar::inline v0

#pragma once
// A rank's report at the end of a run (where it ran, its peak memory, the bytes it moved in
// training steps), gathered from every rank and written as metrics.jsonl's "ranks" event.

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "seqpar/comm/any_comm.hpp"
#include "seqpar/comm/text.hpp"
#include "seqpar/core/arena.hpp"
#include "seqpar/parallel/mesh.hpp"

namespace seqpar::inline v0 {

/// The bytes a rank's communicators moved in training steps, by axis, and the steps they
/// were counted over; saves and loads are not counted.
struct StepBytes {
  std::int64_t steps = 0;
  PerAxis<std::uint64_t> sent{};
};

/// A rank's report at the end of a run: where it ran, its peak memory by category over the
/// run's steps, the peak before them (building the model, which ZeRO-3 does whole before it
/// shards it, and loading a checkpoint), and the bytes it moved in training steps.
struct RankReport {
  std::int64_t rank = 0, pid = 0, total_peak = 0, build_peak = 0;
  std::array<std::int64_t, memory_kinds> peak{};
  std::string device = "cpu";  // e.g. "cuda:0 NVIDIA H200"
  StepBytes bytes;

  void add(const MemoryStats& m) {
    total_peak = std::max(total_peak, m.total_peak);
    for (std::size_t k = 0; k < peak.size(); ++k) peak[k] = std::max(peak[k], m.peak[k]);
  }
};

/// Peak bytes per arena category, by the categories' names.
inline nlohmann::json memory_peaks_json(const std::array<std::int64_t, memory_kinds>& peak) {
  nlohmann::json j = nlohmann::json::object();
  for (std::size_t k = 0; k < memory_kinds; ++k) j[memory_name(static_cast<Memory>(k))] = peak[k];
  return j;
}

/// Bytes sent by axis, by the axes' names.
inline nlohmann::json bytes_json(const PerAxis<std::uint64_t>& sent) {
  nlohmann::json j = nlohmann::json::object();
  for (const MeshAxis a : mesh_axes) j[axis_name(a)] = sent[a];
  return j;
}

/// A report as metrics.jsonl holds it.
inline nlohmann::json rank_report_json(const RankReport& r) {
  return {{"rank", r.rank},
          {"pid", r.pid},
          {"device", r.device},
          {"peak_bytes", r.total_peak},
          {"build_peak_bytes", r.build_peak},
          {"by", memory_peaks_json(r.peak)},
          {"steps", r.bytes.steps},
          {"bytes_sent", bytes_json(r.bytes.sent)}};
}

/// The "ranks" event of metrics.jsonl: each rank's pid, device, peak memory (in all and by
/// category) and the bytes it sent in training steps by axis.
inline nlohmann::json rank_reports_json(const std::vector<RankReport>& ranks) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : ranks) list.push_back(rank_report_json(r));
  return {{"event", "ranks"}, {"ranks", list}};
}

/// Collective: every rank's report, in rank order, on every rank (sent as its JSON text).
inline std::vector<RankReport> gather_rank_reports(AnyComm& world, RankReport mine) {
  mine.rank = world.rank();
  mine.pid = ::getpid();
  std::vector<RankReport> ranks;
  for (const auto& text : all_gather_text(world, rank_report_json(mine).dump())) {
    const auto j = nlohmann::json::parse(text);
    RankReport r;
    r.rank = j.at("rank").get<std::int64_t>();
    r.pid = j.at("pid").get<std::int64_t>();
    r.device = j.at("device").get<std::string>();
    r.total_peak = j.at("peak_bytes").get<std::int64_t>();
    r.build_peak = j.at("build_peak_bytes").get<std::int64_t>();
    for (std::size_t k = 0; k < memory_kinds; ++k)
      r.peak[k] = j.at("by").at(memory_name(static_cast<Memory>(k))).get<std::int64_t>();
    r.bytes.steps = j.at("steps").get<std::int64_t>();
    for (const MeshAxis a : mesh_axes)
      r.bytes.sent[a] = j.at("bytes_sent").at(axis_name(a)).get<std::uint64_t>();
    ranks.push_back(std::move(r));
  }
  return ranks;
}

}  // namespace seqpar::inline v0

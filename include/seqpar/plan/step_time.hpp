#pragma once
// A step time from stated assumptions (compute, each axis's bytes, the update; only offload's
// downloads overlap) and the largest micro-batch that fits, so a layout can be chosen before
// launch.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "seqpar/plan/predict.hpp"

namespace seqpar::inline v0 {

/// What a GPU and its links are taken to do. Rates are dense peaks; bandwidths per
/// direction, GB/s = 1e9 bytes per second.
struct Hardware {
  std::string name = "h200";
  double memory_gib = 140;   // usable device memory
  double tflops_16 = 989;    // bf16/fp16 tensor cores, fp32 accumulation
  double tflops_32 = 67;     // fp32 without tensor cores
  double efficiency = 0.4;   // the fraction of the peak the GEMMs reach (MFU)
  double hbm_gbps = 4800;    // device memory bandwidth
  double link_gbps = 450;    // between GPUs of a node: NVLink, or PCIe where there is none
  double network_gbps = 25;  // between nodes, per GPU (200 Gb/s InfiniBand)
  double pcie_gbps = 25;     // host <-> device (offload)
  double host_gbps = 50;     // host memory bandwidth (the host AdamW)
  int gpus_per_node = 8;
};

/// The GPU presets by name: published peaks and bandwidths.
inline std::vector<Hardware> hardware_presets() {
  // name, GiB, bf16 TFLOP/s, fp32 TFLOP/s, efficiency, HBM, node link, network, PCIe, host,
  // GPUs/node
  return {
      {"h200", 140, 989, 67, 0.4, 4800, 450, 25, 55, 50, 8},
      {"h100", 80, 989, 67, 0.4, 3350, 450, 25, 55, 50, 8},
      {"a100-40", 40, 312, 19.5, 0.4, 1555, 300, 25, 25, 50, 8},
      {"a100-80", 80, 312, 19.5, 0.4, 2039, 300, 25, 25, 50, 8},
      {"rtx4090", 24, 165, 82.6, 0.4, 1008, 25, 12.5, 25, 50, 8},
      {"rtx3090", 24, 71, 35.6, 0.4, 936, 25, 12.5, 25, 50, 8},
  };
}

/// A CPU rank: its memory is the host's, so its device and host
/// bytes share one budget; the rates are what seqpar's step reaches on two cores of an AMD
/// EPYC (family 25, model 1: AVX2 + FMA, no AVX-512; docs/cpu.md), bf16 computing in fp32
/// there (the conversion path), the ranks of a machine exchanging through its memory.
inline Hardware cpu_hardware() {
  // name, GiB, 16-bit TFLOP/s, fp32 TFLOP/s, efficiency (the rates are reached ones), memory
  // GB/s, between ranks of a machine, network, "PCIe" (a copy in memory), host, ranks/machine
  return {"cpu", 64, 0.1, 0.1, 1.0, 20, 10, 12.5, 10, 20, 2};
}

inline std::optional<Hardware> hardware_preset(const std::string& name) {
  for (const Hardware& h : hardware_presets())
    if (h.name == name) return h;
  return std::nullopt;
}

/// The parts of a step's predicted time, in seconds.
struct StepTime {
  double compute = 0, comm = 0, update = 0;
  double total() const { return compute + comm + update; }
};

/// The predicted time of one step of rank `r` of q's plan on hardware h.
inline StepTime step_time(const PlanQuery& q, const RankPrediction& r, const Hardware& h) {
  const PlanDesc& p = q.plan;
  StepTime s;
  const double peak = (q.mixed() ? h.tflops_16 : h.tflops_32) * 1e12 * h.efficiency;
  const double bubble =
      p.pipeline > 1 ? static_cast<double>(p.pipeline - 1) / static_cast<double>(q.micro_batches)
                     : 0.0;
  s.compute = r.flops / peak * (1 + bubble);
  // the mesh puts tensor ranks innermost, then data, then pipeline
  const auto bw = [&](int span) {
    return (span <= h.gpus_per_node ? h.link_gbps : h.network_gbps) * 1e9;
  };
  s.comm = static_cast<double>(r.tensor.total_bytes_sent()) / bw(p.tensor) +
           static_cast<double>(r.data.total_bytes_sent()) / bw(p.tensor * p.data) +
           static_cast<double>(r.pipeline.total_bytes_sent()) / bw(p.world_size());
  const auto device_state = static_cast<double>(r.of(Memory::parameters) + r.of(Memory::gradients) +
                                                r.of(Memory::optimizer));
  s.update = 2 * device_state / (h.hbm_gbps * 1e9);
  if (q.offload != Offload::none) {
    const auto elems = static_cast<double>(r.range_elements);
    const bool params_offloaded = q.offload == Offload::optimizer_and_params && p.zero_stage == 3;
    // a ring all-gather sends (D - 1) shards a call: the uploads are 1 / (D - 1) of that
    const double uploads =
        params_offloaded && p.data > 1
            ? static_cast<double>(r.data[CollectiveKind::all_gather].bytes_sent) / (p.data - 1)
            : 0;
    const auto t = static_cast<double>(q.storage_bytes());
    const double pcie = h.pcie_gbps * 1e9, backward = s.compute * 2.0 / 3.0;
    const double down = t * elems / pcie;
    const double down_last = t * static_cast<double>(r.last_range_elements) / pcie;
    s.update += std::max(down_last, down - backward) +
                (28 + (q.mixed() ? 6 : 0)) * elems / (h.host_gbps * 1e9) +
                ((params_offloaded ? 0 : t) * elems + uploads) / pcie;
  }
  return s;
}

/// The worst rank's step time of q's plan (the step ends when the slowest rank's does).
inline double step_seconds(const PlanQuery& q, const PlanPrediction& pred, const Hardware& h) {
  double w = 0;
  for (const auto& r : pred.ranks) w = std::max(w, step_time(q, r, h).total());
  return w;
}

/// The largest micro-batch (rows) whose worst rank's device peak fits in `budget_bytes`
/// (with `joint`, its device and host bytes together: a CPU rank, whose device memory is
/// the host's), at most `limit`; 0 when not even one row fits. The peak grows with the rows.
inline std::int64_t max_micro_batch(PlanQuery q, std::int64_t budget_bytes,
                                    std::int64_t limit = 1 << 16, bool joint = false) {
  const auto fits = [&](std::int64_t rows) {
    q.micro_batch_rows = rows;
    q.targets_per_micro_batch = -1;
    const PlanPrediction p = predict(q);
    return (joint ? p.worst_joint_peak() : p.worst_device_peak()) <= budget_bytes;
  };
  if (!fits(1)) return 0;
  std::int64_t lo = 1, hi = 2;
  while (hi <= limit && fits(hi)) lo = hi, hi *= 2;
  if (hi > limit) return lo;
  while (hi - lo > 1) {  // fits(lo), !fits(hi)
    const std::int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace seqpar::inline v0

#pragma once
// Offload: which state a rank keeps in host memory (DeepSpeed's offload_optimizer and
// offload_param) and the optimizer state there. On Cpu the same path runs with plain copies, so
// CPU tests check it bit for bit against the on-device step.

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "seqpar/backend/device.hpp"
#include "seqpar/backend/kernels.hpp"
#include "seqpar/config/memory_modes.hpp"
#include "seqpar/config/units.hpp"
#include "seqpar/core/arena.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/optim/host_adamw.hpp"
#include "seqpar/optim/host_convert.hpp"
#include "seqpar/optim/segments.hpp"

namespace seqpar::inline v0 {

/// One part of a rank's AdamW state over its range of a unit.
enum class AdamPart : std::uint8_t { master, m, v };

/// The AdamW state of one unit's range in host memory: master weights (also for float
/// models, whose device weights are then the working copy), moments m and v, `size`
/// elements each, of which [begin, end) of the unit are updated.
template <class M, class HostArenaT>
struct HostAdamState {
  std::int64_t begin = 0, end = 0;
  Buffer<M, HostArenaT> master, m, v;
};

/// host[0, n) = dev[0, n) converted to M (on the device, into a transient buffer of the
/// device arena, when the types differ): the master weights' first values, and a float
/// model's weights read as its master ones.
template <Device D, class M, class T, class ArenaT>
void download_as(M* host, const T* dev, std::int64_t n, ArenaT& arena) {
  if (n <= 0) return;
  if constexpr (std::is_same_v<M, T>) {
    Ops<D>::download(host, dev, n);
  } else {
    Buffer<M, ArenaT> wide(arena, static_cast<std::size_t>(n), Memory::buffers);
    Ops<D>::convert(wide.data(), dev, n);
    Ops<D>::download(host, wide.data(), n);
  }
}

/// Makes s the zero state of elements [begin, end) of a unit (`size` elements long), its
/// master weights the values of the device range `p` (T, converted to M).
template <Device D, class M, class T, class HostArenaT, class ArenaT>
void host_adam_init(HostAdamState<M, HostArenaT>& s, HostArenaT& host, ArenaT& dev,
                    std::int64_t begin, std::int64_t end, std::int64_t size, const T* p) {
  s.begin = begin;
  s.end = end;
  const auto n = static_cast<std::size_t>(size);
  s.master = Buffer<M, HostArenaT>(host, n, Memory::host_optimizer);
  s.m = Buffer<M, HostArenaT>(host, n, Memory::host_optimizer);
  s.v = Buffer<M, HostArenaT>(host, n, Memory::host_optimizer);
  download_as<D>(s.master.data(), p, size, dev);
}

/// AdamW on the host over s's range of unit `u`: g (host memory, M) holds the range's
/// gradients from element s.begin; they are multiplied by grad_factor first. One
/// host_adamw call per run of tensors with the same decay flag.
template <class M, class HostArenaT>
void host_adamw_update(HostAdamState<M, HostArenaT>& s, const M* g, const UnitTable& u,
                       const kernels::AdamCoeffs& c, double grad_factor = 1.0) {
  for_each_segments<bool>(
      u, s.begin, s.end, [](const ParamSpec& spec) { return spec.decay; },
      [&](std::int64_t k, const kernels::Segments<bool>& decay) {
        host_adamw(s.master.data() + k, g + k, s.m.data() + k, s.v.data() + k, decay, c,
                   static_cast<M>(grad_factor));
      });
}

/// Elements of a 16-bit model's gradients widened to fp32 at once for the host AdamW: a
/// block (4 MiB) that stays in cache between the widening and the update, so the host
/// holds its gradients at 2 bytes an element plus one block, not 4 bytes an element.
inline constexpr std::int64_t host_widen_block = std::int64_t{1} << 20;

/// host_adamw_update for a 16-bit model: g (host memory) holds the range's gradients as the
/// device stores them (dtype dt: bf16 or fp16 bits), from element s.begin; they are widened
/// block by block into `wide` (min(host_widen_block, range) values) exactly as the device
/// widens, so the update gives the bits of the device's adamw_mixed.
template <class M, class HostArenaT, class H>
void host_adamw_update_widened(HostAdamState<M, HostArenaT>& s, const H* g, DType dt, M* wide,
                               const UnitTable& u, const kernels::AdamCoeffs& c,
                               double grad_factor) {
  for (std::int64_t b0 = s.begin; b0 < s.end; b0 += host_widen_block) {
    const std::int64_t b1 = std::min(s.end, b0 + host_widen_block), at = b0 - s.begin;
    host_widen(wide, g + at, b1 - b0, dt);
    for_each_segments<bool>(
        u, b0, b1, [](const ParamSpec& spec) { return spec.decay; },
        [&](std::int64_t k, const kernels::Segments<bool>& decay) {
          host_adamw(s.master.data() + at + k, wide + k, s.m.data() + at + k, s.v.data() + at + k,
                     decay, c, static_cast<M>(grad_factor));
        });
  }
}

}  // namespace seqpar::inline v0

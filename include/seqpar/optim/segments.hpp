#pragma once
// for_each_segments: a unit's flat range cut at its tensors into kernels::Segments tables
// (decay flags, norm weights), so that AdamW and the gradient norm take one call a unit.

#include <algorithm>
#include <cstdint>

#include "seqpar/backend/kernels.hpp"
#include "seqpar/config/units.hpp"

namespace seqpar::inline v0 {

/// Cuts the elements [begin, end) of a unit's flat buffer at its tensors, each tensor's
/// piece of value value_of(spec), and calls fn(offset, segments) for consecutive runs of
/// them: `segments` starts at element begin + offset. Neighbours of equal value share a
/// segment, so a whole block takes one call (a multi-tensor AdamW or norm); more calls
/// only past kernels::Segments<V>::capacity.
template <class V, class ValueOf, class Fn>
void for_each_segments(const UnitTable& u, std::int64_t begin, std::int64_t end, ValueOf&& value_of,
                       Fn&& fn) {
  kernels::Segments<V> segs;
  std::int64_t start = 0;  // segs' first element, from begin
  for (const auto& spec : u.params) {
    const std::int64_t lo = std::max(begin, spec.offset),
                       hi = std::min(end, spec.offset + spec.numel());
    if (lo >= hi) continue;
    const V v = value_of(spec);
    if (segs.count > 0 && (lo - begin != start + segs.size() || !segs.can_append(v))) {
      fn(start, segs);
      segs = {};
    }
    if (segs.count == 0) start = lo - begin;
    segs.append(hi - lo, v);
  }
  if (segs.count > 0) fn(start, segs);
}

}  // namespace seqpar::inline v0

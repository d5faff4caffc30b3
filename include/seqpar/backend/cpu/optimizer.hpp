#pragma once
// AdamW on the CPU: the element body of backend/kernels.hpp (the one the CUDA kernels
// run), over the segments of a flat range, each with its decay flag; and the mixed form of
// 16-bit models (fp32 master weights and moments). Float runs eight lanes at a time where
// AVX2 is on. Part of Ops<Cpu>.

#ifndef SEQPAR_BACKEND_CPU_OPS_INCLUDED
#error "backend/cpu/optimizer.hpp is a part of Ops<Cpu>: include seqpar/backend/cpu/ops.hpp instead"
#endif

#include <cstdint>

#include "seqpar/backend/cpu/loops.hpp"
#include "seqpar/backend/kernels.hpp"
#include "seqpar/core/omp.hpp"

namespace seqpar::inline v0::detail::cpu {

// AdamW on decay.size() elements, each segment with its decay flag.
template <class T>
void adamw(T* p, const T* g, T* m, T* v, const kernels::Segments<bool>& decay,
           const kernels::AdamCoeffs& c) {
  for (int k = 0; k < decay.count; ++k) {
    const std::int64_t b = decay.begin(k);
    T *pk = p + b, *mk = m + b, *vk = v + b;
    const T* gk = g + b;
    const bool dk = decay.value[k];
    for_lanes<T>(decay.end[k] - b, [&](auto lane, std::int64_t i) {
      using V = decltype(lane);
      V pv = load_lanes<V>(pk + i), mv = load_lanes<V>(mk + i), vv = load_lanes<V>(vk + i);
      kernels::adamw(pv, load_lanes<V>(gk + i), mv, vv, c, dk);
      store_lanes(pk + i, pv);
      store_lanes(mk + i, mv);
      store_lanes(vk + i, vv);
    });
  }
}

// AdamW on fp32 master weights and moments, gradient g (float or 16-bit) times
// grad_factor, each segment of `decay` with its flag; the updated master weight is rounded
// into weight[i] (skipped when weight is null). Eight lanes at a time where AVX2 is on,
// the same bits as host_adamw's update of an offloaded range.
template <class W, class G>
void adamw_mixed(float* master, W* weight, const G* g, float* m, float* v,
                 const kernels::Segments<bool>& decay, const kernels::AdamCoeffs& c,
                 float grad_factor) {
  for (int k = 0; k < decay.count; ++k) {
    const std::int64_t b = decay.begin(k);
    float *pk = master + b, *mk = m + b, *vk = v + b;
    const G* gk = g + b;
    W* wk = weight ? weight + b : nullptr;
    const bool dk = decay.value[k];
    for_lanes<float>(decay.end[k] - b, [&](auto lane, std::int64_t i) {
      using V = decltype(lane);
      V pv = load_lanes<V>(pk + i), mv = load_lanes<V>(mk + i), vv = load_lanes<V>(vk + i);
      using kernels::mul_of;  // or the lane type's own
      kernels::adamw(pv, mul_of(load_lanes<V>(gk + i), V(grad_factor)), mv, vv, c, dk);
      store_lanes(pk + i, pv);
      store_lanes(mk + i, mv);
      store_lanes(vk + i, vv);
      if (wk) store_lanes(wk + i, pv);
    });
  }
}

}  // namespace seqpar::inline v0::detail::cpu

#pragma once
// Decode attention and the KV-cache store on the CPU: the launchers of Ops<Cpu>'s
// decode_attention and kv_store (backend/cpu/ops.hpp delegates here). One thread does a
// (row, head) with the body of backend/decode_attention.hpp, the body the CUDA kernel runs.

#ifndef SEQPAR_BACKEND_CPU_OPS_INCLUDED
#error \
    "backend/cpu/decode_attention.hpp is a part of Ops<Cpu>: include seqpar/backend/cpu/ops.hpp instead"
#endif

#include <algorithm>
#include <concepts>
#include <cstdint>

#include "seqpar/backend/decode_attention.hpp"
#include "seqpar/core/omp.hpp"

namespace seqpar::inline v0::detail {

// k, v[B, nh, cap, hd] at positions [t0, t0 + S) = the key and value thirds of
// qkv[B*S, 3*nh*hd] (laid out per head as (head, {q,k,v}, hd)).
template <class T>
void cpu_kv_store(T* k, T* v, const T* qkv, std::int64_t B, std::int64_t S, std::int64_t nh,
                  std::int64_t hd, std::int64_t cap, std::int64_t t0) {
  const std::int64_t ld = 3 * nh * hd;
  SEQPAR_OMP(parallel for collapse(2) schedule(static)
                 if (B * S * nh * hd > (std::int64_t{1} << 16)))
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < nh; ++h)
      for (std::int64_t t = 0; t < S; ++t) {
        const T* src = qkv + (b * S + t) * ld + h * 3 * hd;
        const std::int64_t dst = ((b * nh + h) * cap + t0 + t) * hd;
        std::copy_n(src + hd, hd, k + dst);
        std::copy_n(src + 2 * hd, hd, v + dst);
      }
}

// dst[r, h, 0:len, :] = src[index[r], h, 0:len, :] for r < B: the filled positions of a
// cache tensor [rows, nh, cap, hd] gathered by row (beams reordered, a prompt's rows
// repeated). dst and src are distinct buffers of the same capacity.
template <class T, std::integral Id>
void cpu_kv_gather(T* dst, const T* src, const Id* index, std::int64_t B, std::int64_t nh,
                   std::int64_t cap, std::int64_t hd, std::int64_t len) {
  SEQPAR_OMP(parallel for collapse(2) schedule(static)
                 if (B * nh * len * hd > (std::int64_t{1} << 16)))
  for (std::int64_t r = 0; r < B; ++r)
    for (std::int64_t h = 0; h < nh; ++h)
      std::copy_n(src + ((static_cast<std::int64_t>(index[r]) * nh + h) * cap) * hd, len * hd,
                  dst + ((r * nh + h) * cap) * hd);
}

// ctx[B, nh*hd] = attention of each row's new query (in qkv[B, 3*nh*hd]) to its cached
// keys [0, len): k, v[B, nh, cap, hd], pos and valid [B, cap], slopes[nh]; scores
// [B, nh, cap] scratch. The arithmetic is in S (float for 16-bit storage).
template <class T, class S>
void cpu_decode_attention(T* ctx, S* scores, const T* qkv, const T* k, const T* v, const S* pos,
                          const std::uint8_t* valid, const S* slopes, std::int64_t B,
                          std::int64_t nh, std::int64_t hd, std::int64_t cap, std::int64_t len) {
  const std::int64_t Hl = nh * hd;
  SEQPAR_OMP(parallel for collapse(2) schedule(static))
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < nh; ++h) {
      const std::int64_t head = (b * nh + h) * cap;
      kernels::decode_attention_head<S>(kernels::SerialTeam<S>{}, scores + head,
                                        ctx + b * Hl + h * hd, qkv + b * 3 * Hl + h * 3 * hd,
                                        k + head * hd, v + head * hd, pos + b * cap,
                                        valid + b * cap, slopes[h], len, hd);
    }
}

}  // namespace seqpar::inline v0::detail

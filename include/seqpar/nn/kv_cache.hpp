#pragma once
// The decoding state of a stack: every block's cached keys and values, each cached key's
// ALiBi position and mask, and the scratch of one decoding step. Every buffer leads with
// the row (the sequence), so that reordering rows (beams) is one gather of rows per buffer.
// Keys, values, positions and the mask are device memory of kind activations (they belong
// to the sequences being decoded, as a record belongs to its micro-batch); the step's
// scratch is of kind buffers.

#include <cstdint>
#include <vector>

#include "seqpar/backend/device.hpp"
#include "seqpar/core/arena.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/nn/activations.hpp"

namespace seqpar::inline v0 {

/// The keys and values one block keeps: [rows, heads_local, capacity, head_dim] each.
template <class T, class ArenaT>
struct BlockKv {
  Buffer<T, ArenaT> k, v;
};

/// What one decoding step computes in (rows tokens, one per sequence).
template <class T, class ArenaT>
struct DecodeScratch {
  using S = StatScalar<T>;
  Buffer<T, ArenaT> x[2];            // [rows, H] the residual stream, in and out of a block
  Buffer<T, ArenaT> emb, ln, mid;    // [rows, H]
  Buffer<T, ArenaT> qkv;             // [rows, 3 Hl]
  Buffer<T, ArenaT> ctx;             // [rows, Hl]
  Buffer<T, ArenaT> fc, act;         // [rows, Fl]
  Buffer<S, ArenaT> mean, rstd;      // [rows]
  Buffer<S, ArenaT> scores;          // [rows, heads_local, capacity]
  Buffer<std::int32_t, ArenaT> ids;  // [rows] the step's tokens
};

/// A stack's decoding state for `rows` sequences of up to `capacity` positions, of which
/// the first `length` are filled (the prompt's after prefill, one more per step).
template <class T, class ArenaT>
struct KvCache {
  using S = StatScalar<T>;
  std::int64_t rows = 0, capacity = 0, length = 0;
  std::int64_t heads = 0, head_dim = 0;    // this rank's heads, and their width
  std::vector<BlockKv<T, ArenaT>> blocks;  // one per block of the stack
  Buffer<T, ArenaT> spare;                 // a block's k or v, to reorder rows in place
  Buffer<S, ArenaT> pos;                   // [rows, capacity] ALiBi position of each key
  Buffer<std::uint8_t, ArenaT> valid;      // [rows, capacity] the key may be attended
  std::vector<S> host_pos;                 // the host's copies of pos and valid
  std::vector<std::uint8_t> host_valid;
  std::vector<std::int64_t> next_pos;  // [rows] ALiBi position of each row's next token
  Buffer<T, ArenaT> hidden;            // [rows, H] ln_f of each row's last token
  DecodeScratch<T, ArenaT> step;

  /// `layers` blocks of nh local heads of width hd, hidden H and local MLP width Fl.
  KvCache(ArenaT& arena, std::int64_t layers, std::int64_t r, std::int64_t cap, std::int64_t nh,
          std::int64_t hd, std::int64_t H, std::int64_t Fl)
      : rows(r), capacity(cap), heads(nh), head_dim(hd) {
    SEQPAR_CHECK(r > 0 && cap > 0, "KvCache: ", r, " rows of ", cap,
                 " positions; expected positive sizes");
    constexpr Memory kind = Memory::activations;
    const std::int64_t Hl = nh * hd, kv = r * nh * cap * hd;
    blocks.resize(static_cast<std::size_t>(layers));
    for (auto& b : blocks) {
      fit(b.k, arena, kv, kind);
      fit(b.v, arena, kv, kind);
    }
    fit(pos, arena, r * cap, kind);
    fit(valid, arena, r * cap, kind);
    host_pos.assign(static_cast<std::size_t>(r * cap), S(0));
    host_valid.assign(static_cast<std::size_t>(r * cap), 0);
    next_pos.assign(static_cast<std::size_t>(r), 0);
    fit(hidden, arena, r * H, kind);
    auto& st = step;
    for (auto* b : {&st.x[0], &st.x[1], &st.emb, &st.ln, &st.mid}) grow(arena, *b, r * H);
    grow(arena, st.qkv, r * 3 * Hl);
    grow(arena, st.ctx, r * Hl);
    grow(arena, st.fc, r * Fl);
    grow(arena, st.act, r * Fl);
    grow(arena, st.mean, r);
    grow(arena, st.rstd, r);
    grow(arena, st.scores, r * nh * cap);
    grow(arena, st.ids, r);
  }
};

}  // namespace seqpar::inline v0

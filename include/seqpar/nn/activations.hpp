#pragma once
// Activation records: what a micro-batch's forward keeps for its backward. They belong
// to the micro-batch, not to the layer, so a pipeline stage can hold several in flight.

#include <cstdint>
#include <vector>

#include "seqpar/core/arena.hpp"
#include "seqpar/train/batch.hpp"

namespace seqpar::inline v0 {

/// What one block keeps (N = rows * seq tokens, Hl/Fl/nh the local hidden, MLP and heads).
template <class T, class ArenaT>
struct BlockActivations {
  Buffer<T, ArenaT> ln1, ln1_mean, ln1_rstd;  // [N, H], [N], [N]
  Buffer<T, ArenaT> qkv;                      // [N, 3 Hl]
  Buffer<T, ArenaT> probs;                    // [rows, nh, seq, seq]
  Buffer<T, ArenaT> ctx;                      // [N, Hl]
  Buffer<T, ArenaT> x_mid;                    // [N, H] residual after attention
  Buffer<T, ArenaT> ln2, ln2_mean, ln2_rstd;  // [N, H], [N], [N]
  Buffer<T, ArenaT> fc_pre, fc_act;           // [N, Fl]
};

/// Everything one micro-batch keeps on one stage.
template <class T, class ArenaT>
struct Activations {
  std::int64_t rows = 0, seq = 0;
  std::vector<std::int32_t> ids, targets;  // [N]: input ids; the shifted labels (-100 = ignored)
  Buffer<T, ArenaT> pos;                   // [N] ALiBi key positions
  Buffer<std::uint8_t, ArenaT> valid;      // [N] key may be attended
  Buffer<T, ArenaT> emb, emb_mean, emb_rstd;  // [N, H] raw embedding rows (first stage)
  std::vector<Buffer<T, ArenaT>> x;           // [N, H] residual stream: x[0] in, x[layers] out
  std::vector<BlockActivations<T, ArenaT>> blocks;
  Buffer<T, ArenaT> hf, hf_mean, hf_rstd;     // [N, H] after ln_f (last stage)

  std::int64_t tokens() const { return rows * seq; }

  /// Reads positions, validity and shifted targets from a batch.
  void set_batch(const BatchView& b, ArenaT& arena) {
    rows = b.rows;
    seq = b.seq;
    const auto n = static_cast<std::size_t>(b.tokens());
    ids.assign(b.input_ids.begin(), b.input_ids.end());
    targets.assign(n, ignore_index);
    pos = Buffer<T, ArenaT>(arena, n, Memory::activations);
    valid = Buffer<std::uint8_t, ArenaT>(arena, n, Memory::activations);
    for (std::int64_t r = 0; r < rows; ++r) {
      std::int64_t seen = 0;
      for (std::int64_t t = 0; t < seq; ++t) {
        const auto i = static_cast<std::size_t>(r * seq + t);
        const bool m = b.attention_mask[i] != 0;
        seen += m;
        // (cumsum(mask) - 1) * mask: left padding shifts positions to start at 0.
        pos[i] = m ? T(seen - 1) : T(0);
        valid[i] = m;
        if (t + 1 < seq) targets[i] = b.labels[i + 1];
      }
    }
  }
};

}  // namespace seqpar::inline v0

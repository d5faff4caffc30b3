#pragma once
// Activation records: what a micro-batch's forward keeps for its backward. They belong
// to the micro-batch, not to the layer, so a pipeline stage can hold several in flight.
// Buffers live on the device of their arena; a record used again for a micro-batch of
// the same shape keeps its buffers (fill() reallocates only when a size changes).

#include <cstdint>
#include <vector>

#include "seqpar/backend/device.hpp"
#include "seqpar/core/arena.hpp"
#include "seqpar/core/batch.hpp"

namespace seqpar::inline v0 {

/// Makes `b` a buffer of n elements of kind `kind`, keeping the one it holds when it has
/// that size already (its contents are then whatever the last use left there).
template <class T, class ArenaT>
void fit(Buffer<T, ArenaT>& b, ArenaT& arena, std::int64_t n, Memory kind) {
  if (static_cast<std::int64_t>(b.size()) != n)
    b = Buffer<T, ArenaT>(arena, static_cast<std::size_t>(n), kind);
}

/// Makes `b` hold at least n elements (scratch of kind buffers: it only grows).
template <class T, class ArenaT>
void grow(ArenaT& arena, Buffer<T, ArenaT>& b, std::int64_t n) {
  if (static_cast<std::int64_t>(b.size()) < n)
    b = Buffer<T, ArenaT>(arena, static_cast<std::size_t>(n), Memory::buffers);
}

/// What one block keeps (N = rows * seq tokens, Hl/Fl/nh the local hidden, MLP and heads).
/// S is the type of the layernorm statistics (float for 16-bit storage).
template <class T, class ArenaT>
struct BlockActivations {
  using S = StatScalar<T>;
  Buffer<T, ArenaT> ln1;                 // [N, H]
  Buffer<S, ArenaT> ln1_mean, ln1_rstd;  // [N], [N]
  Buffer<T, ArenaT> qkv;                 // [N, 3 Hl]
  Buffer<T, ArenaT> probs;               // [rows, nh, seq, seq] (standard attention)
  Buffer<S, ArenaT> lse;                 // [rows, nh, seq] log-sum-exp per query (fused attention)
  Buffer<T, ArenaT> ctx;                 // [N, Hl]
  Buffer<T, ArenaT> x_mid;               // [N, H] residual after attention
  Buffer<T, ArenaT> ln2;                 // [N, H]
  Buffer<S, ArenaT> ln2_mean, ln2_rstd;  // [N], [N]
  Buffer<T, ArenaT> fc_pre, fc_act;      // [N, Fl]
};

/// Everything one micro-batch keeps on one stage.
template <class T, class ArenaT>
struct Activations {
  using S = StatScalar<T>;
  std::int64_t rows = 0, seq = 0;
  std::vector<std::int32_t> targets;     // [N] the shifted labels (-100 = ignored), host
  Buffer<std::int32_t, ArenaT> ids;      // [N] input ids
  Buffer<S, ArenaT> pos;                 // [N] ALiBi key positions
  Buffer<std::uint8_t, ArenaT> valid;    // [N] key may be attended
  Buffer<T, ArenaT> emb;                 // [N, H] raw embedding rows (first stage)
  Buffer<S, ArenaT> emb_mean, emb_rstd;  // [N]
  std::vector<Buffer<T, ArenaT>> x;      // [N, H] residual stream: x[0] in, x[layers] out
  std::vector<BlockActivations<T, ArenaT>> blocks;
  Buffer<T, ArenaT> hf;                // [N, H] after ln_f (last stage)
  Buffer<S, ArenaT> hf_mean, hf_rstd;  // [N]

  std::int64_t tokens() const { return rows * seq; }

  /// Reads ids, positions, validity and shifted targets from a batch; ids, positions and
  /// validity are made on the host and uploaded to device D's memory.
  template <Device D>
  void set_batch(const BatchView& b, ArenaT& arena) {
    rows = b.rows;
    seq = b.seq;
    const auto n = static_cast<std::size_t>(b.tokens());
    targets.assign(n, ignore_index);
    std::vector<S> host_pos(n);
    std::vector<std::uint8_t> host_valid(n);
    for (std::int64_t r = 0; r < rows; ++r) {
      std::int64_t seen = 0;
      for (std::int64_t t = 0; t < seq; ++t) {
        const auto i = static_cast<std::size_t>(r * seq + t);
        const bool m = b.attention_mask[i] != 0;
        seen += m;
        // (cumsum(mask) - 1) * mask: left padding shifts positions to start at 0.
        host_pos[i] = m ? static_cast<S>(seen - 1) : S(0);
        host_valid[i] = m;
        if (t + 1 < seq) targets[i] = b.labels[i + 1];
      }
    }
    const auto count = static_cast<std::int64_t>(n);
    fit(ids, arena, count, Memory::activations);
    fit(pos, arena, count, Memory::activations);
    fit(valid, arena, count, Memory::activations);
    Ops<D>::upload(ids.data(), b.input_ids.data(), count);
    Ops<D>::upload(pos.data(), host_pos.data(), count);
    Ops<D>::upload(valid.data(), host_valid.data(), count);
  }
};

}  // namespace seqpar::inline v0

#pragma once
// One BLOOM block, forward and hand-written backward:
//   h = input_layernorm(x); x_mid = x + dense(attn(h))
//   h = post_attention_layernorm(x_mid); out = x_mid + dense_4h_to_h(gelu(dense_h_to_4h(h)))
// query_key_value and dense_h_to_4h are column-split over the tensor axis, dense and
// dense_4h_to_h row-split: one tensor-axis sum after each of those in the forward and one
// before each layernorm in the backward. The decoding form: prefill is the forward over the
// prompts that also stores their keys and values in the block's cache; a decoding step
// runs the same calls on one new token per row, its attention against the cache.

#include <cstdint>
#include <vector>

#include "seqpar/backend/device.hpp"
#include "seqpar/config/memory_modes.hpp"
#include "seqpar/nn/activations.hpp"
#include "seqpar/nn/kv_cache.hpp"
#include "seqpar/nn/params.hpp"

namespace seqpar::inline v0 {

/// Shapes of a block on one tensor rank.
struct BlockShape {
  std::int64_t hidden, heads_local, head_dim, ffn_local, head0, heads_total;
  double eps;
  std::int64_t hidden_local() const { return heads_local * head_dim; }
};

/// How a block computes attention. `standard`: Ops<D>::attention_forward/backward, the
/// probabilities [rows, nh, seq, seq] kept (or recomputed, see block_forward). `fused`:
/// Ops<D>::flash_attention_forward/backward, flash-style tiles with an online softmax; the
/// record keeps a log-sum-exp per query [rows, nh, seq] instead, and the backward makes
/// each tile's probabilities again from it.
enum class AttentionKind { standard, fused };

/// Scratch a block's backward needs, sized for the largest micro-batch seen.
template <class T, class ArenaT>
struct BlockScratch {
  Buffer<T, ArenaT> d_fc;     // [N, Fl]
  Buffer<T, ArenaT> d_ln;     // [N, H]
  Buffer<T, ArenaT> d_ctx;    // [N, Hl]
  Buffer<T, ArenaT> d_qkv;    // [N, 3 Hl]
  Buffer<T, ArenaT> d_probs;  // [rows, nh, seq, seq]
  Buffer<T, ArenaT> probs;    // [rows, nh, seq, seq] attention probabilities a record does not keep
  Buffer<StatScalar<T>, ArenaT>
      delta;  // [rows, nh, seq] fused backward: rowsum(d ctx * ctx) per head

  void reserve(ArenaT& arena, const BlockShape& s, std::int64_t rows, std::int64_t seq) {
    const std::int64_t n = rows * seq;
    grow(arena, d_fc, n * s.ffn_local);
    grow(arena, d_ln, n * s.hidden);
    grow(arena, d_ctx, n * s.hidden_local());
    grow(arena, d_qkv, n * 3 * s.hidden_local());
  }
  // The standard backward's d scores; the fused one needs only delta.
  T* d_probs_for(ArenaT& arena, const BlockShape& s, std::int64_t rows, std::int64_t seq) {
    grow(arena, d_probs, rows * s.heads_local * seq * seq);
    return d_probs.data();
  }
  StatScalar<T>* delta_for(ArenaT& arena, const BlockShape& s, std::int64_t rows,
                           std::int64_t seq) {
    grow(arena, delta, rows * s.heads_local * seq);
    return delta.data();
  }
  T* probs_for(ArenaT& arena, const BlockShape& s, std::int64_t rows, std::int64_t seq) {
    grow(arena, probs, rows * s.heads_local * seq * seq);
    return probs.data();
  }
};

/// x[N, H] -> out[N, H]; `a` keeps what the backward needs (its buffers are reused when
/// their sizes did not change). slopes[heads_total] are the ALiBi slopes in device memory.
/// With `recompute` the attention probabilities go to that scratch and the record keeps
/// none; the backward makes them again (the same bits) from the kept qkv: one more q k^T
/// GEMM and softmax per block for [rows, nh, seq, seq] less per record, as Megatron's
/// selective recomputation. Without it the record keeps them. With AttentionKind::fused
/// the record keeps neither, only the log-sum-exp of each query (`recompute` is unused).
template <Device D, class T, class ArenaT, class Axis>
void block_forward(T* out, const T* x, BlockActivations<T, ArenaT>& a,
                   const BlockTensors<const T>& w, const Activations<T, ArenaT>& mb,
                   const StatScalar<T>* slopes, const BlockShape& s,
                   BlockScratch<T, ArenaT>* recompute, AttentionKind attention, ArenaT& arena,
                   Axis& axis) {
  using O = Ops<D>;
  const std::int64_t B = mb.rows, S = mb.seq, N = B * S, H = s.hidden, Hl = s.hidden_local(),
                     Fl = s.ffn_local;
  constexpr Memory kind = Memory::activations;
  fit(a.ln1, arena, N * H, kind), fit(a.ln1_mean, arena, N, kind), fit(a.ln1_rstd, arena, N, kind);
  fit(a.qkv, arena, N * 3 * Hl, kind);
  fit(a.ctx, arena, N * Hl, kind), fit(a.x_mid, arena, N * H, kind), fit(a.ln2, arena, N * H, kind);
  fit(a.ln2_mean, arena, N, kind), fit(a.ln2_rstd, arena, N, kind),
      fit(a.fc_pre, arena, N * Fl, kind);
  fit(a.fc_act, arena, N * Fl, kind);
  const bool fused = attention == AttentionKind::fused;
  T* probs = nullptr;
  if (fused) {
    a.probs.reset();
    fit(a.lse, arena, B * s.heads_local * S, kind);
  } else if (recompute) {
    a.probs.reset();
    probs = recompute->probs_for(arena, s, B, S);
  } else {
    fit(a.probs, arena, B * s.heads_local * S * S, kind);
    probs = a.probs.data();
  }
  if (!fused) a.lse.reset();

  O::layernorm_forward(a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), x, w.ln1_w, w.ln1_b, N,
                       H, s.eps);
  O::linear_forward(a.qkv.data(), a.ln1.data(), w.qkv_w, w.qkv_b, N, H, 3 * Hl);  // [N, 3Hl]
  if (fused)
    O::flash_attention_forward(a.ctx.data(), a.lse.data(), a.qkv.data(), mb.pos.data(),
                               mb.valid.data(), slopes + s.head0, B, S, s.heads_local,
                               s.head_dim);  // [N, Hl]
  else
    O::attention_forward(a.ctx.data(), probs, a.qkv.data(), mb.pos.data(), mb.valid.data(),
                         slopes + s.head0, B, S, s.heads_local, s.head_dim);  // [N, Hl]
  O::linear_forward(a.x_mid.data(), a.ctx.data(), w.proj_w, static_cast<const T*>(nullptr), N, Hl,
                    H);
  axis.sum(a.x_mid.data(), N * H);                          // row-parallel: sum partial products
  O::add_bias_residual(a.x_mid.data(), w.proj_b, x, N, H);  // x_mid = x + dense(ctx)
  O::layernorm_forward(a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.x_mid.data(), w.ln2_w,
                       w.ln2_b, N, H, s.eps);
  O::linear_forward(a.fc_pre.data(), a.ln2.data(), w.fc_w, w.fc_b, N, H, Fl);  // [N, Fl]
  O::gelu_forward(a.fc_act.data(), a.fc_pre.data(), N * Fl);
  O::linear_forward(out, a.fc_act.data(), w.out_w, static_cast<const T*>(nullptr), N, Fl, H);
  axis.sum(out, N * H);
  O::add_bias_residual(out, w.out_b, a.x_mid.data(), N, H);  // out = x_mid + mlp(x_mid)
}

/// block_forward over left-padded prompts [rows, seq] that also fills the block's cache:
/// kv's keys and values of positions [0, seq) (a record's qkv holds them per head).
template <Device D, class T, class ArenaT, class Axis>
void block_prefill(T* out, const T* x, BlockKv<T, ArenaT>& kv, std::int64_t capacity,
                   BlockActivations<T, ArenaT>& a, const BlockTensors<const T>& w,
                   const Activations<T, ArenaT>& mb, const StatScalar<T>* slopes,
                   const BlockShape& s, BlockScratch<T, ArenaT>* probs, AttentionKind attention,
                   ArenaT& arena, Axis& axis) {
  block_forward<D>(out, x, a, w, mb, slopes, s, probs, attention, arena, axis);
  Ops<D>::kv_store(kv.k.data(), kv.v.data(), a.qkv.data(), mb.rows, mb.seq, s.heads_local,
                   s.head_dim, capacity, std::int64_t{0});
}

/// One new token per row: x[B, H] -> out[B, H] (B = c.rows), the calls of block_forward
/// with the attention against the cache: the token's keys and values join kv at position
/// c.length, then it attends to positions [0, c.length] (c.pos and c.valid hold theirs).
template <Device D, class T, class ArenaT, class Axis>
void block_decode(T* out, const T* x, BlockKv<T, ArenaT>& kv, KvCache<T, ArenaT>& c,
                  const BlockTensors<const T>& w, const StatScalar<T>* slopes, const BlockShape& s,
                  Axis& axis) {
  using O = Ops<D>;
  auto& sc = c.step;
  const std::int64_t B = c.rows, H = s.hidden, Hl = s.hidden_local(), Fl = s.ffn_local,
                     t = c.length;
  O::layernorm_forward(sc.ln.data(), sc.mean.data(), sc.rstd.data(), x, w.ln1_w, w.ln1_b, B, H,
                       s.eps);
  O::linear_forward(sc.qkv.data(), sc.ln.data(), w.qkv_w, w.qkv_b, B, H, 3 * Hl);  // [B, 3Hl]
  O::kv_store(kv.k.data(), kv.v.data(), sc.qkv.data(), B, std::int64_t{1}, s.heads_local,
              s.head_dim, c.capacity, t);
  O::decode_attention(sc.ctx.data(), sc.scores.data(), sc.qkv.data(), kv.k.data(), kv.v.data(),
                      c.pos.data(), c.valid.data(), slopes + s.head0, B, s.heads_local, s.head_dim,
                      c.capacity, t + 1);  // [B, Hl]
  O::linear_forward(sc.mid.data(), sc.ctx.data(), w.proj_w, static_cast<const T*>(nullptr), B, Hl,
                    H);
  axis.sum(sc.mid.data(), B * H);                          // row-parallel: sum partial products
  O::add_bias_residual(sc.mid.data(), w.proj_b, x, B, H);  // mid = x + dense(ctx)
  O::layernorm_forward(sc.ln.data(), sc.mean.data(), sc.rstd.data(), sc.mid.data(), w.ln2_w,
                       w.ln2_b, B, H, s.eps);
  O::linear_forward(sc.fc.data(), sc.ln.data(), w.fc_w, w.fc_b, B, H, Fl);  // [B, Fl]
  O::gelu_forward(sc.act.data(), sc.fc.data(), B * Fl);
  O::linear_forward(out, sc.act.data(), w.out_w, static_cast<const T*>(nullptr), B, Fl, H);
  axis.sum(out, B * H);
  O::add_bias_residual(out, w.out_b, sc.mid.data(), B, H);  // out = mid + mlp(mid)
}

/// In place on the residual gradient: d[N, H] holds d out on entry and d x on exit.
/// A record without probabilities has them recomputed in sc (see block_forward); one with a
/// log-sum-exp takes the fused backward.
template <Device D, class T, class ArenaT, class Axis>
void block_backward(T* d, const T* x, const BlockActivations<T, ArenaT>& a,
                    const BlockTensors<const T>& w, const BlockTensors<T>& g,
                    const Activations<T, ArenaT>& mb, const StatScalar<T>* slopes,
                    const BlockShape& s, BlockScratch<T, ArenaT>& sc, ArenaT& arena, Axis& axis) {
  using O = Ops<D>;
  const std::int64_t B = mb.rows, S = mb.seq, N = B * S, H = s.hidden, Hl = s.hidden_local(),
                     Fl = s.ffn_local;
  // MLP: d holds d out = d x_mid through the residual
  O::column_sum(g.out_b, d, N, H);
  O::linear_backward(sc.d_fc.data(), g.out_w, static_cast<T*>(nullptr), d, a.fc_act.data(), w.out_w,
                     N, Fl, H);
  O::gelu_backward(sc.d_fc.data(), sc.d_fc.data(), a.fc_pre.data(), N * Fl);
  O::linear_backward(sc.d_ln.data(), g.fc_w, g.fc_b, sc.d_fc.data(), a.ln2.data(), w.fc_w, N, H,
                     Fl);
  axis.sum(sc.d_ln.data(), N * H);  // column-parallel input gradient
  O::layernorm_backward(d, g.ln2_w, g.ln2_b, sc.d_ln.data(), a.x_mid.data(), a.ln2_mean.data(),
                        a.ln2_rstd.data(), w.ln2_w, N, H);  // d = d x_mid
  // Attention
  O::column_sum(g.proj_b, d, N, H);
  O::linear_backward(sc.d_ctx.data(), g.proj_w, static_cast<T*>(nullptr), d, a.ctx.data(), w.proj_w,
                     N, Hl, H);
  if (!a.lse.empty()) {
    O::flash_attention_backward(sc.d_qkv.data(), sc.d_ctx.data(), a.ctx.data(), a.qkv.data(),
                                a.lse.data(), mb.pos.data(), mb.valid.data(), slopes + s.head0,
                                sc.delta_for(arena, s, B, S), B, S, s.heads_local,
                                s.head_dim);  // [N, 3Hl]
  } else {
    const T* probs = a.probs.data();
    if (a.probs.empty()) {
      T* made = sc.probs_for(arena, s, B, S);
      O::attention_probs(made, a.qkv.data(), mb.pos.data(), mb.valid.data(), slopes + s.head0, B, S,
                         s.heads_local, s.head_dim);
      probs = made;
    }
    O::attention_backward(sc.d_qkv.data(), sc.d_ctx.data(), a.qkv.data(), probs, mb.valid.data(),
                          sc.d_probs_for(arena, s, B, S), B, S, s.heads_local, s.head_dim);
  }
  O::linear_backward(sc.d_ln.data(), g.qkv_w, g.qkv_b, sc.d_qkv.data(), a.ln1.data(), w.qkv_w, N, H,
                     3 * Hl);
  axis.sum(sc.d_ln.data(), N * H);
  O::layernorm_backward(d, g.ln1_w, g.ln1_b, sc.d_ln.data(), x, a.ln1_mean.data(),
                        a.ln1_rstd.data(), w.ln1_w, N, H);  // d = d x
}

}  // namespace seqpar::inline v0

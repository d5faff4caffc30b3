#pragma once
// One BLOOM block, forward and hand-written backward:
//   h = input_layernorm(x); x_mid = x + dense(attn(h))
//   h = post_attention_layernorm(x_mid); out = x_mid + dense_4h_to_h(gelu(dense_h_to_4h(h)))
// query_key_value and dense_h_to_4h are column-split over the tensor axis, dense and
// dense_4h_to_h row-split: one tensor-axis sum after each of those in the forward and one
// before each layernorm in the backward. The decoding form: prefill is the forward over the
// prompts that also stores their keys and values in the block's cache; a decoding step
// runs the same calls on one new token per row, its attention against the cache.

#include <concepts>
#include <cstdint>
#include <vector>

#include "seqpar/backend/device.hpp"
#include "seqpar/config/memory_modes.hpp"
#include "seqpar/core/profile.hpp"
#include "seqpar/nn/activations.hpp"
#include "seqpar/nn/kv_cache.hpp"
#include "seqpar/nn/params.hpp"
#include "seqpar/parallel/tensor_axis.hpp"

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

/// Where one block's forward writes its intermediate tensors, n = its rows (a record's
/// buffers, or a decoding step's scratch).
template <class T>
struct BlockOutputs {
  using S = StatScalar<T>;
  T* ln1;                  // [n, H]
  S *ln1_mean, *ln1_rstd;  // [n]
  T* qkv;                  // [n, 3 Hl]
  T* ctx;                  // [n, Hl]
  T* x_mid;                // [n, H]
  T* ln2;                  // [n, H]
  S *ln2_mean, *ln2_rstd;  // [n]
  T *fc_pre, *fc_act;      // [n, Fl]
};

/// The products of a micro-batch's attention forward, q k^T and p v, over every pair of
/// positions (the profile's count; causal masking halves what is needed).
inline double attention_flops(std::int64_t rows, std::int64_t seq, const BlockShape& s) {
  return 4.0 * static_cast<double>(rows * seq) * static_cast<double>(seq * s.hidden_local());
}

/// The attention step of a micro-batch's forward [rows, seq]: the probabilities kept in
/// `probs` [rows, nh, seq, seq].
template <Device D, class T, class ArenaT>
struct StandardAttention {
  const Activations<T, ArenaT>& mb;
  const StatScalar<T>* slopes;  // [heads_total]
  const BlockShape& s;
  T* probs;
  void operator()(T* ctx, const T* qkv) const {
    const profile::Scope p(profile::Phase::attention, attention_flops(mb.rows, mb.seq, s));
    Ops<D>::attention_forward(ctx, probs, qkv, mb.pos.data(), mb.valid.data(), slopes + s.head0,
                              mb.rows, mb.seq, s.heads_local, s.head_dim);
  }
};

/// The attention step of a micro-batch's forward, flash-style: a log-sum-exp per query
/// kept in `lse` [rows, nh, seq], no probabilities.
template <Device D, class T, class ArenaT>
struct FusedAttention {
  const Activations<T, ArenaT>& mb;
  const StatScalar<T>* slopes;
  const BlockShape& s;
  StatScalar<T>* lse;
  void operator()(T* ctx, const T* qkv) const {
    const profile::Scope p(profile::Phase::attention, attention_flops(mb.rows, mb.seq, s));
    Ops<D>::flash_attention_forward(ctx, lse, qkv, mb.pos.data(), mb.valid.data(), slopes + s.head0,
                                    mb.rows, mb.seq, s.heads_local, s.head_dim);
  }
};

/// The attention step of a decoding step, one token a row: its keys and values join kv at
/// position c.length, then it attends to positions [0, c.length] (c.pos and c.valid).
template <Device D, class T, class ArenaT>
struct CachedAttention {
  BlockKv<T, ArenaT>& kv;
  KvCache<T, ArenaT>& c;
  const StatScalar<T>* slopes;
  const BlockShape& s;
  void operator()(T* ctx, const T* qkv) const {
    Ops<D>::kv_store(kv.k.data(), kv.v.data(), qkv, c.rows, std::int64_t{1}, s.heads_local,
                     s.head_dim, c.capacity, c.length);
    Ops<D>::decode_attention(ctx, c.step.scores.data(), qkv, kv.k.data(), kv.v.data(), c.pos.data(),
                             c.valid.data(), slopes + s.head0, c.rows, s.heads_local, s.head_dim,
                             c.capacity, c.length + 1);
  }
};

/// A block's forward on n rows, x[n, H] -> out[n, H], its tensors written to `a` and its
/// attention computed by `attend(ctx, qkv)`: one list of calls for training, prefill and
/// decoding.
template <Device D, class T, std::invocable<T*, const T*> Attend, TensorAxis Axis>
void block_calls(T* out, const T* x, const BlockOutputs<T>& a, const BlockTensors<const T>& w,
                 const BlockShape& s, std::int64_t n, const Attend& attend, Axis& axis) {
  using O = Ops<D>;
  using profile::Phase, profile::Scope;
  const std::int64_t H = s.hidden, Hl = s.hidden_local(), Fl = s.ffn_local;
  const double nH = static_cast<double>(n * H), bytes = sizeof(T), mm = 2.0 * nH;  // 2 n H
  {
    const Scope p(Phase::norms, 0, 2 * nH * bytes);
    O::layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, w.ln1_w, w.ln1_b, n, H, s.eps);
  }
  {
    const Scope p(Phase::qkv, mm * 3 * Hl);
    O::linear_forward(a.qkv, a.ln1, w.qkv_w, w.qkv_b, n, H, 3 * Hl);  // [n, 3Hl]
  }
  attend(a.ctx, a.qkv);  // [n, Hl]
  {
    const Scope p(Phase::attention_out, mm * Hl);
    O::linear_forward(a.x_mid, a.ctx, w.proj_w, static_cast<const T*>(nullptr), n, Hl, H);
  }
  axis.sum(a.x_mid, n * H);  // row-parallel: sum partial products
  {
    const Scope p(Phase::activations, 0, 3 * nH * bytes);
    O::add_bias_residual(a.x_mid, w.proj_b, x, n, H);  // x_mid = x + dense(ctx)
  }
  {
    const Scope p(Phase::norms, 0, 2 * nH * bytes);
    O::layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.x_mid, w.ln2_w, w.ln2_b, n, H, s.eps);
  }
  {
    const Scope p(Phase::mlp_up, mm * Fl);
    O::linear_forward(a.fc_pre, a.ln2, w.fc_w, w.fc_b, n, H, Fl);  // [n, Fl]
  }
  {
    const Scope p(Phase::activations, 0, 2.0 * static_cast<double>(n * Fl) * bytes);
    O::gelu_forward(a.fc_act, a.fc_pre, n * Fl);
  }
  {
    const Scope p(Phase::mlp_down, mm * Fl);
    O::linear_forward(out, a.fc_act, w.out_w, static_cast<const T*>(nullptr), n, Fl, H);
  }
  axis.sum(out, n * H);
  const Scope p(Phase::activations, 0, 3 * nH * bytes);
  O::add_bias_residual(out, w.out_b, a.x_mid, n, H);  // out = x_mid + mlp(x_mid)
}

/// x[N, H] -> out[N, H]; `a` keeps what the backward needs (its buffers are reused when
/// their sizes did not change). slopes[heads_total] are the ALiBi slopes in device memory.
/// With `recompute` the attention probabilities go to that scratch and the record keeps
/// none; the backward makes them again (the same bits) from the kept qkv: one more q k^T
/// GEMM and softmax per block for [rows, nh, seq, seq] less per record, as Megatron's
/// selective recomputation. Without it the record keeps them. With AttentionKind::fused
/// the record keeps neither, only the log-sum-exp of each query (`recompute` is unused).
template <Device D, class T, class ArenaT, TensorAxis Axis>
void block_forward(T* out, const T* x, BlockActivations<T, ArenaT>& a,
                   const BlockTensors<const T>& w, const Activations<T, ArenaT>& mb,
                   const StatScalar<T>* slopes, const BlockShape& s,
                   BlockScratch<T, ArenaT>* recompute, AttentionKind attention, ArenaT& arena,
                   Axis& axis) {
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
  const BlockOutputs<T> o{a.ln1.data(),    a.ln1_mean.data(), a.ln1_rstd.data(),
                          a.qkv.data(),    a.ctx.data(),      a.x_mid.data(),
                          a.ln2.data(),    a.ln2_mean.data(), a.ln2_rstd.data(),
                          a.fc_pre.data(), a.fc_act.data()};
  if (fused)
    block_calls<D>(out, x, o, w, s, N, FusedAttention<D, T, ArenaT>{mb, slopes, s, a.lse.data()},
                   axis);
  else
    block_calls<D>(out, x, o, w, s, N, StandardAttention<D, T, ArenaT>{mb, slopes, s, probs}, axis);
}

/// block_forward over left-padded prompts [rows, seq] that also fills the block's cache:
/// kv's keys and values of positions [0, seq) (a record's qkv holds them per head).
template <Device D, class T, class ArenaT, TensorAxis Axis>
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
/// with the attention against the cache (CachedAttention). The step's scratch serves both
/// layernorms.
template <Device D, class T, class ArenaT, TensorAxis Axis>
void block_decode(T* out, const T* x, BlockKv<T, ArenaT>& kv, KvCache<T, ArenaT>& c,
                  const BlockTensors<const T>& w, const StatScalar<T>* slopes, const BlockShape& s,
                  Axis& axis) {
  auto& sc = c.step;
  const BlockOutputs<T> o{sc.ln.data(),   sc.mean.data(), sc.rstd.data(), sc.qkv.data(),
                          sc.ctx.data(),  sc.mid.data(),  sc.ln.data(),   sc.mean.data(),
                          sc.rstd.data(), sc.fc.data(),   sc.act.data()};
  block_calls<D>(out, x, o, w, s, c.rows, CachedAttention<D, T, ArenaT>{kv, c, slopes, s}, axis);
}

/// In place on the residual gradient: d[N, H] holds d out on entry and d x on exit.
/// A record without probabilities has them recomputed in sc (see block_forward); one with a
/// log-sum-exp takes the fused backward.
template <Device D, class T, class ArenaT, TensorAxis Axis>
void block_backward(T* d, const T* x, const BlockActivations<T, ArenaT>& a,
                    const BlockTensors<const T>& w, const BlockTensors<T>& g,
                    const Activations<T, ArenaT>& mb, const StatScalar<T>* slopes,
                    const BlockShape& s, BlockScratch<T, ArenaT>& sc, ArenaT& arena, Axis& axis) {
  using O = Ops<D>;
  using profile::Phase, profile::Scope;
  const std::int64_t B = mb.rows, S = mb.seq, N = B * S, H = s.hidden, Hl = s.hidden_local(),
                     Fl = s.ffn_local;
  const double NH = static_cast<double>(N * H), bytes = sizeof(T), mm = 4.0 * NH;  // 2 GEMMs
  // MLP: d holds d out = d x_mid through the residual
  {
    const Scope p(Phase::activations_backward, 0, NH * bytes);
    O::column_sum(g.out_b, d, N, H);
  }
  {
    const Scope p(Phase::mlp_down_backward, mm * Fl);
    O::linear_backward(sc.d_fc.data(), g.out_w, static_cast<T*>(nullptr), d, a.fc_act.data(),
                       w.out_w, N, Fl, H);
  }
  {
    const Scope p(Phase::activations_backward, 0, 3.0 * static_cast<double>(N * Fl) * bytes);
    O::gelu_backward(sc.d_fc.data(), sc.d_fc.data(), a.fc_pre.data(), N * Fl);
  }
  {
    const Scope p(Phase::mlp_up_backward, mm * Fl);
    O::linear_backward(sc.d_ln.data(), g.fc_w, g.fc_b, sc.d_fc.data(), a.ln2.data(), w.fc_w, N, H,
                       Fl);
  }
  axis.sum(sc.d_ln.data(), N * H);  // column-parallel input gradient
  {
    const Scope p(Phase::norms_backward, 0, 4 * NH * bytes);
    O::layernorm_backward(d, g.ln2_w, g.ln2_b, sc.d_ln.data(), a.x_mid.data(), a.ln2_mean.data(),
                          a.ln2_rstd.data(), w.ln2_w, N, H);  // d = d x_mid
  }
  // Attention
  {
    const Scope p(Phase::activations_backward, 0, NH * bytes);
    O::column_sum(g.proj_b, d, N, H);
  }
  {
    const Scope p(Phase::attention_out_backward, mm * Hl);
    O::linear_backward(sc.d_ctx.data(), g.proj_w, static_cast<T*>(nullptr), d, a.ctx.data(),
                       w.proj_w, N, Hl, H);
  }
  {
    // the backward's products: d p, d v, d q, d k (and q k^T again where p is remade)
    const Scope p(Phase::attention_backward, 2 * attention_flops(B, S, s));
    if (!a.lse.empty()) {
      O::flash_attention_backward(sc.d_qkv.data(), sc.d_ctx.data(), a.ctx.data(), a.qkv.data(),
                                  a.lse.data(), mb.pos.data(), mb.valid.data(), slopes + s.head0,
                                  sc.delta_for(arena, s, B, S), B, S, s.heads_local,
                                  s.head_dim);  // [N, 3Hl]
    } else {
      const T* probs = a.probs.data();
      if (a.probs.empty()) {
        T* made = sc.probs_for(arena, s, B, S);
        O::attention_probs(made, a.qkv.data(), mb.pos.data(), mb.valid.data(), slopes + s.head0, B,
                           S, s.heads_local, s.head_dim);
        probs = made;
      }
      O::attention_backward(sc.d_qkv.data(), sc.d_ctx.data(), a.qkv.data(), probs, mb.valid.data(),
                            sc.d_probs_for(arena, s, B, S), B, S, s.heads_local, s.head_dim);
    }
  }
  {
    const Scope p(Phase::qkv_backward, mm * 3 * Hl);
    O::linear_backward(sc.d_ln.data(), g.qkv_w, g.qkv_b, sc.d_qkv.data(), a.ln1.data(), w.qkv_w, N,
                       H, 3 * Hl);
  }
  axis.sum(sc.d_ln.data(), N * H);
  const Scope p(Phase::norms_backward, 0, 4 * NH * bytes);
  O::layernorm_backward(d, g.ln1_w, g.ln1_b, sc.d_ln.data(), x, a.ln1_mean.data(),
                        a.ln1_rstd.data(), w.ln1_w, N, H);  // d = d x
}

}  // namespace seqpar::inline v0

#pragma once
// BloomStack: the layers a rank holds (all of them, or a pipeline stage's share, each
// split over the tensor axis), their flat parameter and gradient buffers, and the
// forward and backward of a micro-batch as a list of layer calls (decoding: nn/decoder.hpp).

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "seqpar/backend/device.hpp"
#include "seqpar/backend/kernels.hpp"
#include "seqpar/config/bloom.hpp"
#include "seqpar/core/profile.hpp"
#include "seqpar/core/rng.hpp"
#include "seqpar/nn/activations.hpp"
#include "seqpar/nn/block.hpp"
#include "seqpar/nn/kv_cache.hpp"
#include "seqpar/nn/lm_head.hpp"
#include "seqpar/nn/params.hpp"
#include "seqpar/parallel/pipeline_axis.hpp"
#include "seqpar/parallel/tensor_axis.hpp"
#include "seqpar/parallel/unit_hooks.hpp"

namespace seqpar::inline v0 {

template <class Stack>
class Decoder;

/// What a stack trades between memory and compute (TrainOptions carries both).
struct StackOptions {
  /// The most bytes of logits the loss holds at once; 0: Ops<D>::logits_chunk_bytes. When
  /// a micro-batch's logits over the local vocab rows fit, the gradient pass reuses them.
  std::int64_t logits_bytes = 0;
  /// What the blocks keep for the backward and what it makes again (Recompute).
  Recompute recompute = Recompute::none;
  /// Under Recompute::full, the blocks recomputed: those whose layer index (in the whole
  /// model, so a pipeline split does not move them) is a multiple of this; the others keep
  /// their whole record (Megatron's --recompute-method block with a layer count).
  std::int64_t recompute_every = 1;
  /// Standard attention (probabilities, kept or recomputed) or fused (a log-sum-exp per query).
  AttentionKind attention = AttentionKind::standard;
};

/// Initial value of element `i` (local, row-major) of a parameter, independent of the plan:
/// keyed by the seed, the parameter's name and the element's index in the full tensor.
inline double initial_value(const ParamSpec& p, std::int64_t i, std::uint64_t seed,
                            double std_dev) {
  const bool layernorm_or_bias = p.vector;
  if (layernorm_or_bias)
    return p.name.ends_with("layernorm.weight") || p.name == "ln_f.weight" ? 1.0 : 0.0;
  const std::int64_t r = p.row0 + i / p.local_cols, c = p.col0 + i % p.local_cols;
  if (r >= p.real_rows) return 0.0;  // vocab padding
  return std_dev * CounterRng(seed, p.name).normal(static_cast<std::uint64_t>(r * p.cols + c));
}

namespace detail {
// dst[i] = initial_value(p, i, ...) for the elements of one parameter, spread over the
// hardware threads for large tensors (a value depends only on its index).
template <class T>
void fill_initial_values(T* dst, const ParamSpec& p, std::uint64_t seed, double std_dev) {
  const std::int64_t n = p.numel();
  const auto range = [&](std::int64_t lo, std::int64_t hi) {
    if (p.vector) {
      for (std::int64_t i = lo; i < hi; ++i)
        dst[i] = static_cast<T>(initial_value(p, i, seed, std_dev));
      return;
    }
    const CounterRng rng(seed, p.name);
    for (std::int64_t i = lo; i < hi; ++i) {
      const std::int64_t r = p.row0 + i / p.local_cols, c = p.col0 + i % p.local_cols;
      dst[i] = static_cast<T>(
          r >= p.real_rows ? 0.0
                           : std_dev * rng.normal(static_cast<std::uint64_t>(r * p.cols + c)));
    }
  };
  const std::int64_t threads = std::clamp<std::int64_t>(
      n / (std::int64_t{1} << 20), 1, std::max(1u, std::thread::hardware_concurrency()));
  if (threads == 1) return range(0, n);
  std::vector<std::thread> pool;
  for (std::int64_t t = 0; t < threads; ++t)
    pool.emplace_back(range, n * t / threads, n * (t + 1) / threads);
  for (auto& th : pool) th.join();
}
}  // namespace detail

/// The layers a rank holds of model M (all, or a pipeline stage's share, each split over
/// the tensor axis) on device D in storage type T: their parameters and gradients, the
/// forward and backward of a micro-batch.
template <BloomModel M, Device D, class T = float, TensorAxis Axis = NoTensorAxis>
class BloomStack {
 public:
  using Arena = DeviceArena<D>;
  using Acts = Activations<T, Arena>;
  using Scalar = T;
  /// Per-row statistics, ALiBi positions and slopes, softmax statistics: float for 16-bit T.
  using Stat = StatScalar<T>;
  using Dev = D;
  using Model = M;
  static constexpr std::int64_t H = M::hidden;

  /// `pad`: flat buffers are rounded up to a multiple of it (the data-parallel degree,
  /// so that they cut into equal shards).
  BloomStack(const BloomStack&) = delete;
  BloomStack& operator=(const BloomStack&) = delete;
  BloomStack(Arena& arena, Axis axis = {}, StageLayers stage = {0, M::layers, true, true},
             std::int64_t pad = 1)
      : arena_(&arena),
        axis_(axis),
        stage_(stage),
        units_(bloom_units<M>(axis.size(), axis.rank())),
        pad_(pad) {
    SEQPAR_CHECK(M::heads % axis_.size() == 0, "tensor degree ", axis_.size(), " does not divide ",
                 M::heads, " heads");
    shape_ = BlockShape{H,
                        M::heads / axis_.size(),
                        M::head_dim,
                        M::ffn_hidden / axis_.size(),
                        (M::heads / axis_.size()) * axis_.rank(),
                        M::heads,
                        M::layer_norm_eps};
    std::vector<Stat> slopes(static_cast<std::size_t>(M::heads));
    for (std::int64_t h = 0; h < M::heads; ++h)
      slopes[static_cast<std::size_t>(h)] = static_cast<Stat>(kernels::alibi_slope(h, M::heads));
    slopes_ = Buffer<Stat, Arena>(arena, slopes.size(), Memory::buffers);
    Ops<D>::upload(slopes_.data(), slopes.data(), M::heads);
    vocab_ = seqpar::vocab_shard(units_[0].params[0]);
    params_.resize(units_.size());
    grads_.resize(units_.size());
    for (std::size_t u = 0; u < units_.size(); ++u) {
      if (!holds(u)) continue;
      params_[u] =
          Buffer<T, Arena>(arena, static_cast<std::size_t>(padded_numel(u)), Memory::parameters);
      grads_[u] =
          Buffer<T, Arena>(arena, static_cast<std::size_t>(padded_numel(u)), Memory::gradients);
    }
  }

  // --- the parameter store ---------------------------------------------------------
  const std::vector<UnitTable>& units() const { return units_; }
  /// Whether this stage holds unit u (0 embedding, 1..layers blocks, layers + 1 ln_f).
  bool holds(std::size_t u) const { return stage_.holds(u, M::layers); }
  /// The held units in the order a forward uses them, the tied table last for the head
  /// (StageLayers::unit_order); a backward uses them in reverse.
  std::vector<std::size_t> unit_order() const { return stage_.unit_order(M::layers); }
  /// Unit u's element count rounded up to the padding multiple.
  std::int64_t padded_numel(std::size_t u) const {
    return (units_[u].numel + pad_ - 1) / pad_ * pad_;
  }
  void set_hooks(UnitHooks* hooks) { hooks_ = hooks ? hooks : &no_hooks_; }
  T* params(std::size_t u) { return params_[u].data(); }
  const T* params(std::size_t u) const { return params_[u].data(); }
  T* grads(std::size_t u) { return grads_[u].data(); }
  Buffer<T, Arena>& param_buffer(std::size_t u) { return params_[u]; }
  Buffer<T, Arena>& grad_buffer(std::size_t u) { return grads_[u]; }
  const StageLayers& stage() const { return stage_; }
  const VocabShard& vocab_shard() const { return vocab_; }
  Axis& axis() { return axis_; }
  Arena& arena() { return *arena_; }

  /// Seeded initialisation of every held parameter (N(0, std), biases 0, layernorm 1/0),
  /// made on the host (in double, rounded once to T) and uploaded a unit at a time.
  void initialize(std::uint64_t seed, double std_dev = 0.02) {
    std::vector<T> host;
    for (std::size_t u = 0; u < units_.size(); ++u) {
      if (!holds(u)) continue;
      host.assign(static_cast<std::size_t>(padded_numel(u)), T(0.0f));
      for (const auto& p : units_[u].params)
        detail::fill_initial_values(host.data() + p.offset, p, seed, std_dev);
      Ops<D>::upload(params_[u].data(), host.data(), padded_numel(u));
    }
  }

  void zero_grads() {
    double bytes = 0;
    for (const auto& g : grads_) bytes += static_cast<double>(g.size() * sizeof(T));
    const profile::Scope p(profile::Phase::conversion, 0, bytes);
    for (std::size_t u = 0; u < units_.size(); ++u)
      if (!grads_[u].empty())
        Ops<D>::fill(grads_[u].data(), T(0.0f), static_cast<std::int64_t>(grads_[u].size()));
  }

  // --- forward and backward of one micro-batch ------------------------------------
  /// Fills `a` for batch `b`. On a stage without the embedding, a.x[0] must hold the
  /// stage input [N, H] before the call; a.x.back() is the stage output. Without
  /// `for_backward` (evaluation, prefill) the record keeps no attention probabilities,
  /// as under Recompute::selective (a backward would recompute them). A block that
  /// Recompute::full recomputes keeps nothing in `a` but its input a.x[l]: its forward
  /// runs in the stack's one transient record.
  void forward(const BatchView& b, Acts& a, bool for_backward = true) {
    prepare(b, a);
    if (stage_.embedding) embed(a);
    // Where the attention probabilities go when the records do not keep them: without a
    // backward, a scratch freed on return (an evaluation leaves nothing behind); under
    // Recompute::selective, the one the backward recomputes them in.
    BlockScratch<T, Arena> transient;
    BlockScratch<T, Arena>* probs_scratch = !for_backward ? &transient
                                            : options_.recompute == Recompute::selective
                                                ? &block_scratch_
                                                : nullptr;
    forward_blocks([&](std::int64_t l, const BlockTensors<const T>& w) {
      const bool full = for_backward && recomputed(l);
      if (full) a.blocks[l] = {};  // a record of an earlier mode or micro-batch shape
      block_forward<D>(a.x[l + 1].data(), a.x[l].data(), full ? full_record_ : a.blocks[l], w, a,
                       slopes_.data(), shape_, probs_scratch, options_.attention, *arena_, axis_);
    });
    if (stage_.head) final_norm(a, a.x.back().data());
  }

  /// Reads batch b into record a and allocates its residual stream, keeping a.x[0]
  /// when the shape is unchanged (a pipeline stage receives its input there first).
  void prepare(const BatchView& b, Acts& a) {
    const std::int64_t N = b.tokens();
    const bool reshape = a.tokens() != N || a.x.empty();
    a.template set_batch<D>(b, *arena_);
    if (!reshape) return;
    a.x.clear();
    for (std::int64_t l = 0; l <= stage_.count(); ++l)
      a.x.emplace_back(*arena_, static_cast<std::size_t>(N * H), Memory::activations);
    a.blocks.resize(static_cast<std::size_t>(stage_.count()));
  }

  /// Last stage: the summed token loss of `a` (evaluation: no gradients).
  LossSum loss(Acts& a) {
    hooks_->acquire(0, UnitUse::head);
    const LossSum s = head_loss(a, Stat(0));
    hooks_->release(0);
    return s;
  }

  /// Last stage: the head's backward. The summed token loss of `a` and its gradients
  /// through the tied LM head (into the table's) and ln_f: d_out[N, H] = d loss / d (stage
  /// output). grad_scale is each token's loss gradient (the loss scale over the global
  /// batch's targets); 0 or no d_out: the loss only, as loss().
  LossSum head_backward(Acts& a, T grad_scale, T* d_out) {
    const auto gs = static_cast<Stat>(grad_scale);
    if (gs == Stat(0) || !d_out) return loss(a);
    const std::int64_t N = a.tokens();
    hooks_->acquire(0, UnitUse::head_backward);
    const LossSum s = head_loss(a, gs);  // d ln_f output in head_dh_
    hooks_->acquire(last_unit(), UnitUse::backward);
    const auto f = FinalTensors<const T>::bind(params(last_unit()), units_.back());
    const auto g = FinalTensors<T>::bind(grads(last_unit()), units_.back());
    const profile::Scope p(profile::Phase::norms_backward, 0,
                           5.0 * static_cast<double>(N * H * sizeof(T)));
    Ops<D>::fill(d_out, T(0.0f), N * H);
    Ops<D>::layernorm_backward(d_out, g.ln_w, g.ln_b, head_dh_.data(), a.x.back().data(),
                               a.hf_mean.data(), a.hf_rstd.data(), f.ln_w, N, H);
    hooks_->grads_ready(last_unit());
    hooks_->release(last_unit());
    if (!stage_.embedding) {  // else the table stays for the embedding's backward
      hooks_->grads_ready(0);
      hooks_->release(0);
    }
    return s;
  }

  /// Backward through the blocks (and the embedding on the first stage), in place on
  /// d[N, H]: d stage output on entry, d stage input on exit.
  void backward(Acts& a, T* d) {
    const std::int64_t N = a.tokens();
    block_scratch_.reserve(*arena_, shape_, a.rows, a.seq);
    for (std::int64_t l = stage_.count(); l-- > 0;) {
      const auto u = static_cast<std::size_t>(stage_.first + l + 1);
      hooks_->acquire(u, UnitUse::backward);
      const auto w = BlockTensors<const T>::bind(params(u), units_[u]);
      const auto g = BlockTensors<T>::bind(grads(u), units_[u]);
      if (recomputed(l)) {
        // The block's forward again, from its kept input, into the transient record (which
        // keeps the probabilities: they are used at once). Its output [N, H] equals
        // a.x[l + 1] and is not needed: it goes to d_ln, the backward's scratch.
        block_forward<D>(block_scratch_.d_ln.data(), a.x[l].data(), full_record_, w, a,
                         slopes_.data(), shape_, static_cast<BlockScratch<T, Arena>*>(nullptr),
                         options_.attention, *arena_, axis_);
      }
      block_backward<D>(d, a.x[l].data(), recomputed(l) ? full_record_ : a.blocks[l], w, g, a,
                        slopes_.data(), shape_, block_scratch_, *arena_, axis_);
      hooks_->grads_ready(u);
      hooks_->release(u);
    }
    if (stage_.embedding) {
      hooks_->acquire(0, UnitUse::backward);
      const auto e = EmbeddingTensors<const T>::bind(params(0), units_[0]);
      const auto g = EmbeddingTensors<T>::bind(grads(0), units_[0]);
      grow(*arena_, emb_d_, N * H);
      const profile::Scope p(profile::Phase::embedding);
      Ops<D>::fill(emb_d_.data(), T(0.0f), N * H);
      Ops<D>::layernorm_backward(emb_d_.data(), g.ln_w, g.ln_b, d, a.emb.data(), a.emb_mean.data(),
                                 a.emb_rstd.data(), e.ln_w, N, H);
      Ops<D>::embedding_backward(g.table, a.ids.data(), emb_d_.data(), N, H, vocab_.row0,
                                 vocab_.rows);
      hooks_->grads_ready(0);
      hooks_->release(0);
    }
  }

  void set_options(const StackOptions& o) {
    SEQPAR_CHECK(o.recompute_every >= 1, "StackOptions::recompute_every is ", o.recompute_every,
                 "; expected at least 1 (every block)");
    options_ = o;
  }
  /// Whether this stage's block l keeps only its input and is recomputed in the backward.
  bool recomputed(std::int64_t l) const {
    return options_.recompute == Recompute::full &&
           (stage_.first + l) % options_.recompute_every == 0;
  }
  const StackOptions& options() const { return options_; }

  /// Logits of the local vocab rows for every token of a forwarded batch: out[N,
  /// vocab_shard().rows] in device memory.
  void logits(const Acts& a, T* out) { logits(a.hf.data(), a.tokens(), out); }
  /// out[n, vocab_shard().rows] = the local vocab rows' logits of hf[n, H] (after ln_f).
  void logits(const T* hf, std::int64_t n, T* out) {
    hooks_->acquire(0, UnitUse::head);
    lm_head_logits<D>(out, hf, params(0), n, H, vocab_.rows);
    hooks_->release(0);
  }

  // --- decoding (nn/decoder.hpp runs the same layers with a KV cache) ---------------------
  /// Whether this rank holds every layer (decoding needs them; a tensor split is fine).
  bool whole() const {
    return stage_.embedding && stage_.head && stage_.first == 0 && stage_.last == M::layers;
  }
  const BlockShape& block_shape() const { return shape_; }

 private:
  template <class Stack>
  friend class Decoder;  // runs the stack's layers (embed, forward_blocks, final_norm)

  std::size_t last_unit() const { return units_.size() - 1; }

  // The loss of `a` over the tied table (acquired); with gs != 0 also head_dh_[N, H] = d
  // loss / d hf and the table's gradient.
  LossSum head_loss(Acts& a, Stat gs) {
    grow(*arena_, head_dh_, a.tokens() * H);
    return lm_head_loss<D>(
        head_dh_.data(), gs != Stat(0) ? grads(0) : nullptr, a.hf.data(), params(0), a.targets, H,
        vocab_, gs, head_scratch_, *arena_, axis_,
        options_.logits_bytes > 0 ? options_.logits_bytes : Ops<D>::logits_chunk_bytes);
  }

  // run(l, w) for each block l of this stage in order, its parameters acquired for a
  // forward and bound as w: the one loop of the forward, prefill and a decoding step.
  template <class Run>
  void forward_blocks(Run&& run) {
    for (std::int64_t l = 0; l < stage_.count(); ++l) {
      const auto u = static_cast<std::size_t>(stage_.first + l + 1);
      hooks_->acquire(u, UnitUse::forward);
      run(l, BlockTensors<const T>::bind(params(u), units_[u]));
      hooks_->release(u);
    }
  }

  // a.x[0] = the embedding of a's ids, its raw rows and statistics kept in `a`.
  void embed(Acts& a) {
    const std::int64_t N = a.tokens();
    fit(a.emb, *arena_, N * H, Memory::activations);
    fit(a.emb_mean, *arena_, N, Memory::activations);
    fit(a.emb_rstd, *arena_, N, Memory::activations);
    embed(a.x[0].data(), a.emb.data(), a.emb_mean.data(), a.emb_rstd.data(), a.ids.data(), N);
  }
  // a.hf = ln_f(x), x[a.tokens(), H], its statistics kept in `a`.
  void final_norm(Acts& a, const T* x) {
    const std::int64_t N = a.tokens();
    fit(a.hf, *arena_, N * H, Memory::activations);
    fit(a.hf_mean, *arena_, N, Memory::activations);
    fit(a.hf_rstd, *arena_, N, Memory::activations);
    final_norm(a.hf.data(), a.hf_mean.data(), a.hf_rstd.data(), x, N);
  }

  // out[N, H] = word_embeddings_layernorm(emb), emb[N, H] = the table's rows of ids[N]
  void embed(T* out, T* emb, Stat* mean, Stat* rstd, const std::int32_t* ids, std::int64_t N) {
    hooks_->acquire(0, UnitUse::forward);
    const auto e = EmbeddingTensors<const T>::bind(params(0), units_[0]);
    const profile::Scope p(profile::Phase::embedding);
    Ops<D>::embedding_forward(emb, ids, e.table, N, H, vocab_.row0, vocab_.rows);  // [N, H]
    axis_.sum(emb, N * H);  // vocab-split table: each id's row lives on one rank
    Ops<D>::layernorm_forward(out, mean, rstd, emb, e.ln_w, e.ln_b, N, H, M::layer_norm_eps);
    hooks_->release(0);
  }
  // out[N, H] = ln_f(x)
  void final_norm(T* out, Stat* mean, Stat* rstd, const T* x, std::int64_t N) {
    hooks_->acquire(last_unit(), UnitUse::forward);
    const auto f = FinalTensors<const T>::bind(params(last_unit()), units_.back());
    const profile::Scope p(profile::Phase::norms, 0, 2.0 * static_cast<double>(N * H * sizeof(T)));
    Ops<D>::layernorm_forward(out, mean, rstd, x, f.ln_w, f.ln_b, N, H, M::layer_norm_eps);
    hooks_->release(last_unit());
  }

  Arena* arena_;
  Axis axis_;
  StageLayers stage_;
  std::vector<UnitTable> units_;
  BlockShape shape_{};
  VocabShard vocab_{};
  Buffer<Stat, Arena> slopes_;  // [heads] ALiBi slopes of all heads
  std::vector<Buffer<T, Arena>> params_, grads_;
  BlockScratch<T, Arena> block_scratch_;
  // The record of the block being run under Recompute::full (one block's activations, of
  // kind activations: its forward, then its forward again and its backward).
  BlockActivations<T, Arena> full_record_;
  HeadScratch<T, Arena> head_scratch_;
  Buffer<T, Arena> head_dh_, emb_d_;
  std::int64_t pad_ = 1;
  StackOptions options_;
  UnitHooks no_hooks_;
  UnitHooks* hooks_ = &no_hooks_;
};

namespace detail {
template <class S>
inline constexpr bool is_bloom_stack = false;
template <BloomModel M, Device D, class T, TensorAxis Axis>
inline constexpr bool is_bloom_stack<BloomStack<M, D, T, Axis>> = true;
}  // namespace detail

/// A BloomStack of any model, device, storage type and tensor axis: what the pipeline
/// schedule, checkpoints and decoding run.
template <class S>
concept ModelStack = detail::is_bloom_stack<S>;

}  // namespace seqpar::inline v0

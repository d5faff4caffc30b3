#pragma once
// The planner's analytic model, derived from how seqpar allocates and communicates, so that its
// bytes per rank and per collective equal the arena's and the counters' (tests/plan).

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "seqpar/comm/communicator.hpp"
#include "seqpar/config/bloom.hpp"
#include "seqpar/config/memory_modes.hpp"
#include "seqpar/config/units.hpp"
#include "seqpar/core/arena.hpp"
#include "seqpar/optim/offload.hpp"
#include "seqpar/parallel/pipeline_axis.hpp"
#include "seqpar/plan/plan_desc.hpp"

namespace seqpar::inline v0 {

/// The storage precision of weights, activations and gradients: fp32 throughout, or 16-bit
/// storage with fp32 master weights, moments and statistics (Bf16Mixed, Fp16Mixed).
enum class PlanPrecision : std::uint8_t { fp32, bf16, fp16 };

/// Everything the prediction depends on.
struct PlanQuery {
  BloomConfig model{};  // SeqGPT-560M by default
  PlanDesc plan{};
  PlanPrecision precision = PlanPrecision::fp32;
  std::int64_t micro_batch_rows = 1;
  std::int64_t seq = 512;
  std::int64_t micro_batches = 1;  // per data rank per step (gradient accumulation)
  /// Tokens with a target per micro-batch; -1: every position but each row's last
  /// (labels = ids, no padding).
  std::int64_t targets_per_micro_batch = -1;
  Recompute recompute = Recompute::none;
  /// Under Recompute::full, the blocks recomputed: those whose layer index in the whole
  /// model is a multiple of this (TrainOptions::recompute_every); the others keep their record.
  std::int64_t recompute_every = 1;
  bool fused_attention = false;  // AttentionKind::fused: a log-sum-exp per query, no probabilities
  Offload offload = Offload::none;
  /// The LM head's logits budget (TrainOptions::logits_bytes; config/units.hpp's defaults).
  std::int64_t logits_bytes = cuda_logits_budget;
  /// A communicator with its own stream (NcclComm): reductions and gathers overlap compute.
  bool asynchronous = false;

  std::int64_t targets() const {
    return targets_per_micro_batch >= 0 ? targets_per_micro_batch
                                        : micro_batch_rows * std::max<std::int64_t>(seq - 1, 0);
  }
  std::int64_t storage_bytes() const { return precision == PlanPrecision::fp32 ? 4 : 2; }
  bool mixed() const { return precision != PlanPrecision::fp32; }
};

/// What one rank (a pipeline stage and a tensor rank; every data rank of them is alike)
/// holds and moves in one step.
struct RankPrediction {
  int stage = 0, tensor_rank = 0;
  std::array<std::int64_t, memory_kinds> peak{};  // bytes at each category's peak
  std::int64_t device_peak = 0;                   // device bytes at their joint peak
  std::int64_t host_bytes = 0;                    // host_optimizer + host_parameters peaks
  CommStats data, tensor, pipeline;               // per step, under the ring model
  double flops = 0;                               // per step, recomputation included
  /// Device and host bytes together at their joint peak: what one arena that counts both
  /// sees (Cpu, whose device memory is host memory). device_peak when nothing is offloaded.
  std::int64_t joint_peak = 0;
  std::int64_t range_elements = 0;  // of the units this rank's optimizer updates
  /// Of the unit whose gradients are complete last in the backward (the table on a stage
  /// with the embedding): offloaded, its download has no backward left to hide behind.
  std::int64_t last_range_elements = 0;

  std::int64_t of(Memory m) const { return peak[static_cast<std::size_t>(m)]; }
};

/// Every rank kind of a plan, and the worst figures over them.
struct PlanPrediction {
  std::vector<RankPrediction> ranks;  // stage-major, tensor rank minor

  const RankPrediction& at(int stage, int tensor_rank, int tensor_degree) const {
    return ranks[static_cast<std::size_t>(stage * tensor_degree + tensor_rank)];
  }
  /// The largest peak of a category over the ranks.
  std::int64_t worst(Memory m) const {
    std::int64_t w = 0;
    for (const auto& r : ranks) w = std::max(w, r.of(m));
    return w;
  }
  std::int64_t worst_device_peak() const {
    std::int64_t w = 0;
    for (const auto& r : ranks) w = std::max(w, r.device_peak);
    return w;
  }
  /// The largest joint peak of device and host bytes (what a CPU rank's one arena holds).
  std::int64_t worst_joint_peak() const {
    std::int64_t w = 0;
    for (const auto& r : ranks) w = std::max(w, r.joint_peak);
    return w;
  }
  std::int64_t worst_host_bytes() const {
    std::int64_t w = 0;
    for (const auto& r : ranks) w = std::max(w, r.host_bytes);
    return w;
  }
};

namespace detail {

// Element counts of the units a tensor rank of t holds (every rank's are as large): 0 the
// embedding, 1..L the blocks, L + 1 ln_f, as config/units.hpp's table has them.
inline std::vector<std::int64_t> unit_numels(const BloomConfig& m, int t) {
  std::vector<std::int64_t> n;
  for (const auto& u : bloom_units(m, t, 0)) n.push_back(u.numel);
  return n;
}

// Records c with the ring counts of one call, as the communicator of `size` ranks would.
inline void count_call(CommStats& c, CollectiveKind k, std::int64_t count, std::int64_t elem,
                       int size) {
  if (size <= 1) return;  // a one-rank group moves nothing (and may not be a communicator)
  c.record(k,
           ring_bytes(k, static_cast<std::size_t>(count), static_cast<std::size_t>(elem), size, 0));
}

// How many of a stage's blocks (layers [first, first + count) of the model) Recompute::full
// runs again in the backward: those whose layer index is a multiple of `every`.
inline std::int64_t recomputed_blocks(const PlanQuery& q, std::int64_t first, std::int64_t count) {
  if (q.recompute != Recompute::full) return 0;
  const std::int64_t k = std::max<std::int64_t>(q.recompute_every, 1);
  const auto multiples_below = [k](std::int64_t n) { return (n + k - 1) / k; };  // in [0, n)
  return multiples_below(first + count) - multiples_below(first);
}

}  // namespace detail

/// Floating-point operations of one training step per rank of a plan (forward + backward,
/// the recomputation's extra forward work included; matrix products only).
inline double step_flops(const PlanQuery& q, int stage) {
  const auto& m = q.model;
  const StageLayers layers = StageLayers::of(m.layers, q.plan.pipeline, stage);
  const double t = q.plan.tensor, H = static_cast<double>(m.hidden), F = 4.0 * H,
               S = static_cast<double>(q.seq), L = static_cast<double>(layers.count());
  const double recomputed =
      static_cast<double>(detail::recomputed_blocks(q, layers.first, layers.count()));
  const double tokens = static_cast<double>(q.micro_batch_rows * q.seq * q.micro_batches);
  const double dense = 2.0 * (3 * H * H + H * H + 2 * F * H) / t;  // per token per block
  const double attn = 2.0 * 2.0 * S * H / t;                       // q k^T and P v, per token
  double fwd = L * (dense + attn);
  double extra = 0;  // recomputed in the backward
  if (q.recompute == Recompute::selective && !q.fused_attention) extra = L * attn / 2;
  extra += recomputed * (dense + attn);          // Recompute::full: those blocks' forward again
  if (q.fused_attention) extra += L * attn / 2;  // each tile's scores again
  double head = 0;
  if (layers.head)
    head = 2.0 * static_cast<double>(padded_vocab(m.vocab_size, q.plan.tensor)) / t * H;
  // backward: twice the forward (input and weight gradients)
  return tokens * (3 * fwd + extra) + static_cast<double>(q.targets() * q.micro_batches) * 3 * head;
}

namespace detail {

// One rank kind's prediction (a pipeline stage and a tensor rank), a section a function in
// the order of predict(); each section reads what the ones before it left in the members.
struct RankModel {
  const PlanQuery& q;
  const BloomConfig& m;
  const int D, T, S, Z;
  const std::int64_t H, F, L;
  const std::int64_t t, st = 4, master = 4;  // T, StatScalar<T>, Master
  const std::int64_t B, Sq, N, Nv, mb;
  const std::int64_t nh, Hl, Fl;
  const std::vector<std::int64_t> numel;
  const bool standard;
  // A block's record keeps the probabilities unless they are recomputed (selective); under
  // Recompute::full the blocks that are not recomputed keep their whole record.
  const bool keeps_probs;
  const bool offload_opt, offload_params;
  const StageLayers layers;
  const bool emb, head;
  const std::int64_t first, per;
  const std::size_t u_final, u_block = 1;
  std::vector<std::size_t> held;
  RankPrediction r;

  // Left by model_state() for the sections after it.
  std::int64_t params = 0, ranges = 0, z1_shards = 0, max_shard = 0;
  std::int64_t host_rest = 0, host_grads = 0, host_update = 0, host_after = 0;
  // unit_buffers(), activations(), buffers()
  std::int64_t unreduced = 0, gathered = 0;
  std::int64_t recomputed = 0, act_rest = 0, act_backward = 0, act_peak = 0;
  std::int64_t kept_buffers = 0, tied = 0, gather_source = 0, staging = 0;

  RankModel(const PlanQuery& query, int stage, int tensor_rank)
      : q(query),
        m(query.model),
        D(q.plan.data),
        T(q.plan.tensor),
        S(q.plan.pipeline),
        Z(q.plan.zero_stage),
        H(m.hidden),
        F(4 * m.hidden),
        L(m.layers),
        t(q.storage_bytes()),
        B(q.micro_batch_rows),
        Sq(q.seq),
        N(B * Sq),
        Nv(q.targets()),
        mb(q.micro_batches),
        nh(m.heads / T),
        Hl(H / T),
        Fl(F / T),
        numel(unit_numels(m, T)),
        standard(!q.fused_attention),
        keeps_probs(standard && q.recompute != Recompute::selective),
        offload_opt(q.offload != Offload::none),
        offload_params(q.offload == Offload::optimizer_and_params && Z == 3),
        layers(StageLayers::of(L, S, stage)),
        emb(layers.embedding),
        head(layers.head),
        first(layers.first),
        per(layers.count()),
        u_final(static_cast<std::size_t>(L + 1)) {
    r.stage = stage;
    r.tensor_rank = tensor_rank;
    for (std::size_t u = 0; u < numel.size(); ++u)
      if (layers.holds(u, L)) held.push_back(u);
  }

  RankPrediction predict() {
    model_state();
    unit_buffers();
    activations();
    buffers();
    peaks();
    traffic();
    r.flops = step_flops(q, r.stage);
    return r;
  }

  std::int64_t padded(std::size_t u) const { return (numel[u] + D - 1) / D * D; }
  std::int64_t shard(std::size_t u) const { return padded(u) / D; }
  // A rank's range of a unit (what its optimizer updates): the whole padded unit, or its shard.
  std::int64_t range(std::size_t u) const { return Z == 0 ? padded(u) : shard(u); }
  void set(Memory k, std::int64_t v) { r.peak[static_cast<std::size_t>(k)] = v; }

  // The model state (parallel/data/axis_base.hpp) and, offloaded, the host's.
  void model_state() {
    std::int64_t grads = 0, optim = 0;
    for (const auto u : held) {
      params += (Z == 3 ? shard(u) : padded(u)) * t;
      grads += (Z >= 2 ? shard(u) : padded(u)) * t;
      if (Z == 1) z1_shards += shard(u) * t;  // the reduce-scatter target, a buffer
      optim += range(u) * (2 + (q.mixed() ? 1 : 0)) * master;
      max_shard = std::max(max_shard, shard(u));
      ranges += range(u);
    }
    set(Memory::parameters, offload_params ? 0 : params);
    set(Memory::gradients, grads);
    set(Memory::optimizer, offload_opt ? 0 : optim);
    // Offloaded (optim/offload.hpp): the host keeps fp32 master weights (a float model's
    // too: its device weights are then the working copy) and both moments over the range
    // of every unit. Through the step it also holds every unit's reduced gradients as
    // the device stores them (t bytes an element: each unit's buffer is allocated before
    // the forward, filled by the copy during the backward and freed by the unit's
    // update, in unit order); a 16-bit model's update widens them a block at a time
    // (host_widen_block fp32 values, or the range when smaller).
    host_rest = (offload_opt ? 3 * master * ranges : 0) + (offload_params ? params : 0);
    host_grads = offload_opt ? t * ranges : 0;  // from the forward on
    // host_update: host staging at its peak during the updates; host_after: the most left
    // after a unit's update, with the device's transient all-gather source of that unit.
    if (offload_opt) {
      std::int64_t left = host_grads;
      for (const auto u : held) {
        const std::int64_t wide = q.mixed() ? master * std::min(host_widen_block, range(u)) : 0;
        host_update = std::max(host_update, left + wide);
        left -= t * range(u);
        host_after = std::max(host_after, left + ((Z == 1 || Z == 2) && D > 1 ? shard(u) * t : 0));
      }
    }
    set(Memory::host_optimizer, offload_opt ? 3 * master * ranges + host_update : 0);
    set(Memory::host_parameters, offload_params ? params : 0);  // ZeRO-3's shards
  }

  // The transient unit buffers of ZeRO-2/3. Walk the units in the order the stage's
  // backward reduces them (ln_f, the blocks from the top, then the table's grads on the
  // stage with the embedding); the head's table gradient exists from the loss to the end
  // of that backward.
  void unit_buffers() {
    if (Z >= 2) {
      const std::int64_t part = D > 1 ? 1 : 0;  // the reduce-scatter's output block
      const auto reduce = [&](std::size_t u) { return padded(u) + part * shard(u); };
      const std::int64_t table = padded(0);
      std::int64_t w = 0;
      const bool blocks = per > 0;
      if (head) w = std::max(w, table + reduce(u_final));
      const std::int64_t table_live = head && emb ? table : 0;  // held through the blocks
      if (blocks) w = std::max(w, table_live + reduce(u_block));
      if (head && !emb) w = std::max(w, table + part * shard(0));
      if (emb) w = std::max(w, reduce(0));
      if (q.asynchronous && blocks) w += reduce(u_block);  // one more unit in flight
      unreduced = w * t;
    }
    if (Z == 3) {
      // forward: one unit at a time; the head's table from the loss through ln_f's
      // backward (and, with the embedding on this stage, through the whole backward)
      std::int64_t w = std::max(padded(0) * (emb ? 1 : 0), padded(u_block));
      if (head) w = std::max(w, padded(0) + padded(u_final));
      if (head && emb) w = std::max(w, padded(0) + padded(u_block));
      if (q.asynchronous) w += padded(u_block);  // the next unit gathered ahead
      gathered = w * t;
    }
    set(Memory::unreduced_gradients, unreduced);
    set(Memory::gathered_parameters, gathered);
  }

  // The activation records (nn/activations.hpp, nn/block.hpp) the schedule holds
  // (train/pipeline.hpp).
  void activations() {
    const std::int64_t batch_part = N * (4 + st + 1);   // ids, ALiBi positions, validity
    const std::int64_t stream = (per + 1) * N * H * t;  // the residual stream x[0..per]
    std::int64_t block_rec = N * H * t * 3 + 4 * N * st + 4 * N * Hl * t + 2 * N * Fl * t;
    if (keeps_probs) block_rec += B * nh * Sq * Sq * t;
    if (!standard) block_rec += B * nh * Sq * st;
    const std::int64_t ends =
        (emb ? N * H * t + 2 * N * st : 0) + (head ? N * H * t + 2 * N * st : 0);
    // Recompute::full: a recomputed block keeps nothing but its input (in the stream);
    // its forward, and its forward again in the backward, run in the stack's one
    // transient record, the whole record of a block, kept from step to step.
    recomputed = recomputed_blocks(q, first, per);
    const std::int64_t full_record = recomputed > 0 ? block_rec : 0;
    const std::int64_t blocks_kept = (per - recomputed) * block_rec;
    const std::int64_t full = batch_part + stream + ends + blocks_kept;
    const std::int64_t prepared = batch_part + stream;  // the next record, before its forward
    const std::int64_t grad_slot = N * H * t;           // d stage output of a micro-batch
    std::int64_t records = 1, slots = 1;
    bool next_prepared = false;
    if (q.plan.gpipe && S > 1) {
      records = mb;
      slots = head ? mb : 1;
    } else {
      const std::int64_t warm = std::min<std::int64_t>(S - r.stage - 1, mb);
      records = std::min(warm + 1, mb);
      next_prepared = mb > warm + 1;
    }
    act_rest = full_record;  // between steps, and in the update
    act_backward = records * full + slots * grad_slot + full_record;
    act_peak = act_backward + (next_prepared ? prepared : 0);
    set(Memory::activations, act_peak);
  }

  // Buffers: scratch kept from step to step, and the transient ones.
  void buffers() {
    std::int64_t b = m.heads * st + 8 + z1_shards;              // ALiBi slopes, the norm's sum
    b += N * Fl * t + N * H * t + N * Hl * t + 3 * N * Hl * t;  // block backward scratch
    if (standard) b += B * nh * Sq * Sq * t;                    // d probabilities
    if (standard && q.recompute == Recompute::selective)
      b += B * nh * Sq * Sq * t;           // the recomputed ones
    if (!standard) b += B * nh * Sq * st;  // rowsum(d ctx * ctx)
    if (emb) b += N * H * t;               // the embedding's d
    if (head) b += N * H * t;              // d ln_f output
    if (head && Nv > 0) {
      const VocabShard vocab = vocab_shard(bloom_units(m, T, r.tensor_rank)[0].params[0]);
      const std::int64_t chunk =
          vocab_chunk(Nv, vocab.real, static_cast<std::size_t>(t), q.logits_bytes);
      b += 2 * Nv * H * t + Nv * chunk * t;  // kept rows, their d, a logits chunk
      if (q.mixed()) b += Nv * H * st;       // d rows summed in fp32
      b += 5 * Nv * st + 2 * Nv * 4;         // softmax statistics, row lists
    }
    kept_buffers = b;
    // Transient buffers, each at its own moment: the tied table's copy summed over the
    // pipeline (after the backward); in the update of a unit, ZeRO-1/2's all-gather
    // source; with the ZeRO-3 parameters offloaded, the shard uploaded for a gather (on
    // an asynchronous communicator the gather ahead's, alive through the backward).
    // Offloaded values cross in the storage type, so nothing is widened on the device.
    tied = S > 1 && (emb || head) ? (Z == 0 ? padded(0) : shard(0)) * t : 0;
    gather_source = (Z == 1 || Z == 2) && D > 1 ? max_shard * t : 0;
    staging = offload_params ? max_shard * t : 0;
    set(Memory::buffers, kept_buffers + std::max({tied, gather_source, staging}));
  }

  // The joint device peak, and with the host's (one arena on Cpu).
  void peaks() {
    const auto& pk = r.peak;
    const std::int64_t state = pk[0] + pk[1] + pk[2] + kept_buffers;
    const std::int64_t in_backward =
        state + act_backward + unreduced + gathered + (q.asynchronous ? staging : 0);
    const std::int64_t at_prepare = state + act_peak;
    const std::int64_t at_update = state + act_rest + std::max(tied, gather_source);
    r.device_peak = std::max({in_backward, at_prepare, at_update});
    r.range_elements = ranges;
    r.last_range_elements = held.empty() ? 0 : range(held[0]);
    r.host_bytes = r.of(Memory::host_optimizer) + r.of(Memory::host_parameters);
    // The host's gradient buffers are there through the step: beside the backward, the
    // tied sum, and (shrinking) the updates.
    const std::int64_t update_joint =
        state + act_rest + std::max({tied + host_grads, host_update, host_after});
    r.joint_peak =
        host_rest + std::max({host_grads + in_backward, host_grads + at_prepare, update_joint});
  }

  // The bytes each axis moves per step.
  void traffic() {
    using CK = CollectiveKind;
    // data axis
    for (const auto u : held) {
      if (Z == 0) count_call(r.data, CK::all_reduce, padded(u), t, D);
      if (Z == 1) count_call(r.data, CK::reduce_scatter, shard(u), t, D);
      if (Z >= 2)
        for (std::int64_t i = 0; i < mb; ++i)
          count_call(r.data, CK::reduce_scatter, shard(u), t, D);
      if (Z == 1 || Z == 2) count_call(r.data, CK::all_gather, shard(u), t, D);
      if (Z == 3) {
        // gathers per micro-batch: every use, except the table's backward on a stage that
        // kept it from the loss
        const std::int64_t uses = u == 0 && head && !emb ? 1 : 2;
        for (std::int64_t i = 0; i < mb * uses; ++i)
          count_call(r.data, CK::all_gather, shard(u), t, D);
      }
    }
    if (Z > 0) count_call(r.data, CK::all_reduce, 1, 8, D);  // the gradient norm's sum
    count_call(r.data, CK::all_reduce, 1, 8, D);             // the loss sum
    // tensor axis: per micro-batch, the embedding's rows, two sums per block each way,
    // and the vocab-parallel cross-entropy
    for (std::int64_t i = 0; i < mb; ++i) {
      if (emb) count_call(r.tensor, CK::all_reduce, N * H, t, T);
      // a recomputed block's forward again in the backward: its two sums once more
      for (std::int64_t l = 0; l < 4 * per + 2 * recomputed; ++l)
        count_call(r.tensor, CK::all_reduce, N * H, t, T);
      if (head && Nv > 0) {
        for (int k = 0; k < 3; ++k) count_call(r.tensor, CK::all_reduce, Nv, st, T);
        count_call(r.tensor, CK::all_reduce, Nv * H, q.mixed() ? st : t, T);
      }
    }
    count_call(r.tensor, CK::all_reduce, 1, 8, T);  // the gradient norm's sum
    // pipeline axis: a stage's input and output per micro-batch each way, the tied table
    for (std::int64_t i = 0; i < mb; ++i) {
      if (!emb) {
        count_call(r.pipeline, CK::recv, N * H, t, S);
        count_call(r.pipeline, CK::send, N * H, t, S);
      }
      if (!head) {
        count_call(r.pipeline, CK::send, N * H, t, S);
        count_call(r.pipeline, CK::recv, N * H, t, S);
      }
    }
    if (S > 1 && (emb || head)) {
      count_call(r.pipeline, CK::send, range(0), t, S);
      count_call(r.pipeline, CK::recv, range(0), t, S);
    }
    count_call(r.pipeline, CK::all_reduce, 1, 8, S);  // the loss sum
    count_call(r.pipeline, CK::all_reduce, 1, 8, S);  // the gradient norm's sum
  }
};

}  // namespace detail

/// The prediction for every rank kind of q.plan.
inline PlanPrediction predict(const PlanQuery& q) {
  PlanPrediction out;
  for (int stage = 0; stage < q.plan.pipeline; ++stage)
    for (int tr = 0; tr < q.plan.tensor; ++tr)
      out.ranks.push_back(detail::RankModel(q, stage, tr).predict());
  return out;
}

}  // namespace seqpar::inline v0

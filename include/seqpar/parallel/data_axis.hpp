#pragma once
// DataAxis<Policy, Stack, Device, T>: what the data-parallel ranks do with gradients,
// optimizer state and parameters, one specialisation per family of the plan's data policy:
//
// - Replicated<N>: every rank keeps and updates whole units; full gradients are
//   all-reduced once per step.
// - Sharded<Zero1 | Zero2, N>: rank r updates shard r of every unit's optimizer state, then
//   the parameters are all-gathered. ZeRO-1 reduce-scatters a unit's whole gradients once
//   per step; ZeRO-2 keeps only the gradient shard, reducing each unit as soon as a
//   micro-batch's gradients of it are complete.
// - Sharded<Zero3, N>: ZeRO-2's gradients, and only a parameter shard, gathered just
//   before each use of the unit and freed after.
//
// Reductions start as soon as a unit's gradients are complete: for Replicated and ZeRO-1
// in the last micro-batch's backward, for ZeRO-2/3 in every micro-batch's. They are the
// async collectives of AnyComm, so on a communicator with its own stream (NcclComm) they
// run while the backward goes on through the units before; reduce_gradients() joins them.
// On such a communicator ZeRO-2/3 keep one unit's reduction in flight: its gradient buffer
// is freed, and its result added into the shard, when the next unit is ready (or at the
// join), so two units' full gradients exist at once; and ZeRO-3 gathers the parameters of
// the unit the stage uses next while the current one computes. "Next" is the stack's unit
// order (StageLayers::unit_order: the embedding, the blocks, ln_f, the tied table for the
// head), followed forward by a forward and backward from the head by a backward, so two
// units' full parameters exist at once besides the tied table, which a stage with the
// embedding keeps from the loss to the end of its backward. Elsewhere each collective
// finishes at once and nothing is gathered ahead.
//
// Every unit's flat buffer is padded to a multiple of the degree N and cut into N equal
// shards; rank r owns elements [r s, (r + 1) s) of each unit.
//
// The arena's categories: the shards a rank keeps are `parameters`, `gradients` (ZeRO-1's
// reduce-scatter target beside the model's whole gradients is a `buffers` block) and
// `optimizer`; ZeRO-2/3's full-size gradients of a unit and their reduced block exist only
// between the backward and the reduction (`unreduced_gradients`), ZeRO-3's full parameters
// only while a unit is used (`gathered_parameters`); both are 0 after a step.
//
// Offload (an option of every data axis; optim/offload.hpp): with Offload::optimizer the
// master weights and moments of this rank's range live in host memory. A unit's reduced
// gradients start down to a host buffer (pinned on Cuda) as soon as the last micro-batch's
// reduction of them is complete, on the device's copy stream behind an event, so that the
// copy overlaps the backward of the units still to run (Ops<D>::download_after; on Cpu a
// memcpy at the same point). The update of a unit waits for its copy, runs host_adamw and
// uploads the master weights as the working weights; a 16-bit model's gradients and
// weights cross at 2 bytes, widened and narrowed on the host as the device rounds
// (optim/host_convert.hpp). ZeRO-3 with Offload::optimizer_and_params also keeps its
// parameter shards there, uploaded for each gather, so the device holds only the units in
// flight.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <memory>
#include <type_traits>
#include <vector>

#include "seqpar/backend/device.hpp"
#include "seqpar/comm/any_comm.hpp"
#include "seqpar/config/units.hpp"
#include "seqpar/optim/adamw.hpp"
#include "seqpar/optim/host_convert.hpp"
#include "seqpar/optim/offload.hpp"
#include "seqpar/optim/segments.hpp"
#include "seqpar/parallel/policies.hpp"
#include "seqpar/parallel/unit_hooks.hpp"

namespace seqpar::inline v0 {

/// The data axis of a plan whose data policy is `Policy` (PlanTraits<Plan>::data), for a
/// stack of type Stack on device D with storage type T. Only the specialisations below
/// exist; the primary template is what any other policy gets.
template <class Policy, class Stack, Device D, class T>
class DataAxis {
  static_assert(
      sizeof(Policy) == 0,
      "DataAxis<Policy, ...>: no data axis for this policy; a plan's data axis is Replicated<N>, "
      "Sharded<Zero1, N>, Sharded<Zero2, N> or Sharded<Zero3, N>.");
};

namespace detail {

/// What every data axis shares: this rank's range of each unit (the whole unit, or shard r
/// of N when `Sharded`), the AdamW state over it and the gradients it updates, the count
/// of micro-batches whose gradients are complete, the gradient norm and scaling, the
/// ZeRO-2/3 reduction of a micro-batch's gradients, and the registration as the stack's hooks.
template <class Stack, Device D, class T, bool Sharded>
class DataAxisBase : public UnitHooks {
 public:
  using Arena = typename Stack::Arena;
  /// Where offloaded state lives: on Cpu the model's own arena, on Cuda a pinned one.
  using HostArenaT = HostArena<D>;
  /// The type of the optimizer's master weights and moments (float for 16-bit T).
  using Master = typename AdamState<T, Arena>::Master;
  /// Whether each rank keeps only a shard of the optimizer state and the reduced gradients.
  static constexpr bool sharded = Sharded;

  DataAxisBase(const DataAxisBase&) = delete;
  DataAxisBase& operator=(const DataAxisBase&) = delete;
  ~DataAxisBase() override {
    join_quietly();
    drop_downloads_quietly();
    model_->set_hooks(nullptr);
  }

  int degree() const { return n_; }
  int rank() const { return r_; }
  AnyComm& comm() { return comm_; }
  Offload offload() const { return offload_; }

  /// Offloaded: how many gradient downloads this rank has started (a unit's each step,
  /// and again for one whose gradients changed after it); tests read it to see when.
  std::int64_t downloads_started() const { return downloads_started_; }

  /// Unit u's gradients still change after the backward (the tied table a pipeline sums
  /// over its first and last stage): its download waits for gradients_final(u).
  void defer_download(std::size_t u) {
    if (u < deferred_.size()) deferred_[u] = true;
  }
  /// Unit u's gradients are final for this step (after the tied sum): offloaded, a
  /// deferred unit's download starts now.
  void gradients_final(std::size_t u) {
    if (offloaded() && model_->holds(u) && deferred_[u]) start_download(u);
  }

  /// A step that makes no update (its gradients were not finite): offloaded, the host
  /// gradient buffers are freed once their copies have landed (a buffer goes back to the
  /// arena only when no copy writes it any more).
  void skip_update() { drop_downloads(); }

  /// The books of the host arena the offloaded state lives in, when it is not the model's
  /// own (Cuda); null on Cpu, where one arena counts both.
  const MemoryStats* separate_host_stats() const {
    if constexpr (shared_host_arena)
      return nullptr;
    else
      return own_host_ ? &own_host_->stats() : nullptr;
  }
  /// Starts a new peak window of that host arena (with the device arena's, each step).
  void reset_host_peaks() {
    if (own_host_) own_host_->reset_peaks();
  }

  /// Sum over the data axis of weight(u, spec) x the squared gradients of each tensor,
  /// every element counted once (weights let a caller count replicated copies once).
  /// The sum is taken on the device, a unit a call, and read once.
  template <class Weight>
  double grad_square_sum(Weight&& weight) {
    if (square_sum_.empty())
      square_sum_ = Buffer<double, Arena>(model_->arena(), 1, Memory::buffers);
    double s = 0;
    Ops<D>::upload(square_sum_.data(), &s, 1);
    for (std::size_t u = 0; u < shards_.size(); ++u) {
      if (!model_->holds(u)) continue;
      const std::int64_t b = own_offset(u);
      const T* g = grad_of(u);
      for_each_segments<double>(
          model_->units()[u], b, b + shards_[u].size,
          [&](const ParamSpec& spec) { return weight(u, spec); },
          [&](std::int64_t k, const kernels::Segments<double>& w) {
            // A run of weight 0 (the last pipeline stage's copy of the tied table) is not read.
            if (std::any_of(w.value, w.value + w.count, [](double x) { return x != 0; }))
              Ops<D>::sum_squares_accumulate(square_sum_.data(), g + k, w);
          });
    }
    Ops<D>::download(&s, square_sum_.data(), 1);
    if constexpr (Sharded) comm_.all_reduce(&s, 1, ReduceOp::sum);
    return s;
  }

  /// The reduced gradients times f. Offloaded, where they are on their way to the host:
  /// a float model's are scaled there, on the host's threads (the same IEEE product as
  /// Ops<D>::scale's), any other's on the device once its copy has read them, and
  /// downloaded again.
  void scale_grads(T f) {
    for (std::size_t u = 0; u < shards_.size(); ++u) {
      if (!model_->holds(u)) continue;
      const std::int64_t n = shards_[u].size;
      if (!offloaded()) {
        Ops<D>::scale(grad_of(u), f, n);
      } else if constexpr (std::is_same_v<T, Master>) {
        T* g = host_grads(u);
        detail::host_adam::for_blocks(n, 0, [g, f](std::int64_t i0, std::int64_t i1) {
          for (std::int64_t i = i0; i < i1; ++i) g[i] *= f;
        });
      } else {
        Ops<D>::stream_wait(down_[u].done);
        Ops<D>::scale(grad_of(u), f, n);
        start_download(u);
      }
    }
  }

  /// The reduced gradients of unit u this rank updates (range_size(u) elements).
  T* grad_storage(std::size_t u) { return grad_of(u); }

  /// Part `part` of the AdamW state of unit u over this rank's range (range_size(u)
  /// values), copied into host memory (checkpoints). The master weights of a float model
  /// that keeps none on the device are its weights over the range.
  void read_state(std::size_t u, AdamPart part, Master* host) {
    const std::int64_t n = shards_[u].size;
    if (offloaded()) {
      const Master* src = part_of(host_[u], part).data();
      std::copy(src, src + n, host);
    } else if (part == AdamPart::master && !AdamState<T, Arena>::mixed) {
      download_as<D>(host, weights_range(u), n, model_->arena());
    } else {
      Ops<D>::download(host, part_of(adam_[u], part).data(), n);
    }
  }
  /// Sets the moment `part` (m or v) of unit u over this rank's range from host memory.
  void write_moments(std::size_t u, AdamPart part, const Master* host) {
    SEQPAR_CHECK(part != AdamPart::master,
                 "write_moments: the master weights are set by write_params");
    const std::int64_t n = shards_[u].size;
    if (offloaded())
      std::copy(host, host + n, part_of(host_[u], part).data());
    else
      Ops<D>::upload(part_of(adam_[u], part).data(), host, n);
  }
  /// Elements [begin, end) of unit u this rank updates; `size` is the padded shard length.
  std::int64_t range_begin(std::size_t u) const { return shards_[u].begin; }
  std::int64_t range_size(std::size_t u) const { return shards_[u].size; }

  /// Host values over this rank's range of a unit (range_size values) made whole along the
  /// data axis: every rank's range in rank order (degree() x range_size values) when
  /// sharded, this rank's own otherwise (it is the whole unit). Collective when sharded.
  template <class V>
  std::vector<V> gather_ranges(std::vector<V> mine) {
    if constexpr (Sharded) {
      std::vector<V> all(mine.size() * static_cast<std::size_t>(n_));
      comm_.all_gather(mine.data(), all.data(), mine.size());
      return all;
    } else {
      return mine;
    }
  }

 protected:
  struct Range {
    std::int64_t begin = 0, end = 0, size = 0;
  };

  static constexpr bool shared_host_arena = std::is_same_v<HostArenaT, Arena>;

  // The gradient shards (sharded only) are counted as `shard_memory`: a buffer where the
  // model keeps whole gradients too (ZeRO-1), the gradients where they are the only ones.
  DataAxisBase(Stack& model, AnyComm comm, Memory shard_memory, Offload offload)
      : model_(&model),
        comm_(std::move(comm)),
        n_(comm_.size()),
        r_(comm_.rank()),
        offload_(offload) {
    const auto units = model.units().size();
    shards_.resize(units);
    adam_.resize(units);
    host_.resize(units);
    grad_shard_.resize(units);
    down_.resize(units);
    deferred_.assign(units, false);
    Arena& ar = model.arena();
    if constexpr (!shared_host_arena)
      if (offloaded()) own_host_ = std::make_unique<HostArenaT>();
    for (std::size_t u = 0; u < units; ++u) {
      if (!model.holds(u)) continue;
      const std::int64_t s = model.padded_numel(u) / n_, numel = model.units()[u].numel;
      // Replicated ranks keep the whole unit's optimizer state; ZeRO ranks one shard.
      auto& sh = shards_[u];
      sh = Sharded ? Range{r_ * s, std::min((r_ + 1) * s, numel), s}
                   : Range{0, numel, model.padded_numel(u)};
      // Offloaded: the state in host memory, none of it on the device.
      const std::int64_t end = std::max(sh.begin, sh.end);
      if (offloaded()) {
        adam_[u].begin = sh.begin;
        adam_[u].end = end;
        host_adam_init<D>(host_[u], host_arena(), ar, sh.begin, end, sh.size,
                          model.params(u) + own_offset(u));
      } else {
        adam_init<D>(adam_[u], ar, sh.begin, end, sh.size, model.params(u) + own_offset(u));
      }
      if constexpr (Sharded)
        grad_shard_[u] = Buffer<T, Arena>(ar, static_cast<std::size_t>(s), shard_memory);
    }
    model.set_hooks(this);
  }

  // Where this rank's range starts in unit u's flat buffer.
  std::int64_t own_offset(std::size_t u) const { return Sharded ? shards_[u].begin : 0; }

  bool offloaded() const { return offload_ != Offload::none; }
  HostArenaT& host_arena() {
    if constexpr (shared_host_arena)
      return model_->arena();
    else
      return *own_host_;
  }
  template <class State>
  static auto& part_of(State& s, AdamPart part) {
    return part == AdamPart::master ? s.master : part == AdamPart::m ? s.m : s.v;
  }
  // The device weights of this rank's range of unit u (range_size values); the shard of a
  // data axis that keeps only shards.
  virtual const T* weights_range(std::size_t u) = 0;

  // AdamW on this rank's range of unit u, whose weights on the device p points at: on the
  // device, or offloaded (the reduced gradients downloaded, the host update, the master
  // weights uploaded into p; p null: the caller takes them from the host state itself).
  void update_range(std::size_t u, T* p, const kernels::AdamCoeffs& c, double grad_factor) {
    if (!offloaded())
      return adamw_update<D>(p, grad_of(u), adam_[u], model_->units()[u], c, grad_factor);
    if constexpr (!AdamState<T, Arena>::mixed)
      SEQPAR_CHECK(
          grad_factor == 1.0, "update_range: a gradient factor (", grad_factor,
          ") needs master weights; scale the gradients of a float or double model instead");
    auto& h = host_[u];
    const std::int64_t updated = h.end - h.begin;
    T* g = host_grads(u);
    if constexpr (std::is_same_v<T, Master>) {
      host_adamw_update(h, g, model_->units()[u], c, grad_factor);
      if (p) Ops<D>::upload(p, h.master.data(), updated);
    } else {
      constexpr DType dt = StorageDType<T>::value;
      {
        // [min(block, range)] fp32, for this unit's update only
        const std::int64_t n = std::min(host_widen_block, shards_[u].size);
        Buffer<Master, HostArenaT> wide(host_arena(), static_cast<std::size_t>(n),
                                        Memory::host_optimizer);
        host_adamw_update_widened(h, g, dt, wide.data(), model_->units()[u], c, grad_factor);
      }
      if (p) {
        // The 16-bit gradients are spent: their buffer carries the narrowed weights up. The
        // upload from pinned memory runs after its call returns, so the buffer goes back
        // to the arena (and to the next unit's widening) only once the copy has run.
        host_narrow(g, h.master.data(), updated, dt);
        Ops<D>::upload(p, g, updated);
        Ops<D>::record(down_[u].ready);
        Ops<D>::wait(down_[u].ready);
      }
    }
    // At rest host_optimizer holds exactly the master weights and moments.
    down_[u].grads.reset();
  }

  // --- offloaded gradients on their way to the host -----------------------------------
  // Each held unit's host buffer for this step's reduced gradients (range_size values of
  // T), allocated before the forward and freed by the unit's update. A copy the step
  // before started and no update consumed (a skipped step) is waited for by the device
  // first: the gradients it reads are zeroed after this.
  void prepare_downloads() {
    if (!offloaded()) return;
    for (std::size_t u = 0; u < shards_.size(); ++u) {
      if (!model_->holds(u)) continue;
      auto& d = down_[u];
      if (d.started) Ops<D>::stream_wait(d.done);
      d.started = false;
      if (d.grads.empty())
        d.grads = Buffer<T, HostArenaT>(host_arena(), static_cast<std::size_t>(shards_[u].size),
                                        Memory::host_optimizer);
    }
  }
  // Offloaded: unit u's reduced gradients (complete for the step, on the device's stream)
  // start down into its host buffer behind an event, overlapping what the device does next.
  // Nothing writes them again before the step has waited for the copy: the next writes are
  // the next step's zeroing (behind stream_wait in prepare_downloads), a device scaling
  // (behind stream_wait in scale_grads) and the tied sum (whose unit downloads only after).
  void start_download(std::size_t u) {
    if (!offloaded()) return;
    auto& d = down_[u];
    Ops<D>::record(d.ready);
    Ops<D>::download_after(d.grads.data(), grad_of(u), shards_[u].size, d.ready, d.done);
    d.started = true;
    ++downloads_started_;
  }
  // A unit whose reduction has been queued: its download starts now where the reduction
  // has run (a communicator without a stream of its own, or nothing to reduce); on an
  // asynchronous one when the data axis joins it, at the next unit's reduction (the
  // device then waits for this one, as ZeRO-2/3 do for theirs) or at the step's join.
  void reduction_queued(std::size_t u, CommTicket t) {
    if (!offloaded() || deferred_[u]) return;
    if (t.seq == 0 || !comm_.asynchronous()) return start_download(u);
    download_pending();
    pending_ = {u, t, true};
  }
  void download_pending() {
    if (!pending_.set) return;
    comm_.join(pending_.ticket);
    pending_.set = false;
    start_download(pending_.unit);
  }
  void drop_downloads() {
    for (auto& d : down_) {
      if (d.started) Ops<D>::wait(d.done);
      d.started = false;
      d.grads.reset();
    }
    pending_.set = false;
  }
  void drop_downloads_quietly() noexcept {
    try {
      drop_downloads();
    } catch (...) {  // a failed copy in a destructor: the buffers go with the arena
    }
  }
  // Unit u's gradients in host memory, their copy waited for; a unit no hook announced
  // (none on this stage's path) is downloaded now.
  T* host_grads(std::size_t u) {
    auto& d = down_[u];
    if (!d.started) start_download(u);
    Ops<D>::wait(d.done);
    return d.grads.data();
  }

  T* grad_of(std::size_t u) {
    if constexpr (Sharded)
      return grad_shard_[u].data();
    else
      return model_->grads(u);
  }

  // A buffer a queued collective may still use goes back to the allocator only behind it;
  // a failing join in a destructor has nothing left to protect.
  void join_quietly() noexcept {
    try {
      if (std::uncaught_exceptions() == 0) comm_.join();
    } catch (...) {
    }
  }

  // --- Replicated and ZeRO-1: whole gradients, reduced once per step --------------------
  void count_micro_batches(std::int64_t micro_batches) {
    micro_batches_ = micro_batches;
    ready_count_.assign(shards_.size(), 0);
  }
  // Whether unit u's gradients are now whole for the step (its last micro-batch's are in).
  bool last_micro_batch(std::size_t u) { return ++ready_count_[u] == micro_batches_; }
  // start(u) for every held unit whose reduction did not start in the backward.
  template <class Start>
  void start_remaining(Start&& start) {
    for (std::size_t u = 0; u < shards_.size(); ++u)
      if (model_->holds(u) && ready_count_[u] < micro_batches_) start(u);
  }

  // --- ZeRO-2/3: each micro-batch's gradients reduced into the shard --------------------
  void zero_grad_shards() {
    for (auto& g : grad_shard_)
      if (!g.empty()) Ops<D>::fill(g.data(), T(0), static_cast<std::int64_t>(g.size()));
  }
  // The model frees a unit's gradient buffer after each reduction; one is made again for
  // a use that writes gradients.
  void provide_grad_buffer(std::size_t u, UnitUse use) {
    if (writes_grads(use) && model_->grad_buffer(u).empty())
      model_->grad_buffer(u) =
          Buffer<T, Arena>(model_->arena(), static_cast<std::size_t>(model_->padded_numel(u)),
                           Memory::unreduced_gradients);
  }
  // Unit u's gradients of one micro-batch reduce-scattered and added into its shard: on an
  // asynchronous communicator left in flight until the next unit's, else finished now.
  void reduce_micro_batch(std::size_t u) {
    finish_in_flight();
    const std::int64_t s = shards_[u].size;
    const bool last = last_micro_batch(u);
    if (n_ == 1) {
      Ops<D>::add(grad_shard_[u].data(), model_->grads(u), s);
      model_->grad_buffer(u).reset();
      if (last && !deferred_[u]) start_download(u);
      return;
    }
    in_flight_.unit = u;
    in_flight_.last = last;
    in_flight_.grads = std::move(model_->grad_buffer(u));  // the model allocates anew when needed
    in_flight_.part =
        Buffer<T, Arena>(model_->arena(), static_cast<std::size_t>(s), Memory::unreduced_gradients);
    in_flight_.ticket = comm_.reduce_scatter_async(in_flight_.grads.data(), in_flight_.part.data(),
                                                   static_cast<std::size_t>(s), ReduceOp::sum);
    if (!comm_.asynchronous()) finish_in_flight();  // it has run: free its buffers now
  }
  // The reduction in flight joined, its shard added into the unit's gradient shard and its
  // buffers freed (after the join, so memory is reused only behind it).
  void finish_in_flight() {
    if (in_flight_.part.empty()) return;
    comm_.join(in_flight_.ticket);
    const std::size_t u = in_flight_.unit;
    Ops<D>::add(grad_shard_[u].data(), in_flight_.part.data(), shards_[u].size);
    in_flight_.part.reset();
    in_flight_.grads.reset();
    // The shard is complete with its last micro-batch's part: its download goes behind the add.
    if (in_flight_.last && !deferred_[u]) start_download(u);
  }

  // --- weights from the host ----------------------------------------------------------
  // Unit u's full values (padded_numel(u), master type) in device memory.
  Buffer<Master, Arena> upload_full(std::size_t u, const Master* host) {
    const std::int64_t n = model_->padded_numel(u);
    Buffer<Master, Arena> full(model_->arena(), static_cast<std::size_t>(n), Memory::buffers);
    Ops<D>::upload(full.data(), host, n);
    return full;
  }
  // The master weights of this rank's range set exactly from unit u's full values, on the
  // device (`full`) or in host memory (`host`) when offloaded.
  void set_master(std::size_t u, const Master* full, const Master* host) {
    if (offloaded())
      std::copy(host + own_offset(u), host + own_offset(u) + shards_[u].size,
                host_[u].master.data());
    else if constexpr (AdamState<T, Arena>::mixed)
      Ops<D>::copy(adam_[u].master.data(), full + own_offset(u), shards_[u].size);
  }

  Stack* model_;
  AnyComm comm_;
  int n_, r_;
  Offload offload_;
  std::unique_ptr<HostArenaT> own_host_;  // Cuda, offloaded: the pinned arena (before its buffers)
  std::vector<Range> shards_;
  std::vector<AdamState<T, Arena>> adam_;                // offloaded: its range only, no buffers
  std::vector<HostAdamState<Master, HostArenaT>> host_;  // offloaded: the state in host memory
  std::vector<Buffer<T, Arena>> grad_shard_;  // sharded: [size] per unit, the reduced gradients
  Buffer<double, Arena> square_sum_;          // [1] the gradient norm's sum, on the device
  std::int64_t micro_batches_ = 1;            // in this step
  std::vector<std::int64_t> ready_count_;  // per unit: micro-batches whose gradients are complete
  struct {
    std::size_t unit = 0;
    Buffer<T, Arena> grads, part;  // the unit's full gradients and this rank's reduced block
    CommTicket ticket;
    bool last = false;  // the step's last micro-batch of the unit: its shard is then complete
  } in_flight_;         // ZeRO-2/3: the reduction not yet added into its shard
  // Offloaded, per unit: this step's reduced gradients on their way to the host.
  struct Download {
    Buffer<T, HostArenaT> grads;         // [range_size] of T: 16-bit values cross at 2 bytes
    typename Ops<D>::Event ready, done;  // the gradients complete; the copy landed
    bool started = false;                // this step's copy has been queued
  };
  std::vector<Download> down_;
  std::vector<bool> deferred_;  // per unit: downloaded at gradients_final, not in the backward
  struct {
    std::size_t unit = 0;
    CommTicket ticket;
    bool set = false;
  } pending_;  // offloaded on an asynchronous communicator: the reduction whose download is next
  std::int64_t downloads_started_ = 0;
};

/// The data axes whose model keeps every parameter whole (all but ZeRO-3): the optimizer
/// updates this rank's range in place, and sharded ranks all-gather the units after.
template <class Stack, Device D, class T, bool Sharded>
class WholeParamsAxis : public DataAxisBase<Stack, D, T, Sharded> {
  using Base = DataAxisBase<Stack, D, T, Sharded>;

 public:
  using typename Base::Master;

  /// AdamW on this rank's range of every unit, then, when sharded, the units made whole
  /// again. `grad_factor` multiplies the gradients first (16-bit models: 1 / loss scale x clip).
  void optimizer_step(const kernels::AdamCoeffs& c, double grad_factor = 1.0) {
    Stack& m = *this->model_;
    for (std::size_t u = 0; u < this->shards_.size(); ++u) {
      if (!m.holds(u)) continue;
      const std::int64_t size = this->shards_[u].size;
      this->update_range(u, m.params(u) + this->own_offset(u), c, grad_factor);
      if constexpr (Sharded) {
        if (this->n_ == 1) continue;  // one rank updated the whole unit in place
        Buffer<T, typename Base::Arena> mine(m.arena(), static_cast<std::size_t>(size),
                                             Memory::buffers);
        Ops<D>::copy(mine.data(), m.params(u) + this->r_ * size, size);
        this->comm_.all_gather(mine.data(), m.params(u), static_cast<std::size_t>(size));
      }
    }
  }

  /// Unit u's full parameters (padded_numel(u) values) copied into host memory.
  void read_params(std::size_t u, T* host) {
    Ops<D>::download(host, this->model_->params(u), this->model_->padded_numel(u));
  }

  /// Sets unit u's full parameters from host memory (padded_numel(u) values of the master
  /// type: float for 16-bit models, else T): the model's copy gets them rounded to T, the
  /// master weights of this rank's range get them exactly.
  void write_params(std::size_t u, const Master* host) {
    const auto full = this->upload_full(u, host);
    Ops<D>::convert(this->model_->params(u), full.data(), this->model_->padded_numel(u));
    this->set_master(u, full.data(), host);
  }

 protected:
  WholeParamsAxis(Stack& model, AnyComm comm, Memory shard_memory, Offload offload)
      : Base(model, std::move(comm), shard_memory, offload) {
    SEQPAR_CHECK(offload != Offload::optimizer_and_params, "data axis (", zero_name(),
                 "): Offload::optimizer_and_params offloads parameter shards, which only "
                 "Sharded<Zero3, N> keeps; use Offload::optimizer here, or ZeRO-3");
  }

 private:
  static const char* zero_name() { return Sharded ? "ZeRO-1/2" : "Replicated"; }
  const T* weights_range(std::size_t u) override {
    return this->model_->params(u) + this->own_offset(u);
  }
};

}  // namespace detail

/// Replicated<N>: whole gradients all-reduced in place once per step; every rank updates
/// every unit.
template <int N, class Stack, Device D, class T>
class DataAxis<Replicated<N>, Stack, D, T> final
    : public detail::WholeParamsAxis<Stack, D, T, false> {
  using Base = detail::WholeParamsAxis<Stack, D, T, false>;

 public:
  static constexpr int zero_stage = 0;

  DataAxis(Stack& model, AnyComm comm, Offload offload = Offload::none)
      : Base(model, std::move(comm), Memory::gradients, offload) {}

  /// Zeroes the gradients a step of `micro_batches` micro-batches accumulates into.
  void begin_step(std::int64_t micro_batches) {
    this->prepare_downloads();
    this->count_micro_batches(micro_batches);
    this->model_->zero_grads();
  }

  void grads_ready(std::size_t u) override {
    if (this->last_micro_batch(u)) start_reduction(u);  // the gradients are whole once per step
  }

  /// After the last micro-batch: the gradients summed over the data ranks (reductions not
  /// started during the backward start here), every reduction joined. Every rank's
  /// gradient is already divided by the global token count, so the sum is the mean.
  void reduce_gradients() {
    this->start_remaining([this](std::size_t u) { start_reduction(u); });
    this->comm_.join();
    this->download_pending();
  }

 private:
  // Unit u's whole gradients summed over the ranks in place, queued behind the backward;
  // offloaded, their download follows the sum.
  void start_reduction(std::size_t u) {
    this->reduction_queued(
        u, this->comm_.all_reduce_async(this->model_->grads(u),
                                        static_cast<std::size_t>(this->model_->padded_numel(u)),
                                        ReduceOp::sum));
  }
};

/// Sharded<Zero1, N> and Sharded<Zero2, N>: rank r updates shard r of each unit and the
/// parameters are all-gathered after. ZeRO-1 keeps whole gradients in the model and
/// reduce-scatters them once per step; ZeRO-2 keeps only the shard, into which each
/// micro-batch's gradients of a unit are reduced as soon as they are complete.
template <class Z, int N, class Stack, Device D, class T>
requires(Z::stage == 1 || Z::stage == 2) class DataAxis<Sharded<Z, N>, Stack, D, T> final
    : public detail::WholeParamsAxis<Stack, D, T, true> {
  using Base = detail::WholeParamsAxis<Stack, D, T, true>;

 public:
  static constexpr int zero_stage = Z::stage;

  DataAxis(Stack& model, AnyComm comm, Offload offload = Offload::none)
      : Base(model, std::move(comm), zero_stage == 1 ? Memory::buffers : Memory::gradients,
             offload) {
    if constexpr (zero_stage == 2)
      for (std::size_t u = 0; u < model.units().size(); ++u)
        if (model.holds(u)) model.grad_buffer(u).reset();
  }

  /// Zeroes the gradients a step of `micro_batches` micro-batches accumulates into.
  void begin_step(std::int64_t micro_batches) {
    this->prepare_downloads();
    this->count_micro_batches(micro_batches);
    if constexpr (zero_stage == 1)
      this->model_->zero_grads();
    else
      this->zero_grad_shards();
  }

  void acquire(std::size_t u, UnitUse use) override {
    if constexpr (zero_stage == 2) this->provide_grad_buffer(u, use);
  }

  void grads_ready(std::size_t u) override {
    if constexpr (zero_stage == 1) {
      if (this->last_micro_batch(u)) start_reduction(u);  // the gradients are whole once per step
    } else {
      this->reduce_micro_batch(u);
    }
  }

  /// After the last micro-batch: every unit's gradients summed over the data ranks into
  /// this rank's shard, every reduction joined.
  void reduce_gradients() {
    if constexpr (zero_stage == 1)
      this->start_remaining([this](std::size_t u) { start_reduction(u); });
    this->comm_.join();
    this->finish_in_flight();
    this->download_pending();
  }

 private:
  // ZeRO-1: unit u's whole gradients reduce-scattered into this rank's shard, queued
  // behind the backward; offloaded, the shard's download follows.
  void start_reduction(std::size_t u) {
    Stack& m = *this->model_;
    const std::int64_t s = this->shards_[u].size;
    CommTicket t;
    if (this->n_ == 1)
      Ops<D>::copy(this->grad_shard_[u].data(), m.grads(u), s);
    else
      t = this->comm_.reduce_scatter_async(m.grads(u), this->grad_shard_[u].data(),
                                           static_cast<std::size_t>(s), ReduceOp::sum);
    this->reduction_queued(u, t);
  }
};

/// Sharded<Zero3, N>: ZeRO-2's gradient shards, and only a shard of the parameters. Each
/// use of a unit gathers its parameters (or takes the gather started ahead of it) and
/// frees them after; the optimizer updates the shard.
template <int N, class Stack, Device D, class T>
class DataAxis<Sharded<Zero3, N>, Stack, D, T> final
    : public detail::DataAxisBase<Stack, D, T, true> {
  using Base = detail::DataAxisBase<Stack, D, T, true>;
  using Arena = typename Base::Arena;
  using HostArenaT = typename Base::HostArenaT;

 public:
  using typename Base::Master;
  static constexpr int zero_stage = 3;

  DataAxis(Stack& model, AnyComm comm, Offload offload = Offload::none)
      : Base(model, std::move(comm), Memory::gradients, offload),
        order_(model.unit_order()),
        params_offloaded_(offload == Offload::optimizer_and_params) {
    const auto units = model.units().size();
    param_shard_.resize(units);
    host_param_shard_.resize(units);
    held_.assign(units, false);
    for (std::size_t u = 0; u < units; ++u) {
      if (!model.holds(u)) continue;
      const std::int64_t s = this->shards_[u].size;
      model.grad_buffer(u).reset();
      if (params_offloaded_) {
        host_param_shard_[u] = Buffer<T, HostArenaT>(
            this->host_arena(), static_cast<std::size_t>(s), Memory::host_parameters);
        Ops<D>::download(host_param_shard_[u].data(), model.params(u) + this->r_ * s, s);
      } else {
        param_shard_[u] =
            Buffer<T, Arena>(model.arena(), static_cast<std::size_t>(s), Memory::parameters);
        Ops<D>::copy(param_shard_[u].data(), model.params(u) + this->r_ * s, s);
      }
      model.param_buffer(u).reset();
    }
  }
  ~DataAxis() override { this->join_quietly(); }  // the gather ahead's buffer is freed behind it

  /// Zeroes the gradient shards a step of `micro_batches` micro-batches accumulates into.
  void begin_step(std::int64_t micro_batches) {
    drop_gathered_ahead();
    this->prepare_downloads();
    this->count_micro_batches(micro_batches);
    this->zero_grad_shards();
  }

  void acquire(std::size_t u, UnitUse use) override {
    if (!held_[u]) take_params(u);
    held_[u] = true;
    gather_ahead(expected_after(u, use));
    this->provide_grad_buffer(u, use);
  }
  void release(std::size_t u) override {
    this->model_->param_buffer(u).reset();
    held_[u] = false;
  }
  void grads_ready(std::size_t u) override { this->reduce_micro_batch(u); }

  /// After the last micro-batch: every unit's gradients summed over the data ranks into
  /// this rank's shard, every collective joined.
  void reduce_gradients() {
    this->comm_.join();
    this->finish_in_flight();
    drop_gathered_ahead();  // the optimizer is about to change the shards
  }

  /// AdamW on this rank's shard of every unit (the parameters stay sharded). With the
  /// parameters offloaded the update stays on the host: the master weights rounded into
  /// the host shard.
  void optimizer_step(const kernels::AdamCoeffs& c, double grad_factor = 1.0) {
    for (std::size_t u = 0; u < param_shard_.size(); ++u) {
      if (!this->model_->holds(u)) continue;
      if (!params_offloaded_) {
        this->update_range(u, param_shard_[u].data(), c, grad_factor);
        continue;
      }
      this->update_range(u, nullptr, c, grad_factor);
      const auto& h = this->host_[u];
      if constexpr (std::is_same_v<T, Master>)
        std::copy(h.master.data(), h.master.data() + (h.end - h.begin),
                  host_param_shard_[u].data());
      else
        host_narrow(host_param_shard_[u].data(), h.master.data(), h.end - h.begin,
                    StorageDType<T>::value);
    }
  }

  /// Unit u's full parameters (padded_numel(u) values), gathered, copied into host memory.
  void read_params(std::size_t u, T* host) {
    Buffer<T, Arena> full;
    gather_params(u, full);
    Ops<D>::download(host, full.data(), this->model_->padded_numel(u));
  }

  /// Sets unit u's parameters from its full values in host memory (padded_numel(u) values
  /// of the master type): this rank's shard gets them rounded to T, the master weights
  /// exactly.
  void write_params(std::size_t u, const Master* host) {
    const auto full = this->upload_full(u, host);
    drop_gathered_ahead();
    const std::int64_t s = this->shards_[u].size, at = this->r_ * s;
    if (params_offloaded_)
      std::transform(host + at, host + at + s, host_param_shard_[u].data(),
                     [](Master x) { return static_cast<T>(x); });
    else
      Ops<D>::convert(param_shard_[u].data(), full.data() + at, s);
    this->set_master(u, full.data(), host);
  }

 private:
  static constexpr std::size_t no_unit = static_cast<std::size_t>(-1);

  // Unit u's full parameters into the model, from the gather started ahead when it is
  // u's, else gathered now.
  void take_params(std::size_t u) {
    if (ahead_.unit == u && !ahead_.params.empty()) {
      this->comm_.join(ahead_.ticket);
      this->model_->param_buffer(u) = std::move(ahead_.params);
      ahead_.staging.reset();
      return;
    }
    drop_gathered_ahead();
    gather_params(u, this->model_->param_buffer(u));
  }

  // The unit the stage uses after this use of u: the next one in the stack's unit order
  // for a forward (ln_f is followed by the tied table, for the head), the one before for
  // a use that writes gradients (the head's is followed by ln_f); nothing after a head
  // without a backward (an evaluation or the logits end there). The head's uses are the
  // order's last entry, every other use the unit's first one (unit 0 is at both ends on a
  // stage with the embedding and the head).
  std::size_t expected_after(std::size_t u, UnitUse use) const {
    const bool head = use == UnitUse::head || use == UnitUse::head_backward;
    const auto at = head ? order_.end() - 1 : std::find(order_.begin(), order_.end(), u);
    if (at == order_.end()) return no_unit;
    if (writes_grads(use)) return at == order_.begin() ? no_unit : *(at - 1);
    return at + 1 == order_.end() ? no_unit : *(at + 1);
  }

  // On an asynchronous communicator: starts gathering unit u's parameters (unless u is no
  // unit, not on this stage, already present or another gather is ahead).
  void gather_ahead(std::size_t u) {
    if (!this->comm_.asynchronous() || u >= held_.size() || !this->model_->holds(u) || held_[u] ||
        !ahead_.params.empty())
      return;
    Buffer<T, Arena> params(this->model_->arena(),
                            static_cast<std::size_t>(this->model_->padded_numel(u)),
                            Memory::gathered_parameters);
    const CommTicket t =
        this->comm_.all_gather_async(device_shard(u, ahead_.staging), params.data(),
                                     static_cast<std::size_t>(this->shards_[u].size));
    ahead_.unit = u;
    ahead_.params = std::move(params);
    ahead_.ticket = t;
  }

  // A gather ahead that will not be used: joined (its memory is reused only behind it) and freed.
  void drop_gathered_ahead() {
    if (ahead_.params.empty()) return;
    this->comm_.join(ahead_.ticket);
    ahead_.params.reset();
    ahead_.staging.reset();
  }

  // With one rank the collectives are device copies (device memory never passes through a
  // host communicator's copy).
  void gather_params(std::size_t u, Buffer<T, Arena>& full) {
    const std::int64_t s = this->shards_[u].size;
    full = Buffer<T, Arena>(this->model_->arena(),
                            static_cast<std::size_t>(this->model_->padded_numel(u)),
                            Memory::gathered_parameters);
    Buffer<T, Arena> staging;
    const T* shard = device_shard(u, staging);
    if (this->n_ == 1) return Ops<D>::copy(full.data(), shard, s);
    this->comm_.all_gather(shard, full.data(), static_cast<std::size_t>(s));
  }

  // Unit u's parameter shard in device memory: the axis's own, or, offloaded, uploaded
  // from the host into `staging` (which must outlive the collective reading it).
  const T* device_shard(std::size_t u, Buffer<T, Arena>& staging) {
    if (!params_offloaded_) return param_shard_[u].data();
    const std::int64_t s = this->shards_[u].size;
    staging = Buffer<T, Arena>(this->model_->arena(), static_cast<std::size_t>(s), Memory::buffers);
    Ops<D>::upload(staging.data(), host_param_shard_[u].data(), s);
    return staging.data();
  }

  const T* weights_range(std::size_t u) override { return param_shard_[u].data(); }

  std::vector<std::size_t>
      order_;  // the stack's units in forward order, the tied table last for the head
  bool params_offloaded_;
  std::vector<Buffer<T, Arena>> param_shard_;            // [size] per unit, this rank's parameters
  std::vector<Buffer<T, HostArenaT>> host_param_shard_;  // the same in host memory, offloaded
  std::vector<bool> held_;  // per unit: its full parameters are in the model
  struct {
    std::size_t unit = no_unit;
    Buffer<T, Arena> params;   // padded_numel(unit) values, being gathered
    Buffer<T, Arena> staging;  // parameters offloaded: the shard uploaded for the gather
    CommTicket ticket;
  } ahead_;  // on an asynchronous communicator: the unit gathered ahead of its use
};

}  // namespace seqpar::inline v0

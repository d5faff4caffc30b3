#pragma once
// DataAxisBase: what every data axis keeps, whatever its reduction schedule. Each unit's
// flat buffer is padded to a multiple of the degree N and cut into N equal shards; rank r
// owns elements [r s, (r + 1) s) of each unit when sharded, the whole unit otherwise.
// Over that range it holds the AdamW state (on the device, or offloaded to the host:
// optim/offload.hpp), the reduced gradients it updates, the gradient norm's sum and the
// state's way to and from checkpoints.

#include <algorithm>
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
#include "seqpar/parallel/data/gradient_downloads.hpp"
#include "seqpar/parallel/unit_hooks.hpp"

namespace seqpar::inline v0::detail {

/// This rank's range of each unit of a `Stack` on device D with storage type T, the AdamW
/// state over it, the reduced gradients it updates, the norm, the checkpoint I/O, and the
/// registration as the stack's hooks. `Sharded`: the range is shard r of N.
template <UnitStore Stack, Device D, class T, bool Sharded>
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
    downloads_.drop_quietly();
    model_->set_hooks(nullptr);
  }

  int degree() const { return n_; }
  int rank() const { return r_; }
  AnyComm& comm() { return comm_; }
  Offload offload() const { return offload_; }

  /// Offloaded: how many gradient downloads this rank has started (a unit's each step,
  /// and again for one whose gradients changed after it); tests read it to see when.
  std::int64_t downloads_started() const { return downloads_.started_count(); }

  /// Unit u's gradients still change after the backward (the tied table a pipeline sums
  /// over its first and last stage): its download waits for gradients_final(u).
  void defer_download(std::size_t u) { downloads_.defer(u); }
  /// Unit u's gradients are final for this step (after the tied sum): offloaded, a
  /// deferred unit's download starts now.
  void gradients_final(std::size_t u) {
    if (model_->holds(u)) downloads_.final(u, grad_of(u), range_size(u));
  }

  /// A step that makes no update (its gradients were not finite): offloaded, the host
  /// gradient buffers are freed once their copies have landed.
  void skip_update() { downloads_.drop(); }

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
    for (std::size_t u = 0; u < ranges_.size(); ++u) {
      if (!model_->holds(u)) continue;
      const std::int64_t b = own_offset(u);
      const T* g = grad_of(u);
      for_each_segments<double>(
          model_->units()[u], b, b + range_size(u),
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
    for (std::size_t u = 0; u < ranges_.size(); ++u) {
      if (!model_->holds(u)) continue;
      const std::int64_t n = range_size(u);
      if (!offloaded()) {
        Ops<D>::scale(grad_of(u), f, n);
      } else if constexpr (std::is_same_v<T, Master>) {
        T* g = downloads_.host(u, grad_of(u), n);
        detail::host_adam::for_blocks(n, 0, [g, f](std::int64_t i0, std::int64_t i1) {
          for (std::int64_t i = i0; i < i1; ++i) g[i] *= f;
        });
      } else {
        downloads_.device_waits(u);
        Ops<D>::scale(grad_of(u), f, n);
        downloads_.start(u, grad_of(u), n);
      }
    }
  }

  /// The reduced gradients of unit u this rank updates (range_size(u) elements).
  T* grad_storage(std::size_t u) { return grad_of(u); }

  /// Part `part` of the AdamW state of unit u over this rank's range (range_size(u)
  /// values), copied into host memory (checkpoints). The master weights of a float model
  /// that keeps none on the device are its weights over the range.
  void read_state(std::size_t u, AdamPart part, Master* host) {
    const std::int64_t n = range_size(u);
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
    const std::int64_t n = range_size(u);
    if (offloaded())
      std::copy(host, host + n, part_of(host_[u], part).data());
    else
      Ops<D>::upload(part_of(adam_[u], part).data(), host, n);
  }
  /// Elements [begin, end) of unit u this rank updates; `size` is the padded shard length.
  std::int64_t range_begin(std::size_t u) const { return ranges_[u].begin; }
  std::int64_t range_size(std::size_t u) const { return ranges_[u].size; }

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
  // The gradient shards (sharded only) are counted as `shard_memory`: a buffer where the
  // model keeps whole gradients too (ZeRO-1), the gradients where they are the only ones.
  DataAxisBase(Stack& model, AnyComm comm, Memory shard_memory, Offload offload)
      : model_(&model),
        comm_(std::move(comm)),
        n_(comm_.size()),
        r_(comm_.rank()),
        offload_(offload),
        downloads_(model.units().size(), offload != Offload::none) {
    const auto units = model.units().size();
    ranges_.resize(units);
    adam_.resize(units);
    host_.resize(units);
    grad_shard_.resize(units);
    Arena& ar = model.arena();
    if constexpr (!shared_host_arena)
      if (offloaded()) own_host_ = std::make_unique<HostArenaT>();
    for (std::size_t u = 0; u < units; ++u) {
      if (!model.holds(u)) continue;
      const std::int64_t s = model.padded_numel(u) / n_, numel = model.units()[u].numel;
      auto& range = ranges_[u];
      range = Sharded ? Range{r_ * s, std::min((r_ + 1) * s, numel), s}
                      : Range{0, numel, model.padded_numel(u)};
      const std::int64_t end = std::max(range.begin, range.end);
      if (offloaded()) {  // the state in host memory, none of it on the device
        adam_[u].begin = range.begin;
        adam_[u].end = end;
        host_adam_init<D>(host_[u], host_arena(), ar, range.begin, end, range.size,
                          model.params(u) + own_offset(u));
      } else {
        adam_init<D>(adam_[u], ar, range.begin, end, range.size, model.params(u) + own_offset(u));
      }
      if constexpr (Sharded)
        grad_shard_[u] = Buffer<T, Arena>(ar, static_cast<std::size_t>(s), shard_memory);
    }
    model.set_hooks(this);
  }

  Stack& model() { return *model_; }
  // Where this rank's range starts in unit u's flat buffer.
  std::int64_t own_offset(std::size_t u) const { return Sharded ? ranges_[u].begin : 0; }
  bool offloaded() const { return offload_ != Offload::none; }
  HostArenaT& host_arena() {
    if constexpr (shared_host_arena)
      return model_->arena();
    else
      return *own_host_;
  }
  // The reduced gradients of unit u over this rank's range: its shard, or the model's own.
  T* grad_of(std::size_t u) {
    if constexpr (Sharded)
      return grad_shard_[u].data();
    else
      return model_->grads(u);
  }

  // Sharded: the reduced gradients zeroed for a step that accumulates into them.
  void zero_grad_shards() {
    for (auto& g : grad_shard_)
      if (!g.empty()) Ops<D>::fill(g.data(), T(0), static_cast<std::int64_t>(g.size()));
  }

  // --- offloaded gradients on their way to the host (GradientDownloads) ----------------
  // Each held unit's host buffer for this step, allocated before the forward and freed by
  // the unit's update.
  void prepare_downloads() {
    if (!offloaded()) return;
    for (std::size_t u = 0; u < ranges_.size(); ++u)
      if (model_->holds(u)) downloads_.prepare(u, host_arena(), range_size(u));
  }
  // Unit u's reduced gradients are complete for the step.
  void gradients_complete(std::size_t u) { downloads_.complete(u, grad_of(u), range_size(u)); }
  // A reduction into unit u's reduced gradients has been queued under t.
  void reduction_queued(std::size_t u, CommTicket t) {
    downloads_.queued(u, grad_of(u), range_size(u), t, comm_);
  }
  // After the step's join: the download of the last reduction queued starts.
  void downloads_after_join() { downloads_.flush(comm_); }

  // --- the update ---------------------------------------------------------------------
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
    T* g = downloads_.host(u, grad_of(u), range_size(u));
    if constexpr (std::is_same_v<T, Master>) {
      host_adamw_update(h, g, model_->units()[u], c, grad_factor);
      if (p) Ops<D>::upload(p, h.master.data(), updated);
    } else {
      constexpr DType dt = StorageDType<T>::value;
      {
        // [min(block, range)] fp32, for this unit's update only
        const std::int64_t n = std::min(host_widen_block, range_size(u));
        Buffer<Master, HostArenaT> wide(host_arena(), static_cast<std::size_t>(n),
                                        Memory::host_optimizer);
        host_adamw_update_widened(h, g, dt, wide.data(), model_->units()[u], c, grad_factor);
      }
      if (p) {
        // The 16-bit gradients are spent: their buffer carries the narrowed weights up.
        host_narrow(g, h.master.data(), updated, dt);
        downloads_.upload_from_host(u, p, updated);
      }
    }
    // At rest host_optimizer holds exactly the master weights and moments.
    downloads_.spent(u);
  }
  // Offloaded: unit u's updated master weights rounded to T into `host` (its updated
  // elements), the values a device update would give.
  void master_to(std::size_t u, T* host) {
    const auto& h = host_[u];
    if constexpr (std::is_same_v<T, Master>)
      std::copy(h.master.data(), h.master.data() + (h.end - h.begin), host);
    else
      host_narrow(host, h.master.data(), h.end - h.begin, StorageDType<T>::value);
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
      std::copy(host + own_offset(u), host + own_offset(u) + range_size(u), host_[u].master.data());
    else if constexpr (AdamState<T, Arena>::mixed)
      Ops<D>::copy(adam_[u].master.data(), full + own_offset(u), range_size(u));
  }

  // A buffer a queued collective may still use goes back to the allocator only behind it;
  // a failing join in a destructor has nothing left to protect.
  void join_quietly() noexcept {
    try {
      if (std::uncaught_exceptions() == 0) comm_.join();
    } catch (...) {
    }
  }

 private:
  struct Range {
    std::int64_t begin = 0, end = 0, size = 0;
  };
  static constexpr bool shared_host_arena = std::is_same_v<HostArenaT, Arena>;

  template <class State>
  static auto& part_of(State& s, AdamPart part) {
    return part == AdamPart::master ? s.master : part == AdamPart::m ? s.m : s.v;
  }

  Stack* model_;
  AnyComm comm_;
  int n_, r_;
  Offload offload_;
  std::unique_ptr<HostArenaT> own_host_;  // Cuda, offloaded: the pinned arena (before its buffers)
  std::vector<Range> ranges_;
  std::vector<AdamState<T, Arena>> adam_;                // offloaded: its range only, no buffers
  std::vector<HostAdamState<Master, HostArenaT>> host_;  // offloaded: the state in host memory
  std::vector<Buffer<T, Arena>> grad_shard_;  // sharded: [size] per unit, the reduced gradients
  Buffer<double, Arena> square_sum_;          // [1] the gradient norm's sum, on the device
  GradientDownloads<D, T, HostArenaT> downloads_;  // offloaded: the reduced gradients to the host
};

}  // namespace seqpar::inline v0::detail

#pragma once
// GradientDownloads: offloaded, each unit's reduced gradients start down to a host buffer
// (pinned on Cuda) as soon as they are complete for the step, on the device's copy stream
// behind an event, so that the copy overlaps the backward of the units still to run
// (Ops<D>::download_after; on Cpu a memcpy at the same point). The data axes call it; it
// holds the buffers, events and the one reduction whose download waits for its join.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "seqpar/backend/device.hpp"
#include "seqpar/comm/any_comm.hpp"
#include "seqpar/core/arena.hpp"

namespace seqpar::inline v0::detail {

/// The host copies of the units' reduced gradients (range_size values of T each: 16-bit
/// values cross at 2 bytes). Every call does nothing when the axis does not offload.
template <Device D, class T, class HostArenaT>
class GradientDownloads {
 public:
  GradientDownloads(std::size_t units, bool enabled) : enabled_(enabled), units_(units) {}

  bool enabled() const { return enabled_; }
  /// How many downloads have started (a unit's each step, and again for one whose
  /// gradients changed after it); tests read it to see when.
  std::int64_t started_count() const { return started_count_; }

  /// Unit u's gradients still change after the backward (the tied table a pipeline sums
  /// over its first and last stage): its download waits for final(u).
  void defer(std::size_t u) {
    if (u < units_.size()) units_[u].deferred = true;
  }

  /// Before the forward: unit u's host buffer for this step's n gradients. A copy the
  /// step before started and no update consumed (a skipped step) is waited for by the
  /// device first: the gradients it reads are zeroed after this.
  void prepare(std::size_t u, HostArenaT& host, std::int64_t n) {
    if (!enabled_) return;
    Unit& d = units_[u];
    if (d.started) Ops<D>::stream_wait(d.done);
    d.started = false;
    if (d.host.empty())
      d.host = Buffer<T, HostArenaT>(host, static_cast<std::size_t>(n), Memory::host_optimizer);
  }

  /// Unit u's n gradients at `grads` (device memory, on the device's stream) are complete
  /// for the step: their download starts now, unless the unit is deferred.
  void complete(std::size_t u, const T* grads, std::int64_t n) {
    if (enabled_ && !units_[u].deferred) start(u, grads, n);
  }
  /// The tied sum is done: a deferred unit's download starts now.
  void final(std::size_t u, const T* grads, std::int64_t n) {
    if (enabled_ && units_[u].deferred) start(u, grads, n);
  }

  /// A reduction into unit u's n gradients at `grads` has been queued on comm under t:
  /// its download starts now where it has run (a communicator without a stream of its
  /// own, or nothing to reduce); on an asynchronous one when the axis joins it, at the
  /// next unit's reduction (the device then waits for this one, as ZeRO-2/3 do for
  /// theirs) or at the step's join (flush).
  void queued(std::size_t u, const T* grads, std::int64_t n, CommTicket t, AnyComm& comm) {
    if (!enabled_ || units_[u].deferred) return;
    if (t.seq == 0 || !comm.asynchronous()) return start(u, grads, n);
    flush(comm);
    pending_ = {u, grads, n, t, true};
  }
  /// The queued reduction joined and its download started.
  void flush(AnyComm& comm) {
    if (!pending_.set) return;
    comm.join(pending_.ticket);
    pending_.set = false;
    start(pending_.unit, pending_.grads, pending_.n);
  }

  /// Unit u's n gradients at `grads` start down into its host buffer behind an event.
  /// Nothing writes them again before the step has waited for the copy: the next writes are
  /// the next step's zeroing (behind prepare), a device scaling (behind device_waits) and
  /// the tied sum (whose unit downloads only after).
  void start(std::size_t u, const T* grads, std::int64_t n) {
    if (!enabled_) return;
    Unit& d = units_[u];
    Ops<D>::record(d.ready);
    Ops<D>::download_after(d.host.data(), grads, n, d.ready, d.done);
    d.started = true;
    ++started_count_;
  }
  /// The device's stream waits for unit u's copy before it writes the gradients again.
  void device_waits(std::size_t u) { Ops<D>::stream_wait(units_[u].done); }

  /// Unit u's gradients in host memory, their copy waited for; a unit no hook announced
  /// (none on this stage's path) is downloaded from `grads` now.
  T* host(std::size_t u, const T* grads, std::int64_t n) {
    Unit& d = units_[u];
    if (!d.started) start(u, grads, n);
    Ops<D>::wait(d.done);
    return d.host.data();
  }
  /// The first n values of unit u's host buffer (the spent gradients' room, now holding
  /// narrowed weights) up into `dev`; the buffer goes back to the arena (and to the next
  /// unit's widening) only once that copy has run.
  void upload_from_host(std::size_t u, T* dev, std::int64_t n) {
    Unit& d = units_[u];
    Ops<D>::upload(dev, d.host.data(), n);
    Ops<D>::record(d.ready);
    Ops<D>::wait(d.ready);
  }
  /// Unit u's update has used its gradients: the host buffer is freed.
  void spent(std::size_t u) { units_[u].host.reset(); }

  /// A step that makes no update: the host buffers are freed once their copies have
  /// landed (a buffer goes back to the arena only when no copy writes it any more).
  void drop() {
    for (auto& d : units_) {
      if (d.started) Ops<D>::wait(d.done);
      d.started = false;
      d.host.reset();
    }
    pending_.set = false;
  }
  void drop_quietly() noexcept {
    try {
      drop();
    } catch (...) {  // a failed copy in a destructor: the buffers go with the arena
    }
  }

 private:
  struct Unit {
    Buffer<T, HostArenaT> host;          // [range_size] of T
    typename Ops<D>::Event ready, done;  // the gradients complete; the copy landed
    bool started = false;                // this step's copy has been queued
    bool deferred = false;               // downloaded at final(), not in the backward
  };
  struct Pending {
    std::size_t unit = 0;
    const T* grads = nullptr;
    std::int64_t n = 0;
    CommTicket ticket;
    bool set = false;
  };

  bool enabled_;
  std::vector<Unit> units_;
  Pending pending_;  // on an asynchronous communicator: the reduction whose download is next
  std::int64_t started_count_ = 0;
};

}  // namespace seqpar::inline v0::detail

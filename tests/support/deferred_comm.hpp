#pragma once
// DeferredComm: a communicator whose async collectives run only when they are joined, so
// that CPU tests hold code to what an asynchronous transport (NCCL on its own stream)
// allows. An async call records its inputs and fills its outputs with 0xFF bytes (NaN for
// every floating type); when joined, it checks that nothing wrote its buffers or changed
// its inputs in between (an Error names the rank and the collective), then runs the
// collective on the wrapped communicator. Reading an output early reads NaN; joining too
// late, or freeing a buffer early, changes what the collective sees. Blocking calls first
// run every pending one, as a stream runs collectives in order.

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "seqpar/comm/any_comm.hpp"
#include "seqpar/comm/communicator.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::test {

template <Communicator C>
class DeferredComm {
 public:
  /// Async calls made through this communicator and every one split from it.
  struct Counts {
    std::uint64_t all_reduce = 0, reduce_scatter = 0, all_gather = 0;
  };

  explicit DeferredComm(C inner) : DeferredComm(std::move(inner), std::make_shared<Counts>()) {}

  int rank() const { return inner_.rank(); }
  int size() const { return inner_.size(); }
  CommStats& stats() { return inner_.stats(); }
  const CommStats& stats() const { return inner_.stats(); }
  const Counts& counts() const { return *counts_; }

  template <CommElement T>
  void all_reduce(T* data, std::size_t n, ReduceOp op) {
    join();
    inner_.all_reduce(data, n, op);
  }
  template <CommElement T>
  void reduce_scatter(const T* in, T* out, std::size_t n, ReduceOp op) {
    join();
    inner_.reduce_scatter(in, out, n, op);
  }
  template <CommElement T>
  void all_gather(const T* in, T* out, std::size_t n) {
    join();
    inner_.all_gather(in, out, n);
  }
  template <CommElement T>
  void broadcast(T* data, std::size_t n, int root) {
    join();
    inner_.broadcast(data, n, root);
  }
  template <CommElement T>
  void send(const T* data, std::size_t n, int peer, int tag) {
    join();
    inner_.send(data, n, peer, tag);
  }
  template <CommElement T>
  void recv(T* data, std::size_t n, int peer, int tag) {
    join();
    inner_.recv(data, n, peer, tag);
  }
  void barrier() {
    join();
    inner_.barrier();
  }
  DeferredComm split(int color, int key) {
    join();
    return DeferredComm(inner_.split(color, key), counts_);
  }

  /// In place: `data` holds the input now and must be left alone until joined.
  template <CommElement T>
  CommTicket all_reduce_async(T* data, std::size_t n, ReduceOp op) {
    auto input = std::make_shared<std::vector<T>>(data, data + n);
    poison(data, n);
    ++counts_->all_reduce;
    return queue([inner = inner_, data, n, op, input]() mutable {
      expect_poisoned(inner.rank(), data, n, "all_reduce_async", "its buffer");
      std::memcpy(data, input->data(), n * sizeof(T));
      inner.all_reduce(data, n, op);
    });
  }
  template <CommElement T>
  CommTicket reduce_scatter_async(const T* in, T* out, std::size_t n, ReduceOp op) {
    const std::size_t total = n * static_cast<std::size_t>(size());
    auto input = std::make_shared<std::vector<T>>(in, in + total);
    poison(out, n);
    ++counts_->reduce_scatter;
    return queue([inner = inner_, in, out, n, op, total, input]() mutable {
      expect_unchanged(inner.rank(), in, *input, total, "reduce_scatter_async");
      expect_poisoned(inner.rank(), out, n, "reduce_scatter_async", "its output");
      inner.reduce_scatter(in, out, n, op);
    });
  }
  template <CommElement T>
  CommTicket all_gather_async(const T* in, T* out, std::size_t n) {
    const std::size_t total = n * static_cast<std::size_t>(size());
    auto input = std::make_shared<std::vector<T>>(in, in + n);
    poison(out, total);
    ++counts_->all_gather;
    return queue([inner = inner_, in, out, n, total, input]() mutable {
      expect_unchanged(inner.rank(), in, *input, n, "all_gather_async");
      expect_poisoned(inner.rank(), out, total, "all_gather_async", "its output");
      inner.all_gather(in, out, n);
    });
  }

  /// Runs the pending collectives up to and including the one `t` names.
  void join(CommTicket t) {
    auto& st = *state_;
    while (!st.pending.empty() && st.pending.front().seq <= t.seq) {
      auto run = std::move(st.pending.front().run);
      st.pending.erase(st.pending.begin());
      run();
    }
  }
  /// Runs every pending collective.
  void join() { join(CommTicket{state_->issued}); }

 private:
  DeferredComm(C inner, std::shared_ptr<Counts> counts)
      : inner_(std::move(inner)), state_(std::make_shared<State>()), counts_(std::move(counts)) {}

  struct Pending {
    std::uint64_t seq;
    std::function<void()> run;
  };
  struct State {
    std::uint64_t issued = 0;
    std::vector<Pending> pending;
  };

  CommTicket queue(std::function<void()> run) {
    const std::uint64_t seq = ++state_->issued;
    state_->pending.push_back({seq, std::move(run)});
    return {seq};
  }

  template <class T>
  static void poison(T* p, std::size_t n) {
    std::memset(static_cast<void*>(p), 0xFF, n * sizeof(T));
  }
  template <class T>
  static void expect_poisoned(int rank, const T* p, std::size_t n, const char* what,
                              const char* buffer) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n * sizeof(T); ++i)
      SEQPAR_CHECK(bytes[i] == 0xFF, "DeferredComm: rank ", rank, " wrote ", buffer,
                   " of a queued ", what, " before joining it (element ", i / sizeof(T), " of ", n,
                   ")");
  }
  template <class T>
  static void expect_unchanged(int rank, const T* p, const std::vector<T>& was, std::size_t n,
                               const char* what) {
    SEQPAR_CHECK(std::memcmp(p, was.data(), n * sizeof(T)) == 0, "DeferredComm: rank ", rank,
                 " changed the input of a queued ", what, " before joining it");
  }

  C inner_;
  std::shared_ptr<State> state_;
  std::shared_ptr<Counts> counts_;
};

}  // namespace seqpar::test

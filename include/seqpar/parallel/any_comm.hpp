#pragma once
// AnyComm: any Communicator behind one type, so that a Trainer's type names its plan
// and not its transport. The virtual call costs nothing next to the collectives.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>

#include "seqpar/comm/communicator.hpp"

namespace seqpar::inline v0 {

/// A type-erased communicator handle (copies share the group, like the handles they wrap).
class AnyComm {
 public:
  AnyComm() = default;
  template <Communicator C>
    requires(!std::same_as<std::remove_cvref_t<C>, AnyComm>)
  explicit AnyComm(C comm) : impl_(std::make_shared<Model<C>>(std::move(comm))) {}

  explicit operator bool() const { return impl_ != nullptr; }
  int rank() const { return impl_ ? impl_->rank() : 0; }
  int size() const { return impl_ ? impl_->size() : 1; }
  /// Counters of the wrapped communicator (a group of one without one counts nothing).
  CommStats& stats() { return impl_ ? impl_->stats() : solo_stats_; }
  const CommStats& stats() const { return impl_ ? impl_->stats() : solo_stats_; }
  void barrier() {
    if (impl_) impl_->barrier();
  }
  AnyComm split(int color, int key) { return impl_ ? AnyComm(impl_->split(color, key)) : AnyComm(); }

  template <class T>
  void all_reduce(T* data, std::size_t n, ReduceOp op) {
    if (size() > 1) impl_->all_reduce(data, n, op);
  }
  template <class T>
  void reduce_scatter(const T* in, T* out, std::size_t n, ReduceOp op) {
    if (impl_) return impl_->reduce_scatter(in, out, n, op);
    std::copy(in, in + n, out);  // one rank: its block is the whole input
  }
  template <class T>
  void all_gather(const T* in, T* out, std::size_t n) {
    if (impl_) return impl_->all_gather(in, out, n);
    std::copy(in, in + n, out);
  }
  template <class T>
  void broadcast(T* data, std::size_t n, int root) {
    if (size() > 1) impl_->broadcast(data, n, root);
  }
  template <class T>
  void send(const T* data, std::size_t n, int peer, int tag) {
    SEQPAR_CHECK(impl_, "send to rank ", peer, " on a one-rank group");
    impl_->send(data, n, peer, tag);
  }
  template <class T>
  void recv(T* data, std::size_t n, int peer, int tag) {
    SEQPAR_CHECK(impl_, "recv from rank ", peer, " on a one-rank group");
    impl_->recv(data, n, peer, tag);
  }

 private:
// The six typed operations, declared (pure) in Concept and forwarded in Model, per element type.
#define SEQPAR_ANYCOMM_OPS(T, SPEC, BODY)                                                   \
  virtual void all_reduce(T* d, std::size_t n, ReduceOp op) SPEC BODY(all_reduce(d, n, op))      \
  virtual void reduce_scatter(const T* i, T* o, std::size_t n, ReduceOp op)                 \
      SPEC BODY(reduce_scatter(i, o, n, op))                                                \
  virtual void all_gather(const T* i, T* o, std::size_t n) SPEC BODY(all_gather(i, o, n))   \
  virtual void broadcast(T* d, std::size_t n, int root) SPEC BODY(broadcast(d, n, root))    \
  virtual void send(const T* d, std::size_t n, int p, int t) SPEC BODY(send(d, n, p, t))    \
  virtual void recv(T* d, std::size_t n, int p, int t) SPEC BODY(recv(d, n, p, t))
#define SEQPAR_ANYCOMM_PURE(call) = 0;
#define SEQPAR_ANYCOMM_FORWARD(call) { comm.call; }

  struct Concept {
    virtual ~Concept() = default;
    SEQPAR_ANYCOMM_OPS(float, , SEQPAR_ANYCOMM_PURE)
    SEQPAR_ANYCOMM_OPS(double, , SEQPAR_ANYCOMM_PURE)
    SEQPAR_ANYCOMM_OPS(std::int64_t, , SEQPAR_ANYCOMM_PURE)
    SEQPAR_ANYCOMM_OPS(Bf16Bits, , SEQPAR_ANYCOMM_PURE)
    SEQPAR_ANYCOMM_OPS(F16Bits, , SEQPAR_ANYCOMM_PURE)
    virtual int rank() const = 0;
    virtual int size() const = 0;
    virtual CommStats& stats() = 0;
    virtual void barrier() = 0;
    virtual std::shared_ptr<Concept> split(int color, int key) = 0;
  };

  template <class C>
  struct Model final : Concept {
    explicit Model(C c) : comm(std::move(c)) {}
    SEQPAR_ANYCOMM_OPS(float, override, SEQPAR_ANYCOMM_FORWARD)
    SEQPAR_ANYCOMM_OPS(double, override, SEQPAR_ANYCOMM_FORWARD)
    SEQPAR_ANYCOMM_OPS(std::int64_t, override, SEQPAR_ANYCOMM_FORWARD)
    SEQPAR_ANYCOMM_OPS(Bf16Bits, override, SEQPAR_ANYCOMM_FORWARD)
    SEQPAR_ANYCOMM_OPS(F16Bits, override, SEQPAR_ANYCOMM_FORWARD)
    int rank() const override { return comm.rank(); }
    int size() const override { return comm.size(); }
    CommStats& stats() override { return comm.stats(); }
    void barrier() override { comm.barrier(); }
    std::shared_ptr<Concept> split(int color, int key) override {
      return std::make_shared<Model<C>>(comm.split(color, key));
    }
    C comm;
  };
#undef SEQPAR_ANYCOMM_OPS
#undef SEQPAR_ANYCOMM_PURE
#undef SEQPAR_ANYCOMM_FORWARD

  explicit AnyComm(std::shared_ptr<Concept> impl) : impl_(std::move(impl)) {}

  std::shared_ptr<Concept> impl_;
  CommStats solo_stats_;
};

}  // namespace seqpar::inline v0

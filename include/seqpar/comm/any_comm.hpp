#pragma once
// AnyComm: any Communicator behind one type, so that a Trainer's type names its plan
// and not its transport. The virtual call costs nothing next to the collectives.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>

#include "seqpar/comm/communicator.hpp"
#include "seqpar/core/separate_compilation.hpp"

namespace seqpar::inline v0 {

/// How a buffer of T crosses a communicator: as `type` (T itself for the CommElement
/// types; a device backend maps its 16-bit storage types to Bf16Bits / F16Bits, which have
/// their layout), and how a one-rank group with no communicator copies a block of it.
template <class T>
struct CommWire {
  using type = T;
  static void copy(const T* in, T* out, std::size_t n) { std::copy(in, in + n, out); }
};

/// A type-erased communicator handle (copies share the group, like the handles they wrap).
class AnyComm {
 public:
  AnyComm() = default;
  // AnyComm itself is ruled out before Communicator<C> is asked: that concept checks
  // copy_constructible<C>, which for C = AnyComm would consider this constructor again
  // (clang rejects the recursion; constraints of one conjunction are checked in order).
  template <class C>
  requires(!std::same_as<std::remove_cvref_t<C>, AnyComm>) &&
      Communicator<C> explicit AnyComm(C comm)
      : impl_(std::make_shared<Model<C>>(std::move(comm))) {}

  explicit operator bool() const { return impl_ != nullptr; }
  int rank() const { return impl_ ? impl_->rank() : 0; }
  int size() const { return impl_ ? impl_->size() : 1; }
  /// Counters of the wrapped communicator (a group of one without one counts nothing).
  CommStats& stats() { return impl_ ? impl_->stats() : solo_stats_; }
  const CommStats& stats() const { return impl_ ? impl_->stats() : solo_stats_; }
  void barrier() {
    if (impl_) impl_->barrier();
  }
  AnyComm split(int color, int key) {
    return impl_ ? AnyComm(impl_->split(color, key)) : AnyComm();
  }

  template <class T>
  void all_reduce(T* data, std::size_t n, ReduceOp op) {
    if (size() > 1) impl_->all_reduce(wire(data), n, op);
  }
  template <class T>
  void reduce_scatter(const T* in, T* out, std::size_t n, ReduceOp op) {
    if (impl_) return impl_->reduce_scatter(wire(in), wire(out), n, op);
    CommWire<T>::copy(in, out, n);  // one rank: its block is the whole input
  }
  template <class T>
  void all_gather(const T* in, T* out, std::size_t n) {
    if (impl_) return impl_->all_gather(wire(in), wire(out), n);
    CommWire<T>::copy(in, out, n);
  }
  template <class T>
  void broadcast(T* data, std::size_t n, int root) {
    if (size() > 1) impl_->broadcast(wire(data), n, root);
  }
  template <class T>
  void send(const T* data, std::size_t n, int peer, int tag) {
    SEQPAR_CHECK(impl_, "send to rank ", peer, " on a one-rank group");
    impl_->send(wire(data), n, peer, tag);
  }
  template <class T>
  void recv(T* data, std::size_t n, int peer, int tag) {
    SEQPAR_CHECK(impl_, "recv from rank ", peer, " on a one-rank group");
    impl_->recv(wire(data), n, peer, tag);
  }

  /// Sends `send_n` elements to `peer` and receives `recv_n` from the same peer as one
  /// operation (NCCL: one group), so that two ranks exchanging with each other cannot
  /// deadlock where a send waits for its receive; elsewhere a send, then a receive.
  template <class T>
  void sendrecv(const T* send, std::size_t send_n, int send_tag, T* recv, std::size_t recv_n,
                int recv_tag, int peer) {
    SEQPAR_CHECK(impl_, "sendrecv with rank ", peer, " on a one-rank group");
    impl_->sendrecv(wire(send), send_n, send_tag, wire(recv), recv_n, recv_tag, peer);
  }

  /// all_reduce that may overlap the caller's later work (see AsyncCommunicator; a
  /// communicator without a stream of its own runs it at once). Untouchable until joined.
  template <class T>
  CommTicket all_reduce_async(T* data, std::size_t n, ReduceOp op) {
    return size() > 1 ? impl_->all_reduce_async(wire(data), n, op) : CommTicket{};
  }
  /// reduce_scatter that may overlap the caller's later work; in and out untouchable until joined.
  template <class T>
  CommTicket reduce_scatter_async(const T* in, T* out, std::size_t n, ReduceOp op) {
    if (impl_) return impl_->reduce_scatter_async(wire(in), wire(out), n, op);
    CommWire<T>::copy(in, out, n);
    return {};
  }
  /// all_gather that may overlap the caller's later work; in and out untouchable until joined.
  template <class T>
  CommTicket all_gather_async(const T* in, T* out, std::size_t n) {
    if (impl_) return impl_->all_gather_async(wire(in), wire(out), n);
    CommWire<T>::copy(in, out, n);
    return {};
  }
  /// Orders the caller's later work after the async collective `t` names (and those before it).
  void join(CommTicket t) {
    if (impl_ && t.seq != 0) impl_->join(t);
  }
  /// Orders the caller's later work after every async collective queued so far.
  void join() {
    if (impl_) impl_->join();
  }
  /// Whether the async collectives can run behind the caller's work (an AsyncCommunicator
  /// of more than one rank); false when they run at once.
  bool asynchronous() const { return size() > 1 && impl_->asynchronous(); }

 private:
  template <class T>
  static auto* wire(T* p) {
    return reinterpret_cast<typename CommWire<T>::type*>(p);
  }
  template <class T>
  static auto* wire(const T* p) {
    return reinterpret_cast<const typename CommWire<T>::type*>(p);
  }

// The typed operations, declared (pure) in Concept and forwarded in Model, per element type;
// the async ones run blocking on a communicator that has no async form, and sendrecv is a
// send and a receive on one that has no paired form.
#define SEQPAR_ANYCOMM_OPS(T, SPEC, BODY, ASYNC, PAIRED)                                   \
  virtual void all_reduce(T* d, std::size_t n, ReduceOp op) SPEC BODY(                     \
      all_reduce(d, n, op)) virtual void                                                   \
  reduce_scatter(const T* i, T* o, std::size_t n, ReduceOp op) SPEC                        \
  BODY(reduce_scatter(i, o, n, op)) virtual void                                           \
  all_gather(const T* i, T* o, std::size_t n) SPEC                                         \
  BODY(all_gather(i, o, n)) virtual void                                                   \
  broadcast(T* d, std::size_t n, int root) SPEC                                            \
  BODY(broadcast(d, n, root)) virtual void                                                 \
  send(const T* d, std::size_t n, int p, int t) SPEC                                       \
  BODY(send(d, n, p, t)) virtual void                                                      \
  recv(T* d, std::size_t n, int p, int t) SPEC                                             \
  BODY(recv(d, n, p, t)) virtual CommTicket                                                \
  all_reduce_async(T* d, std::size_t n, ReduceOp op) SPEC                                  \
  ASYNC(all_reduce_async(d, n, op), all_reduce(d, n, op)) virtual CommTicket               \
  reduce_scatter_async(const T* i, T* o, std::size_t n, ReduceOp op) SPEC                  \
  ASYNC(reduce_scatter_async(i, o, n, op), reduce_scatter(i, o, n, op)) virtual CommTicket \
  all_gather_async(const T* i, T* o, std::size_t n) SPEC                                   \
  ASYNC(all_gather_async(i, o, n), all_gather(i, o, n)) virtual void                       \
  sendrecv(const T* s, std::size_t sn, int st, T* r, std::size_t rn, int rt, int p) SPEC   \
  PAIRED(s, sn, st, r, rn, rt, p)
#define SEQPAR_ANYCOMM_PURE(call) = 0;
#define SEQPAR_ANYCOMM_PURE_ASYNC(call, blocking) = 0;
#define SEQPAR_ANYCOMM_FORWARD(call) \
  { comm.call; }
#define SEQPAR_ANYCOMM_FORWARD_ASYNC(call, blocking) \
  {                                                  \
    if constexpr (AsyncCommunicator<C>) {            \
      return comm.call;                              \
    } else {                                         \
      comm.blocking;                                 \
      return {};                                     \
    }                                                \
  }
#define SEQPAR_ANYCOMM_PURE_PAIRED(s, sn, st, r, rn, rt, p) = 0;
#define SEQPAR_ANYCOMM_FORWARD_PAIRED(s, sn, st, r, rn, rt, p)            \
  {                                                                       \
    if constexpr (requires { comm.sendrecv(s, sn, st, r, rn, rt, p); }) { \
      comm.sendrecv(s, sn, st, r, rn, rt, p);                             \
    } else {                                                              \
      comm.send(s, sn, p, st);                                            \
      comm.recv(r, rn, p, rt);                                            \
    }                                                                     \
  }
#define SEQPAR_ANYCOMM_ALL_TYPES(SPEC, BODY, ASYNC, PAIRED)   \
  SEQPAR_ANYCOMM_OPS(float, SPEC, BODY, ASYNC, PAIRED)        \
  SEQPAR_ANYCOMM_OPS(double, SPEC, BODY, ASYNC, PAIRED)       \
  SEQPAR_ANYCOMM_OPS(std::int64_t, SPEC, BODY, ASYNC, PAIRED) \
  SEQPAR_ANYCOMM_OPS(Bf16Bits, SPEC, BODY, ASYNC, PAIRED)     \
  SEQPAR_ANYCOMM_OPS(F16Bits, SPEC, BODY, ASYNC, PAIRED)

  struct Concept {
    virtual ~Concept() = default;
    SEQPAR_ANYCOMM_ALL_TYPES(, SEQPAR_ANYCOMM_PURE, SEQPAR_ANYCOMM_PURE_ASYNC,
                             SEQPAR_ANYCOMM_PURE_PAIRED)
    virtual void join(CommTicket t) = 0;
    virtual void join() = 0;
    virtual bool asynchronous() const = 0;
    virtual int rank() const = 0;
    virtual int size() const = 0;
    virtual CommStats& stats() = 0;
    virtual void barrier() = 0;
    virtual std::shared_ptr<Concept> split(int color, int key) = 0;
  };

  template <class C>
  struct Model final : Concept {
    explicit Model(C c) : comm(std::move(c)) {}
    SEQPAR_ANYCOMM_ALL_TYPES(override, SEQPAR_ANYCOMM_FORWARD, SEQPAR_ANYCOMM_FORWARD_ASYNC,
                             SEQPAR_ANYCOMM_FORWARD_PAIRED)
    void join(CommTicket t) override {
      if constexpr (AsyncCommunicator<C>) comm.join(t);
    }
    void join() override {
      if constexpr (AsyncCommunicator<C>) comm.join();
    }
    bool asynchronous() const override { return AsyncCommunicator<C>; }
    int rank() const override { return comm.rank(); }
    int size() const override { return comm.size(); }
    CommStats& stats() override { return comm.stats(); }
    void barrier() override { comm.barrier(); }
    std::shared_ptr<Concept> split(int color, int key) override {
      return std::make_shared<Model<C>>(comm.split(color, key));
    }
    C comm;
  };
#undef SEQPAR_ANYCOMM_ALL_TYPES
#undef SEQPAR_ANYCOMM_OPS
#undef SEQPAR_ANYCOMM_PURE
#undef SEQPAR_ANYCOMM_PURE_ASYNC
#undef SEQPAR_ANYCOMM_FORWARD
#undef SEQPAR_ANYCOMM_FORWARD_ASYNC
#undef SEQPAR_ANYCOMM_PURE_PAIRED
#undef SEQPAR_ANYCOMM_FORWARD_PAIRED

  explicit AnyComm(std::shared_ptr<Concept> impl) : impl_(std::move(impl)) {}

  std::shared_ptr<Concept> impl_;
  CommStats solo_stats_;
};

}  // namespace seqpar::inline v0

// The CUDA 16-bit storage types cross an AnyComm as their bits (with the CUDA backend).
#if defined(SEQPAR_CUDA_BACKEND)
#include "seqpar/comm/cuda_wire.hpp"
#endif

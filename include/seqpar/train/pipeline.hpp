#pragma once
// A pipeline stage's micro-batch schedule (GPipe, or 1F1B to hold at most S micro-batches), with
// activations and their gradients sent between stages point to point.

#include <cstdint>
#include <span>
#include <vector>

#include "seqpar/comm/any_comm.hpp"
#include "seqpar/nn/model.hpp"
#include "seqpar/parallel/policies.hpp"

namespace seqpar::inline v0 {

/// The micro-batch schedule of one stage over its stack.
template <ModelStack Stack>
class StageRunner {
 public:
  using T = typename Stack::Scalar;
  using Arena = typename Stack::Arena;
  using Acts = typename Stack::Acts;

  StageRunner(Stack& model, AnyComm pipe) : model_(&model), pipe_(std::move(pipe)) {}

  int stage() const { return pipe_.rank(); }
  int stages() const { return pipe_.size(); }
  bool first() const { return stage() == 0; }
  bool last() const { return stage() == stages() - 1; }

  /// Forward and backward of every micro-batch; gradients accumulate in the model. Each
  /// token's loss gradient starts from `loss_gradient`. Returns the summed token loss on
  /// the last stage, 0 elsewhere.
  template <class Schedule>
  double train(std::span<const BatchView> mbs, T loss_gradient) {
    reset(mbs.size());
    loss_gradient_ = loss_gradient;
    if constexpr (std::is_same_v<Schedule, GPipe>)
      gpipe(mbs);
    else
      one_f_one_b(mbs);
    return loss_;
  }

  /// Forward only; returns the summed token loss on the last stage, 0 elsewhere.
  double evaluate(std::span<const BatchView> mbs) {
    reset(mbs.size());
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(mbs.size()); ++i) {
      receive_input(mbs, i);
      forward(mbs, i, false);
      send_output(mbs, i);
      if (last()) loss_ += model_->loss(records_[static_cast<std::size_t>(i)]).sum;
      release(i);
    }
    return loss_;
  }

  /// Forward of one batch through every stage; on the last stage `a` holds ln_f's output.
  Acts& forward_only(const BatchView& b) {
    const std::span<const BatchView> one(&b, 1);
    reset(1);
    receive_input(one, 0);
    forward(one, 0, false);
    send_output(one, 0);
    return records_[0];
  }

 private:
  // Micro-batch i's activation messages: tag 2i forward, 2i + 1 backward.
  static int fwd_tag(std::int64_t i) { return static_cast<int>(2 * i); }
  static int bwd_tag(std::int64_t i) { return static_cast<int>(2 * i + 1); }
  static std::size_t hidden_elems(std::span<const BatchView> mbs, std::int64_t i) {
    return static_cast<std::size_t>(mbs[static_cast<std::size_t>(i)].tokens() * Stack::H);
  }
  T* input(std::int64_t i) { return records_[static_cast<std::size_t>(i)].x[0].data(); }
  T* output(std::int64_t i) { return records_[static_cast<std::size_t>(i)].x.back().data(); }

  // Record i made ready for micro-batch i (its input buffer first: a stage receives there).
  void prepare(std::span<const BatchView> mbs, std::int64_t i) {
    model_->prepare(mbs[static_cast<std::size_t>(i)], records_[static_cast<std::size_t>(i)]);
  }
  void receive_input(std::span<const BatchView> mbs, std::int64_t i) {
    prepare(mbs, i);
    if (!first()) pipe_.recv(input(i), hidden_elems(mbs, i), stage() - 1, fwd_tag(i));
  }
  void send_output(std::span<const BatchView> mbs, std::int64_t i) {
    if (!last()) pipe_.send(output(i), hidden_elems(mbs, i), stage() + 1, fwd_tag(i));
  }
  // GPipe: every forward, then every backward (all micro-batches in flight).
  void gpipe(std::span<const BatchView> mbs) {
    const auto m = static_cast<std::int64_t>(mbs.size());
    for (std::int64_t i = 0; i < m; ++i) {
      receive_input(mbs, i);
      forward(mbs, i, true);
      head_backward(mbs, i);
      send_output(mbs, i);
    }
    for (std::int64_t i = 0; i < m; ++i) {
      receive_grad(mbs, i);
      backward(i);
      send_grad(mbs, i);
      release(i);
    }
  }

  // 1F1B: S - stage - 1 forwards, then one forward and one backward in turn, then the
  // backwards left. In the steady state each pair of messages that cross goes as one
  // sendrecv (output i forward with gradient k back, gradient k back with input i + 1).
  void one_f_one_b(std::span<const BatchView> mbs) {
    const auto m = static_cast<std::int64_t>(mbs.size());
    const std::int64_t warm = std::min<std::int64_t>(stages() - stage() - 1, m);
    for (std::int64_t i = 0; i < warm; ++i) {
      receive_input(mbs, i);
      forward(mbs, i, true);
      send_output(mbs, i);
    }
    if (warm < m) receive_input(mbs, warm);
    for (std::int64_t i = warm, k = 0; i < m; ++i, ++k) {  // forward i, backward k
      forward(mbs, i, true);
      head_backward(mbs, i);
      if (!last()) {
        alloc_grad(mbs, k);
        pipe_.sendrecv(output(i), hidden_elems(mbs, i), fwd_tag(i), grads_[k].data(),
                       hidden_elems(mbs, k), bwd_tag(k), stage() + 1);
      }
      backward(k);
      if (i + 1 == m) {
        send_grad(mbs, k);
      } else {
        prepare(mbs, i + 1);
        if (!first())
          pipe_.sendrecv(grads_[k].data(), hidden_elems(mbs, k), bwd_tag(k), input(i + 1),
                         hidden_elems(mbs, i + 1), fwd_tag(i + 1), stage() - 1);
      }
      release(k);
    }
    for (std::int64_t k = m - warm; k < m; ++k) {
      receive_grad(mbs, k);
      backward(k);
      send_grad(mbs, k);
      release(k);
    }
  }

  // The stage's layers on micro-batch i (`for_backward`: its record keeps what a backward needs).
  void forward(std::span<const BatchView> mbs, std::int64_t i, bool for_backward) {
    model_->forward(mbs[static_cast<std::size_t>(i)], records_[static_cast<std::size_t>(i)],
                    for_backward);
  }
  // The last stage's backward starts at the loss: micro-batch i's loss, and its gradient
  // through the head into grads_[i] (d stage output).
  void head_backward(std::span<const BatchView> mbs, std::int64_t i) {
    if (!last()) return;
    alloc_grad(mbs, i);
    loss_ += model_
                 ->head_backward(records_[static_cast<std::size_t>(i)], loss_gradient_,
                                 grads_[static_cast<std::size_t>(i)].data())
                 .sum;
  }
  void alloc_grad(std::span<const BatchView> mbs, std::int64_t i) {
    grads_[static_cast<std::size_t>(i)] =
        Buffer<T, Arena>(model_->arena(), hidden_elems(mbs, i), Memory::activations);
  }
  void receive_grad(std::span<const BatchView> mbs, std::int64_t i) {
    if (last()) return;  // made by the loss
    alloc_grad(mbs, i);
    pipe_.recv(grads_[static_cast<std::size_t>(i)].data(), hidden_elems(mbs, i), stage() + 1,
               bwd_tag(i));
  }
  void backward(std::int64_t i) {
    model_->backward(records_[static_cast<std::size_t>(i)],
                     grads_[static_cast<std::size_t>(i)].data());
  }
  void send_grad(std::span<const BatchView> mbs, std::int64_t i) {
    if (!first())
      pipe_.send(grads_[static_cast<std::size_t>(i)].data(), hidden_elems(mbs, i), stage() - 1,
                 bwd_tag(i));
  }
  // A record and a gradient slot per micro-batch, none allocated yet.
  void reset(std::size_t micro_batches) {
    records_.clear();
    records_.resize(micro_batches);
    grads_.clear();
    grads_.resize(micro_batches);
    loss_ = 0;
  }
  // Micro-batch i is done: its record and gradient are freed.
  void release(std::int64_t i) {
    records_[static_cast<std::size_t>(i)] = Acts{};
    grads_[static_cast<std::size_t>(i)].reset();
  }

  Stack* model_;
  AnyComm pipe_;
  std::vector<Acts> records_;
  std::vector<Buffer<T, Arena>> grads_;
  double loss_ = 0;
  T loss_gradient_{};
};

}  // namespace seqpar::inline v0

#pragma once
// The micro-batch schedule of one pipeline stage. A stage receives its input from the
// previous stage, runs its layers, and sends its output on; the backward runs the other
// way. GPipe runs every forward, then every backward (all micro-batches in flight);
// 1F1B runs S - stage - 1 forwards, then alternates one forward and one backward, so
// the first stage holds at most S micro-batches. With one stage both are the plain
// forward-backward loop of gradient accumulation.

#include <cstdint>
#include <span>
#include <vector>

#include "seqpar/nn/model.hpp"
#include "seqpar/parallel/any_comm.hpp"
#include "seqpar/parallel/policies.hpp"

namespace seqpar::inline v0 {

template <class Stack>
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

  /// Forward and backward of every micro-batch; gradients accumulate in the model.
  /// Returns the summed token loss on the last stage, 0 elsewhere.
  template <class Schedule>
  double train(std::span<const BatchView> mbs, T grad_scale) {
    const auto m = static_cast<std::int64_t>(mbs.size());
    records_.clear();
    records_.resize(mbs.size());
    grads_.clear();
    grads_.resize(mbs.size());
    loss_ = 0;
    scale_ = grad_scale;
    if constexpr (std::is_same_v<Schedule, GPipe>) {
      for (std::int64_t i = 0; i < m; ++i) forward(mbs, i, true);
      for (std::int64_t i = 0; i < m; ++i) backward(mbs, i);
    } else {
      const std::int64_t warm = std::min<std::int64_t>(stages() - stage() - 1, m);
      for (std::int64_t i = 0; i < warm; ++i) forward(mbs, i, true);
      for (std::int64_t i = warm; i < m; ++i) {
        forward(mbs, i, true);
        backward(mbs, i - warm);
      }
      for (std::int64_t i = m - warm; i < m; ++i) backward(mbs, i);
    }
    return loss_;
  }

  /// Forward only; returns the summed token loss on the last stage, 0 elsewhere.
  double evaluate(std::span<const BatchView> mbs) {
    records_.resize(1);
    loss_ = 0;
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(mbs.size()); ++i) {
      forward(mbs, i, false, 0);
      if (last()) loss_ += model_->loss(records_[0], T(0), nullptr).sum;
    }
    return loss_;
  }

  /// Forward of one batch through every stage; on the last stage `a` holds ln_f's output.
  Acts& forward_only(const BatchView& b) {
    records_.resize(1);
    forward(std::span<const BatchView>(&b, 1), 0, false, 0);
    return records_[0];
  }

 private:
  std::size_t hidden_elems(const BatchView& b) const { return static_cast<std::size_t>(b.tokens() * Stack::H); }

  void forward(std::span<const BatchView> mbs, std::int64_t i, bool with_loss, std::int64_t slot = -1) {
    const BatchView& b = mbs[static_cast<std::size_t>(i)];
    Acts& a = records_[static_cast<std::size_t>(slot < 0 ? i : slot)];
    model_->prepare(b, a);
    if (!first()) pipe_.recv(a.x[0].data(), hidden_elems(b), stage() - 1, static_cast<int>(2 * i));
    model_->forward(b, a);
    if (!last()) {
      pipe_.send(a.x.back().data(), hidden_elems(b), stage() + 1, static_cast<int>(2 * i));
    } else if (with_loss) {
      auto& d = grads_[static_cast<std::size_t>(i)];
      d = Buffer<T, Arena>(model_->arena(), hidden_elems(b), Memory::activations);
      loss_ += model_->loss(a, scale_, d.data()).sum;  // the head's backward runs here
    }
  }

  void backward(std::span<const BatchView> mbs, std::int64_t i) {
    const BatchView& b = mbs[static_cast<std::size_t>(i)];
    auto& d = grads_[static_cast<std::size_t>(i)];
    if (!last()) {
      d = Buffer<T, Arena>(model_->arena(), hidden_elems(b), Memory::activations);
      pipe_.recv(d.data(), hidden_elems(b), stage() + 1, static_cast<int>(2 * i + 1));
    }
    model_->backward(records_[static_cast<std::size_t>(i)], d.data());
    if (!first()) pipe_.send(d.data(), hidden_elems(b), stage() - 1, static_cast<int>(2 * i + 1));
    records_[static_cast<std::size_t>(i)] = Acts{};  // this micro-batch is done: free its record
    d.reset();
  }

  Stack* model_;
  AnyComm pipe_;
  std::vector<Acts> records_;
  std::vector<Buffer<T, Arena>> grads_;
  double loss_ = 0;
  T scale_ = 0;
};

}  // namespace seqpar::inline v0

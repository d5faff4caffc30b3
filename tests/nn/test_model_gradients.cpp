// Finite-difference check of the whole model's hand-written backward, in double:
// every parameter tensor, left padding, ignored labels, a non-power-of-two head count.
#include <doctest/doctest.h>

#include <vector>

#include "../support/gradcheck.hpp"
#include "seqpar/backend/cpu/ops.hpp"
#include "seqpar/nn/model.hpp"

using namespace seqpar;

namespace {
using GradModel = Bloom<BloomConfig{
    .vocab_size = 37, .hidden = 12, .layers = 2, .heads = 3, .layer_norm_eps = 1e-5}>;

Batch tiny_batch() {
  Batch b(2, 6);
  for (std::size_t i = 0; i < b.input_ids.size(); ++i) {
    b.input_ids[i] = static_cast<std::int32_t>((i * 7 + 3) % 37);
    b.labels[i] = b.input_ids[i];
  }
  // Row 1 is left-padded by two tokens; one more label is ignored.
  for (int t = 0; t < 2; ++t) {
    b.attention_mask[6 + t] = 0;
    b.labels[6 + t] = ignore_index;
    b.input_ids[6 + t] = 3;
  }
  b.labels[3] = ignore_index;
  // Padding queries (no valid key) attend uniformly through a saturated mask, where the
  // derivative is a convention (tests/train's golden files check it): keep them out of the
  // loss here by ignoring the target that the last padding position predicts.
  b.labels[8] = ignore_index;
  return b;
}
}  // namespace

TEST_CASE("model backward matches finite differences for every parameter tensor (double)") {
  Arena arena;
  BloomStack<GradModel, Cpu, double> model(arena);
  model.initialize(7, 0.3);  // a large std so that nothing is near-linear
  // Perturb layernorms and biases too, so their gradients are not trivially symmetric.
  for (std::size_t u = 0; u < model.units().size(); ++u)
    for (const auto& p : model.units()[u].params)
      if (p.vector)
        for (std::int64_t i = 0; i < p.numel(); ++i)
          model.params(u)[p.offset + i] +=
              0.1 * CounterRng(99, p.name).normal(static_cast<std::uint64_t>(i));

  const Batch batch = tiny_batch();
  const double count = static_cast<double>(batch.view().target_count());
  Activations<double, Arena> acts;
  std::vector<double> d(static_cast<std::size_t>(batch.view().tokens() * GradModel::hidden));
  const auto loss = [&] {
    model.forward(batch, acts);
    return model.loss(acts).sum / count;
  };

  model.zero_grads();
  model.forward(batch, acts);
  model.head_backward(acts, 1.0 / count, d.data());
  model.backward(acts, d.data());

  int checked = 0;
  for (std::size_t u = 0; u < model.units().size(); ++u) {
    for (const auto& p : model.units()[u].params) {
      CAPTURE(p.name);
      // A few elements of each tensor, spread over it; for the table, rows that are used.
      for (std::int64_t k = 0; k < 4; ++k) {
        std::int64_t i = (k * 7919 + 13) % p.numel();
        if (p.name == "word_embeddings.weight")
          i = (batch.input_ids[static_cast<std::size_t>(k * 3)]) * GradModel::hidden + k;
        double* x = model.params(u) + p.offset;
        const double num = test::numeric_grad(x, i, loss);
        const double ana = model.grads(u)[p.offset + i];
        CAPTURE(i);
        CHECK(test::rel_err(ana, num, 1e-6) < 1e-5);
        ++checked;
      }
    }
  }
  CHECK(checked == 4 * (3 + 12 * 2 + 2));
}

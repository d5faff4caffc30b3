#pragma once
// The loss of held-out examples under a trainer's current weights (transformers' eval_loss):
// what an evaluation reports beside the task's scores, and what a best model may be chosen by.

#include <cstdint>
#include <numeric>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/data/batching.hpp"

namespace seqpar::inline v0 {

/// Collective (every rank of the trainer, the same examples): the token-mean loss of
/// `examples`, in order, in batches of `rows` (the trainer's step batch); the last batch is
/// filled with rows whose labels are ignored, so every example counts once.
template <class T>
double evaluation_loss(T& trainer, const ExampleSet& examples, std::int64_t rows,
                       std::int32_t pad_id) {
  SEQPAR_CHECK(examples.size() > 0, "evaluation_loss: no examples");
  SEQPAR_CHECK(rows > 0, "evaluation_loss: batches of ", rows, " rows");
  double loss_sum = 0;
  std::int64_t targets = 0;
  const auto n = static_cast<std::int64_t>(examples.size());
  for (std::int64_t first = 0; first < n; first += rows) {
    const std::int64_t real = std::min(rows, n - first);
    std::vector<std::int32_t> indices(static_cast<std::size_t>(rows));
    std::iota(indices.begin(), indices.begin() + real, static_cast<std::int32_t>(first));
    std::fill(indices.begin() + real, indices.end(), static_cast<std::int32_t>(first));
    Batch b = collate(examples, indices, pad_id);
    std::fill(b.labels.begin() + real * b.seq, b.labels.end(), ignore_index);
    const std::int64_t count = b.view().target_count();
    if (count == 0) continue;
    loss_sum += trainer.evaluate(b.view()) * static_cast<double>(count);
    targets += count;
  }
  SEQPAR_CHECK(targets > 0, "evaluation_loss: the examples hold no answer tokens");
  return loss_sum / static_cast<double>(targets);
}

}  // namespace seqpar::inline v0

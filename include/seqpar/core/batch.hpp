#pragma once
// Token batches: ids, labels (-100 = ignored) and attention mask, row-major [rows, seq].

#include <cstdint>
#include <span>
#include <vector>

#include "seqpar/core/error.hpp"

namespace seqpar::inline v0 {

inline constexpr std::int32_t ignore_index = -100;

/// A non-owning view of `rows` sequences of `seq` tokens. Labels follow Hugging Face:
/// labels[t] is the token expected at t (the shift happens inside the loss); positions
/// with attention mask 0 are padding (left padding is the convention for prompts).
struct BatchView {
  std::int64_t rows = 0, seq = 0;
  std::span<const std::int32_t> input_ids, labels, attention_mask;

  std::int64_t tokens() const { return rows * seq; }
  /// Rows [first, first + count) of this batch.
  BatchView slice(std::int64_t first, std::int64_t count) const {
    const auto off = static_cast<std::size_t>(first * seq),
               n = static_cast<std::size_t>(count * seq);
    return {count, seq, input_ids.subspan(off, n), labels.subspan(off, n),
            attention_mask.subspan(off, n)};
  }
  /// Number of (shifted) targets that are not ignored: the loss denominator.
  std::int64_t target_count() const {
    std::int64_t c = 0;
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t t = 1; t < seq; ++t)
        c += labels[static_cast<std::size_t>(r * seq + t)] != ignore_index;
    return c;
  }
  /// Checks sizes and ranges; names what is wrong.
  void validate(std::int64_t vocab) const {
    const auto n = static_cast<std::size_t>(rows * seq);
    SEQPAR_CHECK(rows > 0 && seq > 0, "batch: rows and seq must be positive, got ", rows, " x ",
                 seq);
    SEQPAR_CHECK(input_ids.size() == n && labels.size() == n && attention_mask.size() == n,
                 "batch: input_ids, labels and attention_mask must each hold rows*seq = ", n,
                 " values (got ", input_ids.size(), ", ", labels.size(), ", ",
                 attention_mask.size(), ")");
    for (std::size_t i = 0; i < n; ++i) {
      SEQPAR_CHECK(input_ids[i] >= 0 && input_ids[i] < vocab, "batch: input_ids[", i / seq, "][",
                   i % seq, "] = ", input_ids[i], " is outside the vocabulary [0, ", vocab, ")");
      SEQPAR_CHECK(labels[i] == ignore_index || (labels[i] >= 0 && labels[i] < vocab),
                   "batch: labels[", i / seq, "][", i % seq, "] = ", labels[i],
                   " is neither -100 nor a token id below ", vocab);
      SEQPAR_CHECK(attention_mask[i] == 0 || attention_mask[i] == 1, "batch: attention_mask[",
                   i / seq, "][", i % seq, "] = ", attention_mask[i], "; expected 0 or 1");
    }
  }
};

/// An owning batch.
struct Batch {
  std::int64_t rows = 0, seq = 0;
  std::vector<std::int32_t> input_ids, labels, attention_mask;

  Batch() = default;
  Batch(std::int64_t r, std::int64_t s)
      : rows(r),
        seq(s),
        input_ids(static_cast<std::size_t>(r * s)),
        labels(static_cast<std::size_t>(r * s), ignore_index),
        attention_mask(static_cast<std::size_t>(r * s), 1) {}
  BatchView view() const { return {rows, seq, input_ids, labels, attention_mask}; }
  operator BatchView() const { return view(); }
};

}  // namespace seqpar::inline v0

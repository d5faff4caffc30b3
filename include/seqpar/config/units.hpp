#pragma once
// The parameter table of a BLOOM model: every tensor's Hugging Face name, full shape,
// tensor-split rule, weight-decay flag and place in its unit's flat buffer. Loading,
// saving, initialisation, sharding and the optimizer all read this one table.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "seqpar/config/bloom.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::inline v0 {

/// How a tensor is divided over a tensor-parallel group.
enum class Split : std::uint8_t {
  none,     // replicated (layernorms, row-parallel biases)
  rows,     // dim 0 split: column-parallel weights and their biases, the vocab rows
  columns,  // dim 1 split: row-parallel weights
};

/// One parameter tensor as a rank holds it.
struct ParamSpec {
  std::string name;                 // Hugging Face name without the "transformer." prefix
  std::int64_t rows = 0, cols = 1;  // full shape; cols == 1 and vector == true for 1-D tensors
  std::int64_t real_rows =
      0;  // rows that hold values: the vocabulary of the padded embedding table, else rows
  bool vector = false;
  Split split = Split::none;
  bool decay = false;  // weight decay applies (matrices only, as the HF Trainer does)
  std::int64_t local_rows = 0, local_cols = 1;
  std::int64_t row0 = 0, col0 = 0;  // where the local block starts in the full tensor
  std::int64_t offset = 0;          // in the unit's flat buffer
  std::int64_t numel() const { return local_rows * local_cols; }
  /// Rows of the local block that hold values (the vocabulary's real rows of the table's
  /// block; every row of any other tensor's): the rest is padding, zero, never saved.
  std::int64_t local_real_rows() const {
    return std::clamp<std::int64_t>(real_rows - row0, 0, local_rows);
  }
  /// The full tensor's shape in a weights file: [real_rows] or [real_rows, cols].
  std::vector<std::int64_t> file_shape() const {
    return vector ? std::vector<std::int64_t>{real_rows}
                  : std::vector<std::int64_t>{real_rows, cols};
  }
};

/// The vocabulary rows a tensor rank holds of the tied table: [row0, row0 + rows) of the
/// padded table, of which the first `real` rows are real tokens (the rest is padding that
/// never enters the softmax).
struct VocabShard {
  std::int64_t row0 = 0, rows = 0, real = 0;
};
/// The vocabulary shard of the table's spec (unit 0's first tensor).
inline VocabShard vocab_shard(const ParamSpec& table) {
  return {table.row0, table.local_rows, table.local_real_rows()};
}

/// The tensors of one unit (the embedding, one block, the final layernorm), stored in one
/// flat buffer so that sharding and collectives act on one contiguous range.
struct UnitTable {
  std::vector<ParamSpec> params;
  std::int64_t numel = 0;

  const ParamSpec& find(const std::string& name) const {
    for (const auto& p : params)
      if (p.name == name) return p;
    detail::fail("no parameter named '", name, "'");
  }
};

/// The vocabulary rounded up to a multiple of 128 * tp; padded rows are zero and never
/// take part in the softmax.
constexpr std::int64_t padded_vocab(std::int64_t vocab, int tp) {
  const std::int64_t m = 128 * static_cast<std::int64_t>(tp);
  return (vocab + m - 1) / m * m;
}

/// The LM head's logits budget by default (TrainOptions::logits_bytes 0): Ops<Cpu>'s and
/// Ops<Cuda>'s logits_chunk_bytes, and seqpar-plan's. On the CPU a micro-batch's logits up
/// to 1 GiB are held whole (SeqGPT-560M: 2048 tokens in bf16, 1024 in fp32), which spares
/// the head's backward a second logits GEMM (docs/cpu.md); on the GPU chunks wide enough for
/// GEMMs that fill it (16 chunks of SeqGPT-560M's vocabulary at 8192 bf16 tokens).
inline constexpr std::int64_t cpu_logits_budget = std::int64_t{1} << 30;
inline constexpr std::int64_t cuda_logits_budget = std::int64_t{256} << 20;

/// The LM head's chunk width (nn/lm_head.hpp; the planner sizes its scratch with it): a
/// multiple of 128 vocabulary columns, at most `budget_bytes` of logits for n tokens of
/// `elem` bytes, and no wider than the `rows` real rows a rank holds.
constexpr std::int64_t vocab_chunk(std::int64_t n, std::int64_t rows, std::size_t elem,
                                   std::int64_t budget_bytes) {
  std::int64_t c = budget_bytes / std::max<std::int64_t>(1, n * static_cast<std::int64_t>(elem));
  c = std::max<std::int64_t>(128, c / 128 * 128);
  return std::min(c, std::max<std::int64_t>(rows, 1));
}

namespace detail {
inline void add_param(UnitTable& u, std::string name, std::int64_t rows, std::int64_t cols,
                      bool vector, Split split, bool decay, int tp, int tp_rank) {
  ParamSpec p{.name = std::move(name),
              .rows = rows,
              .cols = cols,
              .real_rows = rows,
              .vector = vector,
              .split = split,
              .decay = decay};
  p.local_rows = split == Split::rows ? rows / tp : rows;
  p.local_cols = split == Split::columns ? cols / tp : cols;
  p.row0 = split == Split::rows ? p.local_rows * tp_rank : 0;
  p.col0 = split == Split::columns ? p.local_cols * tp_rank : 0;
  p.offset = u.numel;
  u.numel += p.numel();
  u.params.push_back(std::move(p));
}
}  // namespace detail

/// Unit tables of a model of shape c for tensor rank `tp_rank` of `tp`: index 0 the
/// embedding, 1..layers the blocks, layers + 1 the final layernorm. The tied LM head has no
/// entry.
inline std::vector<UnitTable> bloom_units(const BloomConfig& c, int tp = 1, int tp_rank = 0) {
  const std::int64_t H = c.hidden, F = 4 * c.hidden;
  std::vector<UnitTable> units(static_cast<std::size_t>(c.layers + 2));
  using detail::add_param;
  add_param(units[0], "word_embeddings.weight", padded_vocab(c.vocab_size, tp), H, false,
            Split::rows, true, tp, tp_rank);
  units[0].params[0].real_rows = c.vocab_size;  // the padding rows stay 0 and are never saved
  add_param(units[0], "word_embeddings_layernorm.weight", H, 1, true, Split::none, false, tp,
            tp_rank);
  add_param(units[0], "word_embeddings_layernorm.bias", H, 1, true, Split::none, false, tp,
            tp_rank);
  for (std::int64_t l = 0; l < c.layers; ++l) {
    auto& u = units[static_cast<std::size_t>(l + 1)];
    const std::string h = "h." + std::to_string(l) + ".";
    add_param(u, h + "input_layernorm.weight", H, 1, true, Split::none, false, tp, tp_rank);
    add_param(u, h + "input_layernorm.bias", H, 1, true, Split::none, false, tp, tp_rank);
    add_param(u, h + "self_attention.query_key_value.weight", 3 * H, H, false, Split::rows, true,
              tp, tp_rank);
    add_param(u, h + "self_attention.query_key_value.bias", 3 * H, 1, true, Split::rows, false, tp,
              tp_rank);
    add_param(u, h + "self_attention.dense.weight", H, H, false, Split::columns, true, tp, tp_rank);
    add_param(u, h + "self_attention.dense.bias", H, 1, true, Split::none, false, tp, tp_rank);
    add_param(u, h + "post_attention_layernorm.weight", H, 1, true, Split::none, false, tp,
              tp_rank);
    add_param(u, h + "post_attention_layernorm.bias", H, 1, true, Split::none, false, tp, tp_rank);
    add_param(u, h + "mlp.dense_h_to_4h.weight", F, H, false, Split::rows, true, tp, tp_rank);
    add_param(u, h + "mlp.dense_h_to_4h.bias", F, 1, true, Split::rows, false, tp, tp_rank);
    add_param(u, h + "mlp.dense_4h_to_h.weight", H, F, false, Split::columns, true, tp, tp_rank);
    add_param(u, h + "mlp.dense_4h_to_h.bias", H, 1, true, Split::none, false, tp, tp_rank);
  }
  add_param(units.back(), "ln_f.weight", H, 1, true, Split::none, false, tp, tp_rank);
  add_param(units.back(), "ln_f.bias", H, 1, true, Split::none, false, tp, tp_rank);
  return units;
}
/// The unit tables of model M.
template <BloomModel M>
std::vector<UnitTable> bloom_units(int tp = 1, int tp_rank = 0) {
  static_assert(M::ffn_hidden == 4 * M::hidden);
  return bloom_units(M::config, tp, tp_rank);
}

}  // namespace seqpar::inline v0

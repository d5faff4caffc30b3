#pragma once
// Batches of tokenized examples: left padding (attention mask 0, label -100, the pad id),
// length grouping, and an order that depends only on (seed, epoch), so every plan and every
// restart sees the same global batches. DataPosition (epoch, batch) goes into a
// checkpoint's metadata and brings a resumed run back to the same place.

#include <algorithm>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "seqpar/core/batch.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/core/rng.hpp"
#include "seqpar/data/examples.hpp"

namespace seqpar::inline v0 {

/// Rows of a batch, left-padded to the longest: prompt positions get label -100, answer
/// and eos positions their own token (the loss shifts them inside). With
/// `prompts_only`, each row is just its example's prompt (for generation).
inline Batch collate(const ExampleSet& examples, std::span<const std::int32_t> indices,
                     std::int32_t pad_id, bool prompts_only = false) {
  SEQPAR_CHECK(!indices.empty(), "collate: no examples given");
  SEQPAR_CHECK(pad_id >= 0, "collate: pad id ", pad_id,
               " is negative; the tokenizer needs a <pad> token");
  std::int64_t seq = 0;
  for (auto i : indices) {
    SEQPAR_CHECK(i >= 0 && static_cast<std::size_t>(i) < examples.size(), "collate: example ", i,
                 " is outside the set of ", examples.size());
    const auto n =
        prompts_only
            ? static_cast<std::int64_t>(examples.prompt_length(static_cast<std::size_t>(i)))
            : examples.length(static_cast<std::size_t>(i));
    seq = std::max(seq, n);
  }
  Batch b(static_cast<std::int64_t>(indices.size()), seq);
  for (std::size_t r = 0; r < indices.size(); ++r) {
    const auto e = static_cast<std::size_t>(indices[r]);
    const auto tokens = prompts_only ? examples.prompt(e) : examples.tokens(e);
    const auto prompt = examples.prompt_length(e);
    const auto pad = static_cast<std::size_t>(seq) - tokens.size();
    const std::size_t row = r * static_cast<std::size_t>(seq);
    for (std::size_t t = 0; t < static_cast<std::size_t>(seq); ++t) {
      const std::size_t i = row + t;
      if (t < pad) {
        b.input_ids[i] = pad_id;
        b.attention_mask[i] = 0;
        b.labels[i] = ignore_index;
        continue;
      }
      const std::size_t k = t - pad;
      b.input_ids[i] = tokens[k];
      b.attention_mask[i] = 1;
      b.labels[i] = k < prompt ? ignore_index : tokens[k];
    }
  }
  return b;
}

/// Token rows left-padded into one batch (attention mask 0 and label -100 on padding).
inline Batch left_pad(std::span<const std::vector<std::int32_t>> rows, std::int32_t pad_id) {
  SEQPAR_CHECK(!rows.empty(), "left_pad: no rows given");
  std::size_t seq = 0;
  for (const auto& r : rows) seq = std::max(seq, r.size());
  SEQPAR_CHECK(seq > 0, "left_pad: every row is empty");
  Batch b(static_cast<std::int64_t>(rows.size()), static_cast<std::int64_t>(seq));
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const std::size_t pad = seq - rows[r].size();
    for (std::size_t t = 0; t < seq; ++t) {
      const std::size_t i = r * seq + t;
      b.input_ids[i] = t < pad ? pad_id : rows[r][t - pad];
      b.attention_mask[i] = t < pad ? 0 : 1;
    }
  }
  return b;
}

/// How an epoch is cut into batches.
struct BatchingOptions {
  std::int64_t rows = 16;  // rows of a global batch
  std::uint64_t seed = 42;
  std::int64_t window = 32;  // batches per length-sorting window: larger pads less, mixes less
};

namespace detail {
// Fisher-Yates with draws keyed by (seed, stream name): the same on every platform.
template <class T>
void keyed_shuffle(std::vector<T>& v, std::uint64_t seed, const std::string& stream) {
  const CounterRng rng(seed, stream);
  for (std::size_t i = v.size(); i > 1; --i) {
    const auto j = static_cast<std::size_t>(rng.bits(i) % i);
    std::swap(v[i - 1], v[j]);
  }
}
}  // namespace detail

/// The batches of epoch `epoch` as example indices, a pure function of (lengths, options,
/// epoch): shuffle, sort windows of `window` batches by length (longest first), cut, and
/// shuffle the batches. Every batch has exactly options.rows examples; the n % rows left
/// over after the shuffle sit this epoch out.
inline std::vector<std::vector<std::int32_t>> epoch_batches(std::span<const std::int64_t> lengths,
                                                            const BatchingOptions& o,
                                                            std::int64_t epoch) {
  SEQPAR_CHECK(o.rows > 0 && o.window > 0, "epoch_batches: rows and window must be positive (got ",
               o.rows, ", ", o.window, ")");
  const auto rows = static_cast<std::size_t>(o.rows);
  SEQPAR_CHECK(lengths.size() >= rows, "epoch_batches: ", lengths.size(),
               " examples cannot fill one batch of ", rows, " rows");
  std::vector<std::int32_t> order(lengths.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int32_t>(i);
  const std::string e = std::to_string(epoch);
  detail::keyed_shuffle(order, o.seed, "seqpar.data.order." + e);
  order.resize(order.size() - order.size() % rows);
  const std::size_t w = rows * static_cast<std::size_t>(o.window);
  for (std::size_t b = 0; b < order.size(); b += w) {
    const auto first = order.begin() + static_cast<std::ptrdiff_t>(b);
    const auto last = order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), b + w));
    std::stable_sort(first, last, [&](std::int32_t x, std::int32_t y) {
      return lengths[static_cast<std::size_t>(x)] > lengths[static_cast<std::size_t>(y)];
    });
  }
  std::vector<std::vector<std::int32_t>> batches;
  for (std::size_t b = 0; b < order.size(); b += rows)
    batches.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(b),
                         order.begin() + static_cast<std::ptrdiff_t>(b + rows));
  detail::keyed_shuffle(batches, o.seed, "seqpar.data.batches." + e);
  return batches;
}

/// Where a run is in its data: the next batch to train on.
struct DataPosition {
  std::int64_t epoch = 0, batch = 0;
  bool operator==(const DataPosition&) const = default;

  /// Adds "data.epoch", "data.batch", "data.seed" and "data.rows" to checkpoint metadata.
  void to_metadata(std::map<std::string, std::string>& m, const BatchingOptions& o) const {
    m["data.epoch"] = std::to_string(epoch);
    m["data.batch"] = std::to_string(batch);
    m["data.seed"] = std::to_string(o.seed);
    m["data.rows"] = std::to_string(o.rows);
  }

  /// Reads a position back; throws naming `where` when it is missing or was written for
  /// another seed or batch size (the order would differ).
  static DataPosition from_metadata(const std::map<std::string, std::string>& m,
                                    const BatchingOptions& o, const std::string& where) {
    const auto get = [&](const char* k) -> std::int64_t {
      const auto it = m.find(k);
      SEQPAR_CHECK(it != m.end(), where, ": metadata has no '", k, "'; expected a data position");
      return detail::parse_field<std::int64_t>(it->second, where, std::string("metadata ") + k);
    };
    const DataPosition p{get("data.epoch"), get("data.batch")};
    const auto seed = m.find("data.seed");
    SEQPAR_CHECK(seed != m.end(), where, ": metadata has no 'data.seed'; expected a data position");
    SEQPAR_CHECK(seed->second == std::to_string(o.seed), where, ": the data order was seeded with ",
                 seed->second, "; this run uses seed ", o.seed);
    SEQPAR_CHECK(get("data.rows") == o.rows, where, ": batches had ", get("data.rows"),
                 " rows; this run uses ", o.rows);
    SEQPAR_CHECK(p.epoch >= 0 && p.batch >= 0, where, ": negative data position (", p.epoch, ", ",
                 p.batch, ")");
    return p;
  }
};

/// Global batches in order, epoch after epoch, from any position.
class BatchStream {
 public:
  BatchStream(ExampleSet examples, BatchingOptions o, std::int32_t pad_id)
      : examples_(std::move(examples)), lengths_(examples_.lengths()), o_(o), pad_(pad_id) {
    SEQPAR_CHECK(examples_.size() >= static_cast<std::size_t>(o.rows),
                 "BatchStream: ", examples_.size(), " examples cannot fill one batch of ", o.rows,
                 " rows");
  }

  std::int64_t batches_per_epoch() const {
    return static_cast<std::int64_t>(examples_.size()) / o_.rows;
  }
  const DataPosition& position() const { return pos_; }
  const BatchingOptions& options() const { return o_; }

  void seek(DataPosition p) {
    SEQPAR_CHECK(p.epoch >= 0 && p.batch >= 0 && p.batch < batches_per_epoch(),
                 "BatchStream: position (epoch ", p.epoch, ", batch ", p.batch, ") is outside the ",
                 batches_per_epoch(), " batches of an epoch");
    pos_ = p;
  }

  /// Example indices of the batch at the current position.
  const std::vector<std::int32_t>& peek() {
    if (order_epoch_ != pos_.epoch) {
      order_ = epoch_batches(lengths_, o_, pos_.epoch);
      order_epoch_ = pos_.epoch;
    }
    return order_[static_cast<std::size_t>(pos_.batch)];
  }

  /// The batch at the current position; then moves on (to the next epoch after the last).
  Batch next() {
    Batch b = collate(examples_, peek(), pad_);
    if (++pos_.batch == batches_per_epoch()) pos_ = {pos_.epoch + 1, 0};
    return b;
  }

 private:
  ExampleSet examples_;
  std::vector<std::int64_t> lengths_;
  BatchingOptions o_;
  std::int32_t pad_;
  DataPosition pos_;
  std::vector<std::vector<std::int32_t>> order_;
  std::int64_t order_epoch_ = -1;
};

}  // namespace seqpar::inline v0

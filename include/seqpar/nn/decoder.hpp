#pragma once
// Decoder: a whole BloomStack run with a KV cache (prefill, a step, the beams' row gather), so
// that the stack itself holds training's layers and buffers only.

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "seqpar/backend/device.hpp"
#include "seqpar/core/batch.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/nn/block.hpp"
#include "seqpar/nn/kv_cache.hpp"
#include "seqpar/nn/model.hpp"

namespace seqpar::inline v0 {

/// Decoding with a BloomStack that holds every layer (a tensor split is fine): the same
/// layers as its forward, each block's keys and values kept in a KvCache.
template <class Stack>
class Decoder {
 public:
  using Model = typename Stack::Model;
  using D = typename Stack::Dev;
  using T = typename Stack::Scalar;
  using Stat = typename Stack::Stat;
  using Arena = typename Stack::Arena;
  using Acts = typename Stack::Acts;
  using Cache = KvCache<T, Arena>;
  static constexpr std::int64_t H = Stack::H;

  explicit Decoder(Stack& stack) : stack_(&stack) {}

  /// An empty cache for `rows` sequences of up to `capacity` positions, this rank's heads.
  Cache kv_cache(std::int64_t rows, std::int64_t capacity) {
    Stack& s = *stack_;
    return Cache(*s.arena_, s.stage_.count(), rows, capacity, s.shape_.heads_local,
                 s.shape_.head_dim, H, s.shape_.ffn_local);
  }

  /// Runs left-padded prompts b [rows, seq] through the stack once (the forward, one block
  /// record serving every block in turn) and fills c for decoding: each block's keys and
  /// values of positions [0, seq), their ALiBi positions and mask, and c.hidden[rows, H] =
  /// ln_f of each row's last position. c.length becomes seq.
  void prefill(const BatchView& b, Cache& c) {
    Stack& s = *stack_;
    using O = Ops<D>;
    SEQPAR_CHECK(s.whole(), "prefill: this rank holds layers [", s.stage_.first, ", ",
                 s.stage_.last, ") of ", Model::layers,
                 "; decoding needs every layer on each rank");
    SEQPAR_CHECK(b.rows == c.rows && b.seq <= c.capacity, "prefill: prompts of ", b.rows,
                 " rows x ", b.seq, " tokens for a cache of ", c.rows, " rows x ", c.capacity,
                 " positions");
    Arena& ar = *s.arena_;
    const std::int64_t B = b.rows, P = b.seq, N = b.tokens(), L = s.stage_.count();
    Acts a;  // freed on return: the cache keeps what decoding needs
    a.template set_batch<D>(b, ar);
    for (int i = 0; i < 2; ++i)
      a.x.emplace_back(ar, static_cast<std::size_t>(N * H), Memory::activations);
    a.blocks.resize(1);
    s.embed(a);
    BlockScratch<T, Arena> probs;  // the attention probabilities, which no backward needs
    s.forward_blocks([&](std::int64_t l, const BlockTensors<const T>& w) {
      block_prefill<D>(a.x[(l + 1) % 2].data(), a.x[l % 2].data(),
                       c.blocks[static_cast<std::size_t>(l)], c.capacity, a.blocks[0], w, a,
                       s.slopes_.data(), s.shape_, &probs, s.options_.attention, ar, s.axis_);
    });
    s.final_norm(a, a.x[L % 2].data());
    std::vector<std::int32_t> last(static_cast<std::size_t>(B));
    for (std::int64_t r = 0; r < B; ++r)
      last[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(r * P + P - 1);
    Buffer<std::int32_t, Arena> index(ar, last.size(), Memory::buffers);
    O::upload(index.data(), last.data(), B);
    O::gather_rows(c.hidden.data(), a.hf.data(), index.data(), B, H);  // [B, H]
    // The keys' positions and mask are the record's (set_batch's rule), row r's at [r, 0..P).
    std::vector<Stat> pos(static_cast<std::size_t>(N));
    std::vector<std::uint8_t> valid(pos.size());
    O::download(pos.data(), a.pos.data(), N);
    O::download(valid.data(), a.valid.data(), N);
    for (std::int64_t r = 0; r < B; ++r) {
      std::int64_t seen = 0;
      for (std::int64_t t = 0; t < P; ++t) {
        const auto i = static_cast<std::size_t>(r * P + t),
                   j = static_cast<std::size_t>(r * c.capacity + t);
        c.host_pos[j] = pos[i];
        c.host_valid[j] = valid[i];
        seen += valid[i];
      }
      c.next_pos[static_cast<std::size_t>(r)] = seen;  // (cumsum(mask) - 1) of the next token
    }
    c.length = P;
    O::upload(c.pos.data(), c.host_pos.data(), B * c.capacity);
    O::upload(c.valid.data(), c.host_valid.data(), B * c.capacity);
  }

  /// One decoding step: ids[rows] (host), one token per row, go through the stack at
  /// position c.length; their keys and values join the cache, c.hidden[rows, H] gets ln_f
  /// of them and c.length grows by one.
  void decode(std::span<const std::int32_t> ids, Cache& c) {
    Stack& s = *stack_;
    using O = Ops<D>;
    SEQPAR_CHECK(s.whole(), "decode: this rank holds layers [", s.stage_.first, ", ", s.stage_.last,
                 ") of ", Model::layers, "; decoding needs every layer on each rank");
    SEQPAR_CHECK(static_cast<std::int64_t>(ids.size()) == c.rows, "decode: ", ids.size(),
                 " tokens for a cache of ", c.rows, " rows; expected one a row");
    SEQPAR_CHECK(c.length < c.capacity, "decode: the cache's ", c.capacity,
                 " positions are all filled");
    auto& sc = c.step;
    const std::int64_t B = c.rows, t = c.length, L = s.stage_.count();
    for (std::int64_t r = 0; r < B; ++r) {
      const auto j = static_cast<std::size_t>(r * c.capacity + t);
      c.host_pos[j] = static_cast<Stat>(c.next_pos[static_cast<std::size_t>(r)]++);
      c.host_valid[j] = 1;
    }
    O::upload(c.pos.data(), c.host_pos.data(), B * c.capacity);
    O::upload(c.valid.data(), c.host_valid.data(), B * c.capacity);
    O::upload(sc.ids.data(), ids.data(), B);
    s.embed(sc.x[0].data(), sc.emb.data(), sc.mean.data(), sc.rstd.data(), sc.ids.data(),
            B);  // [B, H]
    s.forward_blocks([&](std::int64_t l, const BlockTensors<const T>& w) {
      block_decode<D>(sc.x[(l + 1) % 2].data(), sc.x[l % 2].data(),
                      c.blocks[static_cast<std::size_t>(l)], c, w, s.slopes_.data(), s.shape_,
                      s.axis_);
    });
    s.final_norm(c.hidden.data(), sc.mean.data(), sc.rstd.data(), sc.x[L % 2].data(), B);
    c.length = t + 1;
  }

  /// Row r of `to` becomes row index[r] (host) of `from`: every block's keys and values of
  /// the filled positions [0, from.length), their ALiBi positions and mask, the next
  /// position and the last hidden state. `to` is `from` (beams reordered in place, through
  /// one spare block) or a cache of index.size() rows and from's capacity (a prompt's
  /// prefill repeated for its beams).
  void select_cache_rows(Cache& to, const Cache& from, std::span<const std::int32_t> index) {
    Stack& s = *stack_;
    using O = Ops<D>;
    const bool in_place = &to == &from;
    const std::int64_t R = to.rows, cap = from.capacity, len = from.length;
    SEQPAR_CHECK(static_cast<std::int64_t>(index.size()) == R && to.capacity == cap &&
                     to.blocks.size() == from.blocks.size() && to.heads == from.heads,
                 "select_cache_rows: ", index.size(), " rows chosen into a cache of ", R,
                 " rows x ", to.capacity, " positions from one of ", from.rows, " x ", cap,
                 "; expected one index a row and equal capacities");
    bool identity = in_place;
    for (std::int64_t r = 0; r < R; ++r) {
      const std::int32_t i = index[static_cast<std::size_t>(r)];
      SEQPAR_CHECK(i >= 0 && i < from.rows, "select_cache_rows: index[", r, "] = ", i,
                   " is not a row of the source cache (", from.rows, " rows)");
      identity = identity && i == r;
    }
    if (identity) return;
    Buffer<std::int32_t, Arena> rows(*s.arena_, index.size(), Memory::buffers);
    O::upload(rows.data(), index.data(), R);
    const std::int64_t nh = from.heads, hd = from.head_dim;
    if (in_place) fit(to.spare, *s.arena_, R * nh * cap * hd, Memory::activations);
    for (std::size_t l = 0; l < from.blocks.size(); ++l) {
      auto& dst = to.blocks[l];
      const auto& src = from.blocks[l];
      for (auto part : {&BlockKv<T, Arena>::k, &BlockKv<T, Arena>::v}) {
        // [R, nh, cap, hd]; in place the gather lands in the spare, which then takes the
        // part's place (the old part becomes the spare of the next one).
        T* out = in_place ? to.spare.data() : (dst.*part).data();
        O::kv_gather(out, (src.*part).data(), rows.data(), R, nh, cap, hd, len);
        if (in_place) std::swap(dst.*part, to.spare);
      }
    }
    O::gather_rows(in_place ? to.step.x[0].data() : to.hidden.data(), from.hidden.data(),
                   rows.data(), R, H);  // [R, H]
    if (in_place) O::copy(to.hidden.data(), to.step.x[0].data(), R * H);
    // Host copies: gathered through temporaries, which also serve the in-place case.
    std::vector<Stat> pos(static_cast<std::size_t>(R * cap));
    std::vector<std::uint8_t> valid(pos.size());
    std::vector<std::int64_t> next(static_cast<std::size_t>(R));
    for (std::int64_t r = 0; r < R; ++r) {
      const auto f = static_cast<std::size_t>(index[static_cast<std::size_t>(r)]);
      std::copy_n(from.host_pos.begin() + static_cast<std::ptrdiff_t>(f * cap), cap,
                  pos.begin() + r * cap);
      std::copy_n(from.host_valid.begin() + static_cast<std::ptrdiff_t>(f * cap), cap,
                  valid.begin() + r * cap);
      next[static_cast<std::size_t>(r)] = from.next_pos[f];
    }
    to.host_pos = std::move(pos);
    to.host_valid = std::move(valid);
    to.next_pos = std::move(next);
    to.length = len;
    O::upload(to.pos.data(), to.host_pos.data(), R * cap);
    O::upload(to.valid.data(), to.host_valid.data(), R * cap);
  }

 private:
  Stack* stack_;
};

}  // namespace seqpar::inline v0

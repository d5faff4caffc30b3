#pragma once
// Batched greedy decoding with a KV cache, for a whole BloomStack on the CPU (fp32).
// The left-padded prompts go through the stack's forward once (prefill); each layer's keys
// and values are kept, and every new token then runs through the layers alone, attending
// to its row's cached keys. ALiBi positions continue from each row's own length (the
// count of its non-padding tokens), so a row's result does not depend on its padding.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <vector>

#include "seqpar/backend/cpu/ops.hpp"
#include "seqpar/backend/kernels.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/nn/model.hpp"
#include "seqpar/core/batch.hpp"

namespace seqpar::inline v0 {

/// What greedy decoding is asked to do.
struct GenerateOptions {
  std::int64_t max_new_tokens = 64;
  std::int32_t eos_id = 2;  // a row stops when it produces this token
  /// Called before each token is chosen, with the next-token logits [rows, vocab] and
  /// which rows are still generating (for tests and scoring; may be empty).
  std::function<void(std::int64_t step, std::span<const float> logits,
                     std::span<const std::uint8_t> active)>
      on_step;
};

/// Tokens chosen for each row, without the eos.
struct Generated {
  std::vector<std::vector<std::int32_t>> tokens;
  std::vector<std::uint8_t> finished;  // the row produced eos (else it hit max_new_tokens)
  std::int64_t steps = 0;              // decoding steps taken
};

namespace detail {

/// Keys and values of every layer for `rows` sequences of up to `capacity` positions, with
/// each position's ALiBi position and whether it may be attended.
struct KvCache {
  std::int64_t layers = 0, rows = 0, heads = 0, head_dim = 0, capacity = 0;
  std::vector<float> k, v;          // [layers, rows, heads, capacity, head_dim]
  std::vector<float> pos;           // [rows, capacity]
  std::vector<std::uint8_t> valid;  // [rows, capacity]

  KvCache(std::int64_t l, std::int64_t r, std::int64_t h, std::int64_t d, std::int64_t c)
      : layers(l),
        rows(r),
        heads(h),
        head_dim(d),
        capacity(c),
        k(static_cast<std::size_t>(l * r * h * c * d)),
        v(k.size()),
        pos(static_cast<std::size_t>(r * c)),
        valid(pos.size()) {}

  std::size_t at(std::int64_t l, std::int64_t b, std::int64_t h, std::int64_t t) const {
    return static_cast<std::size_t>((((l * rows + b) * heads + h) * capacity + t) * head_dim);
  }
  /// Stores the keys and values of row b, position t from a fused qkv row laid out per
  /// head as (head, {q, k, v}, head_dim).
  void store(std::int64_t l, std::int64_t b, std::int64_t t, const float* qkv) {
    for (std::int64_t h = 0; h < heads; ++h) {
      const float* src = qkv + h * 3 * head_dim;
      std::copy(src + head_dim, src + 2 * head_dim,
                k.begin() + static_cast<std::ptrdiff_t>(at(l, b, h, t)));
      std::copy(src + 2 * head_dim, src + 3 * head_dim,
                v.begin() + static_cast<std::ptrdiff_t>(at(l, b, h, t)));
    }
  }
};

}  // namespace detail

/// Greedy decoding of `prompts` (left-padded: each row's tokens end in the last column;
/// labels are ignored) with `model`, which must hold every layer on one rank (no pipeline
/// stage, no tensor split). Stops when every row has produced eos or after max_new_tokens.
template <BloomModel M>
Generated greedy_generate(BloomStack<M, Cpu, float>& model, const BatchView& prompts,
                          const GenerateOptions& o = {}) {
  using O = Ops<Cpu>;
  using T = float;
  constexpr std::int64_t H = M::hidden, NH = M::heads, HD = M::head_dim, F = M::ffn_hidden,
                         V = M::vocab_size, L = M::layers;
  const StageLayers& st = model.stage();
  SEQPAR_CHECK(st.embedding && st.head && st.first == 0 && st.last == L,
               "greedy_generate: the model holds layers [", st.first, ", ", st.last, ") of ", L,
               "; generation needs the whole model on one rank");
  const std::int64_t B = prompts.rows, P = prompts.seq;
  SEQPAR_CHECK(B > 0 && P > 0 && o.max_new_tokens >= 0, "greedy_generate: ", B, " rows of ", P,
               " tokens and max_new_tokens ", o.max_new_tokens, "; expected positive sizes");
  SEQPAR_CHECK(prompts.input_ids.size() == static_cast<std::size_t>(B * P) &&
                   prompts.attention_mask.size() == static_cast<std::size_t>(B * P),
               "greedy_generate: input_ids and attention_mask must hold rows*seq = ", B * P,
               " values");
  for (std::int64_t b = 0; b < B; ++b) {
    bool seen = false;
    for (std::int64_t t = 0; t < P; ++t) {
      const auto i = static_cast<std::size_t>(b * P + t);
      const bool m = prompts.attention_mask[i] != 0;
      SEQPAR_CHECK(!seen || m, "greedy_generate: row ", b, " has padding at position ", t,
                   " after its tokens; prompts must be left-padded");
      seen = seen || m;
      SEQPAR_CHECK(prompts.input_ids[i] >= 0 && prompts.input_ids[i] < V,
                   "greedy_generate: input_ids[", b, "][", t, "] = ", prompts.input_ids[i],
                   " is outside the vocabulary [0, ", V, ")");
    }
    SEQPAR_CHECK(seen, "greedy_generate: row ", b, " has no tokens (its attention mask is all 0)");
  }

  Generated g;
  g.tokens.resize(static_cast<std::size_t>(B));
  g.finished.assign(static_cast<std::size_t>(B), 0);
  if (o.max_new_tokens == 0) return g;

  const std::int64_t cap = P + o.max_new_tokens;
  detail::KvCache cache(L, B, NH, HD, cap);
  std::vector<T> slopes(NH);
  for (std::int64_t h = 0; h < NH; ++h)
    slopes[static_cast<std::size_t>(h)] = static_cast<T>(kernels::alibi_slope(h, NH));
  const auto emb = EmbeddingTensors<const T>::bind(model.params(0), model.units()[0]);
  const auto fin =
      FinalTensors<const T>::bind(model.params(model.units().size() - 1), model.units().back());
  const std::int64_t table_rows = model.vocab_shard().rows;
  std::vector<T> hf(static_cast<std::size_t>(B * H)), logits(static_cast<std::size_t>(B * V));
  std::vector<std::int64_t> length(static_cast<std::size_t>(B), 0);

  // Prefill: the stack's own forward over the padded prompts; keys and values come out of
  // each block's fused qkv activation [B*P, 3H].
  {
    Batch pb(B, P);
    std::copy(prompts.input_ids.begin(), prompts.input_ids.end(), pb.input_ids.begin());
    std::copy(prompts.attention_mask.begin(), prompts.attention_mask.end(),
              pb.attention_mask.begin());
    Activations<T, DeviceArena<Cpu>> acts;
    model.forward(pb.view(), acts, false);
    for (std::int64_t l = 0; l < L; ++l)
      for (std::int64_t b = 0; b < B; ++b)
        for (std::int64_t t = 0; t < P; ++t)
          cache.store(l, b, t,
                      acts.blocks[static_cast<std::size_t>(l)].qkv.data() + (b * P + t) * 3 * H);
    for (std::int64_t b = 0; b < B; ++b) {
      for (std::int64_t t = 0; t < P; ++t) {
        const auto i = static_cast<std::size_t>(b * P + t),
                   c = static_cast<std::size_t>(b * cap + t);
        cache.pos[c] = acts.pos[i];
        cache.valid[c] = acts.valid[i];
        length[static_cast<std::size_t>(b)] += acts.valid[i];
      }
      O::copy(hf.data() + b * H, acts.hf.data() + (b * P + P - 1) * H, H);
    }
    lm_head_logits<Cpu>(logits.data(), hf.data(), emb.table, B, H, V);  // [B, V]
  }

  // One new token per row through every layer, attending to the cache.
  std::vector<T> x(static_cast<std::size_t>(B * H)), e(x.size()), ln(x.size()), mid(x.size()),
      ctx(x.size());
  std::vector<T> qkv(static_cast<std::size_t>(B * 3 * H)), fc(static_cast<std::size_t>(B * F)),
      act(fc.size());
  std::vector<T> mean(static_cast<std::size_t>(B)), rstd(mean.size()),
      scores(static_cast<std::size_t>(B * NH * cap));
  const T scale = T(1) / std::sqrt(T(HD));
  const auto decode = [&](const std::vector<std::int32_t>& ids, std::int64_t t) {
    for (std::int64_t b = 0; b < B; ++b) {
      const auto c = static_cast<std::size_t>(b * cap + t);
      cache.pos[c] = static_cast<T>(length[static_cast<std::size_t>(b)]++);
      cache.valid[c] = 1;
    }
    O::embedding_forward(e.data(), ids.data(), emb.table, B, H, std::int64_t{0}, table_rows);
    O::layernorm_forward(x.data(), mean.data(), rstd.data(), e.data(), emb.ln_w, emb.ln_b, B, H,
                         M::layer_norm_eps);
    for (std::int64_t l = 0; l < L; ++l) {
      const auto u = static_cast<std::size_t>(l + 1);
      const auto w = BlockTensors<const T>::bind(model.params(u), model.units()[u]);
      O::layernorm_forward(ln.data(), mean.data(), rstd.data(), x.data(), w.ln1_w, w.ln1_b, B, H,
                           M::layer_norm_eps);
      O::linear_forward(qkv.data(), ln.data(), w.qkv_w, w.qkv_b, B, H, 3 * H);  // [B, 3H]
      for (std::int64_t b = 0; b < B; ++b) cache.store(l, b, t, qkv.data() + b * 3 * H);
#pragma omp parallel for collapse(2) schedule(static)
      for (std::int64_t b = 0; b < B; ++b)
        for (std::int64_t h = 0; h < NH; ++h) {
          const T* q = qkv.data() + b * 3 * H + h * 3 * HD;
          const float* kb = cache.k.data() + cache.at(l, b, h, 0);
          const float* vb = cache.v.data() + cache.at(l, b, h, 0);
          const float* pb = cache.pos.data() + b * cap;
          const std::uint8_t* ok = cache.valid.data() + b * cap;
          T* s = scores.data() + (b * NH + h) * cap;
          // s[j] = scale * q.k_j + slope * pos_j over the valid keys j <= t, then softmax
          T mx = -std::numeric_limits<T>::infinity();
          for (std::int64_t j = 0; j <= t; ++j) {
            if (!ok[j]) continue;
            T dot = 0;
            for (std::int64_t d = 0; d < HD; ++d) dot += q[d] * kb[j * HD + d];
            s[j] = scale * dot + slopes[static_cast<std::size_t>(h)] * pb[j];
            mx = std::max(mx, s[j]);
          }
          T sum = 0;
          for (std::int64_t j = 0; j <= t; ++j) {
            s[j] = ok[j] ? std::exp(s[j] - mx) : T(0);
            sum += s[j];
          }
          T* out = ctx.data() + b * H + h * HD;  // [B, H], heads merged
          std::fill(out, out + HD, T(0));
          for (std::int64_t j = 0; j <= t; ++j) {
            if (!ok[j]) continue;
            const T p = s[j] / sum;
            for (std::int64_t d = 0; d < HD; ++d) out[d] += p * vb[j * HD + d];
          }
        }
      O::linear_forward(mid.data(), ctx.data(), w.proj_w, static_cast<const T*>(nullptr), B, H, H);
      O::add_bias_residual(mid.data(), w.proj_b, x.data(), B, H);  // mid = x + dense(ctx)
      O::layernorm_forward(ln.data(), mean.data(), rstd.data(), mid.data(), w.ln2_w, w.ln2_b, B, H,
                           M::layer_norm_eps);
      O::linear_forward(fc.data(), ln.data(), w.fc_w, w.fc_b, B, H, F);  // [B, F]
      O::gelu_forward(act.data(), fc.data(), B * F);
      O::linear_forward(x.data(), act.data(), w.out_w, static_cast<const T*>(nullptr), B, F, H);
      O::add_bias_residual(x.data(), w.out_b, mid.data(), B, H);  // x = mid + mlp(mid)
    }
    O::layernorm_forward(hf.data(), mean.data(), rstd.data(), x.data(), fin.ln_w, fin.ln_b, B, H,
                         M::layer_norm_eps);
    lm_head_logits<Cpu>(logits.data(), hf.data(), emb.table, B, H, V);  // [B, V]
  };

  std::vector<std::int32_t> next(static_cast<std::size_t>(B), o.eos_id);
  std::vector<std::uint8_t> active(static_cast<std::size_t>(B));
  for (std::int64_t step = 0; step < o.max_new_tokens; ++step) {
    for (std::int64_t b = 0; b < B; ++b)
      active[static_cast<std::size_t>(b)] = !g.finished[static_cast<std::size_t>(b)];
    if (o.on_step) o.on_step(step, logits, active);
    bool any = false;
    for (std::int64_t b = 0; b < B; ++b) {
      const auto r = static_cast<std::size_t>(b);
      if (!active[r]) continue;  // a finished row is fed its eos again; its output is unused
      const T* row = logits.data() + b * V;
      const auto best = static_cast<std::int32_t>(std::max_element(row, row + V) - row);
      next[r] = best;
      if (best == o.eos_id) {
        g.finished[r] = 1;
      } else {
        g.tokens[r].push_back(best);
        any = true;
      }
    }
    g.steps = step + 1;
    if (!any || step + 1 == o.max_new_tokens) break;
    decode(next, P + step);
  }
  return g;
}

}  // namespace seqpar::inline v0

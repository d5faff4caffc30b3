// What plan_fingerprints prints of a run: the bits of its losses, gradient norms and rates
// in hexadecimal, and a hash of the bits of everything else it made, one line a rank.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "../support/deferred_comm.hpp"
#include "seqpar/backend/cpu/ops.hpp"
#include "seqpar/comm/thread_comm.hpp"
#include "seqpar/core/rng.hpp"
#include "seqpar/nn/generate.hpp"
#include "seqpar/train/trainer.hpp"

namespace seqpar::fingerprint {

using Small = Bloom<BloomConfig{.vocab_size = 200, .hidden = 32, .layers = 4, .heads = 4}>;
// 12 heads (6 a rank under TensorSplit<2>), a vocabulary that pads: the decoding model.
using Decoder = Bloom<BloomConfig{.vocab_size = 97, .hidden = 48, .layers = 3, .heads = 12}>;

/// FNV-1a over bytes: equal bits give equal hashes; one changed bit, another hash.
struct Hash {
  std::uint64_t h = 1469598103934665603ull;
  void bytes(const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
  template <class T>
  void values(const T* v, std::size_t n) {
    bytes(v, n * sizeof(T));
  }
  void text(const std::string& s) { bytes(s.data(), s.size()); }
};

inline std::string hex(std::uint64_t h) {
  char s[17];
  std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(h));
  return s;
}
inline std::string hexfloat(double x) {
  char s[40];
  std::snprintf(s, sizeof s, "%a", x);
  return s;
}

/// Global batch `step`: 8 rows of 12 tokens of the Small model, rows r with r % 4 tokens of
/// left padding, one label in about seven ignored.
inline Batch batch(int step) {
  Batch b(8, 12);
  const CounterRng rng(static_cast<std::uint64_t>(step), "fingerprint-batch");
  for (std::size_t i = 0; i < b.input_ids.size(); ++i) {
    b.input_ids[i] = static_cast<std::int32_t>(4 + rng.bits(i) % 196);
    b.labels[i] = rng.bits(i, 1) % 7 == 0 ? ignore_index : b.input_ids[i];
  }
  for (std::int64_t r = 0; r < 8; ++r)
    for (std::int64_t t = 0; t < r % 4; ++t) {
      const auto i = static_cast<std::size_t>(r * 12 + t);
      b.attention_mask[i] = 0;
      b.labels[i] = ignore_index;
      b.input_ids[i] = 3;
    }
  return b;
}

/// Two micro-batches a data rank, clipping that acts, a warmup and a linear decay.
inline TrainOptions options() {
  TrainOptions o;
  o.schedule.peak = 3e-3;
  o.weight_decay = 0.1;
  o.schedule.warmup = 2;
  o.schedule.total = 6;
  o.max_grad_norm = 0.5;
  o.micro_batch_rows = 2;
  o.seed = 5;
  return o;
}

/// What a run does besides its steps.
struct RunSpec {
  int steps = 3;
  std::filesystem::path load;  // a checkpoint to resume before the steps (empty: none)
  bool gradients = false;      // compute_gradients on one more batch, its loss and gradients kept
};

/// The lines of every run, in the order the runs were made; a folder for their files.
struct Record {
  std::filesystem::path dir;
  std::vector<std::string> lines;
  std::mutex m;

  void add(const std::string& name, int rank, const std::string& line) {
    std::lock_guard lock(m);
    lines.push_back(name + " r" + std::to_string(rank) + ": " + line);
  }
  std::filesystem::path file(const std::string& name) const {
    std::string f = name;
    for (char& c : f)
      if (c == ' ' || c == '<' || c == '>' || c == ',' || c == '/') c = '_';
    return dir / (f + ".safetensors");
  }
};

inline std::uint64_t file_hash(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  const std::vector<char> all{std::istreambuf_iterator<char>(in), {}};
  Hash h;
  h.bytes(all.data(), all.size());
  return h.h;
}

/// One rank's run of Trainer<M, Plan, Cpu, Prec> over `comm`: its steps (loss, norm, rate,
/// scale and verdict of each), an evaluation after each, the logits of batch 0, its final
/// weights (and gradients where the plan keeps them whole), its memory peaks and the
/// checkpoint it saves, which Record::file(name) names.
template <class M, class Plan, class Prec, class C>
void run_rank(Record& rec, const std::string& name, C comm, const TrainOptions& o,
              const RunSpec& spec, int rank) {
  Trainer<M, Plan, Cpu, Prec> t(std::move(comm), o);
  if (!spec.load.empty()) t.load_checkpoint(spec.load);
  std::string steps;
  Hash evals;
  for (int s = 0; s < spec.steps; ++s) {
    const auto st = t.step(batch(s));
    steps += " " + hexfloat(st.loss) + "/" + hexfloat(st.grad_norm) + "/" + hexfloat(st.lr) + "/" +
             hexfloat(st.loss_scale) + (st.skipped ? (st.overflow ? "/O" : "/F") : "");
    const double e = t.evaluate(batch(100 + s));
    evals.values(&e, 1);
  }
  Hash logits, weights, grads, memory;
  const auto l = t.logits(batch(0));
  logits.values(l.data(), l.size());
  if (spec.gradients) {
    const double g = t.compute_gradients(batch(50));
    steps += " grad-loss " + hexfloat(g);
  }
  t.for_each_param([&](const ParamSpec& p, auto* v, auto* g) {
    weights.text(p.name);
    weights.values(v, static_cast<std::size_t>(p.numel()));
    if (g) grads.values(g, static_cast<std::size_t>(p.numel()));
  });
  const MemoryStats mem = t.memory();
  memory.values(mem.peak.data(), mem.peak.size());
  const auto path = rec.file(name);
  t.save_checkpoint(path, {{"fingerprint", name}});
  const std::string ckpt = rank == 0 ? " ckpt " + hex(file_hash(path)) : "";
  rec.add(name, rank,
          "steps" + steps + " eval " + hex(evals.h) + " logits " + hex(logits.h) + " weights " +
              hex(weights.h) + " grads " + hex(grads.h) + " memory " + hex(memory.h) + ckpt);
}

/// Runs Plan on its world of ThreadComm ranks (over DeferredComm with `deferred`: async
/// collectives run only when joined, as on a stream of their own).
template <class M, class Plan, class Prec = Fp32>
void run(Record& rec, const std::string& name, const TrainOptions& o, const RunSpec& spec = {},
         bool deferred = false) {
  const int n = PlanTraits<Plan>::world_size;
  run_ranks(n, [&](ThreadComm& c) {
    if (deferred)
      run_rank<M, Plan, Prec>(rec, name, test::DeferredComm<ThreadComm>(c), o, spec, c.rank());
    else
      run_rank<M, Plan, Prec>(rec, name, c, o, spec, c.rank());
  });
}

/// Greedy decoding and beam search of the Decoder model under Plan (one rank, or a tensor
/// split), with the given attention: the tokens, scores and every step's logits.
template <class Plan>
void run_generation(Record& rec, const std::string& name, AttentionKind attention) {
  run_ranks(PlanTraits<Plan>::world_size, [&](ThreadComm& c) {
    TrainOptions o;
    o.seed = 17;
    o.init_std = 0.4;
    o.attention = attention;
    Trainer<Decoder, Plan> t(c, o);
    Batch prompts(3, 5);
    const CounterRng rng(3, "fingerprint-prompts");
    for (std::size_t i = 0; i < prompts.input_ids.size(); ++i)
      prompts.input_ids[i] = static_cast<std::int32_t>(4 + rng.bits(i) % 90);
    for (std::int64_t r = 0; r < 3; ++r)
      for (std::int64_t k = 0; k < r; ++k) {
        prompts.attention_mask[static_cast<std::size_t>(r * 5 + k)] = 0;
        prompts.input_ids[static_cast<std::size_t>(r * 5 + k)] = 3;
      }
    std::string line;
    for (const std::int64_t beams : {1, 3}) {
      Hash h;
      GenerateOptions g;
      g.max_new_tokens = 6;
      g.eos_id = 2;
      g.num_beams = beams;
      g.repetition_penalty = 1.3;
      g.length_penalty = 0.8;
      g.on_step = [&h](std::int64_t, std::span<const float> logits, std::span<const std::uint8_t>) {
        h.values(logits.data(), logits.size());
      };
      const Generated out = generate(t.model(), prompts.view(), g);
      for (const auto& row : out.tokens) h.values(row.data(), row.size());
      h.values(out.scores.data(), out.scores.size());
      line += (beams == 1 ? "greedy " : " beams ") + hex(h.h);
    }
    rec.add(name, c.rank(), line);
  });
}

}  // namespace seqpar::fingerprint

// Trainer behaviour on one rank: accumulation, memory accounting, weight files,
// errors, learning a fixed pattern.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "../support/files.hpp"
#include "../support/golden.hpp"
#include "../support/weights.hpp"
#include "seqpar/backend/cpu/ops.hpp"
#include "seqpar/train/trainer.hpp"

using namespace seqpar;

namespace {
using Tiny = Bloom<BloomConfig{.vocab_size = 100, .hidden = 32, .layers = 2, .heads = 4}>;

Batch pattern_batch(std::int64_t rows, std::int64_t seq, std::uint64_t seed = 3) {
  Batch b(rows, seq);
  const CounterRng rng(seed, "batch");
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t t = 0; t < seq; ++t) {
      const auto i = static_cast<std::size_t>(r * seq + t);
      b.input_ids[i] =
          static_cast<std::int32_t>(4 + (rng.bits(static_cast<std::uint64_t>(r)) + 3 * t) % 90);
      b.labels[i] = b.input_ids[i];
    }
  b.attention_mask[0] = 0;  // one left-padding token
  b.labels[0] = b.labels[1] = ignore_index;
  return b;
}

}  // namespace

TEST_CASE("parameter counts are compile-time constants") {
  static_assert(Trainer<SeqGPT560M, Replicated<1>>::parameter_count == 559'214'592);
  static_assert(Trainer<Tiny, Replicated<1>>::world_size == 1);
  std::int64_t n = 0;
  for (const auto& u : bloom_units<Tiny>())
    for (const auto& p : u.params)
      n += p.name == "word_embeddings.weight" ? Tiny::vocab_size * p.cols : p.numel();
  CHECK(n == Tiny::parameter_count);
}

TEST_CASE(
    "gradient accumulation over micro-batches equals one big batch (loss is a global token mean)") {
  const Batch b = pattern_batch(4, 9);
  TrainOptions whole, parts;
  parts.micro_batch_rows = 1;
  Trainer<Tiny, Replicated<1>> t1(whole), t2(parts);
  const double l1 = t1.compute_gradients(b), l2 = t2.compute_gradients(b);
  CHECK(l1 == doctest::Approx(l2).epsilon(1e-6));
  std::vector<float> g1, g2;
  t1.for_each_param(
      [&](const ParamSpec& p, float*, float* g) { g1.insert(g1.end(), g, g + p.numel()); });
  t2.for_each_param(
      [&](const ParamSpec& p, float*, float* g) { g2.insert(g2.end(), g, g + p.numel()); });
  CHECK(test::rel_norm_err(g2, g1) < 1e-5);
}

TEST_CASE("the arena counts parameters, gradients and optimizer state exactly") {
  Trainer<Tiny, Replicated<1>> t;
  const std::int64_t padded =
      (Tiny::parameter_count +
       (padded_vocab(Tiny::vocab_size, 1) - Tiny::vocab_size) * Tiny::hidden);
  CHECK(t.memory().current_of(Memory::parameters) == padded * 4);
  CHECK(t.memory().current_of(Memory::gradients) == padded * 4);
  CHECK(t.memory().current_of(Memory::optimizer) == 2 * padded * 4);
  const auto st = t.step(pattern_batch(2, 8));
  CHECK(st.memory.peak_of(Memory::activations) > 0);
  CHECK(st.memory.total_peak >= st.memory.total_current);
}

TEST_CASE(
    "the LM head's logits budget trades the head's buffer against recomputing, same training") {
  // vocab 1000: whole logits (the default budget) against chunks of 128 columns (a budget
  // of 1 byte rounds up to the smallest chunk): eight chunks, the last of 104.
  using Wide = Bloom<BloomConfig{.vocab_size = 1000, .hidden = 32, .layers = 1, .heads = 4}>;
  TrainOptions whole, chunked;
  chunked.logits_bytes = 1;
  whole.schedule.peak = chunked.schedule.peak = 1e-3;
  Trainer<Wide, Replicated<1>> t1(whole), t2(chunked);
  const Batch b = pattern_batch(3, 11);
  for (int step = 0; step < 3; ++step) {
    const StepStats s1 = t1.step(b), s2 = t2.step(b);
    CHECK(s2.loss == doctest::Approx(s1.loss).epsilon(1e-6));
    CHECK(s2.grad_norm == doctest::Approx(s1.grad_norm).epsilon(1e-5));
    // The head's logits buffer is the only buffer of a different size.
    CHECK(t1.memory().current_of(Memory::buffers) - t2.memory().current_of(Memory::buffers) ==
          s1.targets * (1000 - 128) * std::int64_t{sizeof(float)});
  }
  CHECK(test::rel_norm_err(test::all_weights(t2), test::all_weights(t1)) < 1e-6);
  TrainOptions bad;
  bad.logits_bytes = -1;
  CHECK_THROWS_WITH_AS((Trainer<Wide, Replicated<1>>(bad)),
                       doctest::Contains("TrainOptions::logits_bytes is -1"), Error);
}

TEST_CASE(
    "recomputed attention probabilities: the same bits, a layer's probabilities less per record; "
    "an evaluation keeps none") {
  TrainOptions kept, remade;
  remade.recompute = Recompute::selective;
  Trainer<Tiny, Replicated<1>> t1(kept), t2(remade);
  const Batch b = pattern_batch(4, 9);
  const std::int64_t probs_bytes = 4 * Tiny::heads * 9 * 9 * std::int64_t{sizeof(float)};
  std::int64_t train_peak = 0;
  for (int step = 0; step < 3; ++step) {
    const StepStats s1 = t1.step(b), s2 = t2.step(b);
    CHECK(s2.loss == s1.loss);
    CHECK(s2.grad_norm == s1.grad_norm);
    // Each block's record keeps its probabilities, or one scratch holds them for all.
    train_peak = s1.memory.peak_of(Memory::activations);
    CHECK(train_peak - s2.memory.peak_of(Memory::activations) == Tiny::layers * probs_bytes);
    CHECK(t2.memory().current_of(Memory::buffers) - t1.memory().current_of(Memory::buffers) ==
          probs_bytes);
  }
  CHECK(test::all_weights(t2) == test::all_weights(t1));
  // An evaluation keeps no probabilities in either mode: no backward follows it.
  Trainer<Tiny, Replicated<1>> fresh(kept);
  fresh.evaluate(b);
  CHECK(fresh.memory().peak_of(Memory::activations) + Tiny::layers * probs_bytes <= train_peak);
  // Nor does it leave a buffer behind (the head's scratch is already sized by the steps).
  for (auto* t : {&t1, &t2}) {
    const std::int64_t buffers = t->memory().current_of(Memory::buffers);
    t->evaluate(b);
    CHECK(t->memory().current_of(Memory::buffers) == buffers);
  }
}

TEST_CASE("training learns a repeated pattern") {
  TrainOptions o;
  o.schedule.peak = 3e-3;
  o.schedule.warmup = 5;
  o.schedule.total = 60;
  Trainer<Tiny, Replicated<1>> t(o);
  const Batch b = pattern_batch(4, 16);
  const double first = t.step(b).loss;
  double last = first;
  for (int i = 0; i < 59; ++i) last = t.step(b).loss;
  CHECK(first > 4.0);  // about log(100) at initialisation
  CHECK(last < 0.5 * first);
}

TEST_CASE(
    "weights round-trip through safetensors in F32 and BF16, and reload into a fresh trainer") {
  TrainOptions o;
  o.seed = 11;
  Trainer<Tiny, Replicated<1>> a(o);
  const Batch b = pattern_batch(2, 8);
  a.step(b);
  const auto path = test::temp_path("test_w.safetensors");
  a.save_weights(path);
  TrainOptions o2;
  o2.seed = 12;  // a different initialisation, overwritten by the load
  Trainer<Tiny, Replicated<1>> c(o2);
  c.load_weights(path);
  CHECK(c.evaluate(b) == doctest::Approx(a.evaluate(b)).epsilon(1e-7));
  const SafetensorsFile f(path);
  CHECK(f.find("transformer.h.1.mlp.dense_4h_to_h.bias") != nullptr);
  CHECK(f.at("transformer.word_embeddings.weight").shape ==
        std::vector<std::int64_t>{Tiny::vocab_size, Tiny::hidden});
  CHECK(f.find("lm_head.weight") == nullptr);
  a.save_weights(path, DType::bf16);
  c.load_weights(path);
  CHECK(c.evaluate(b) == doctest::Approx(a.evaluate(b)).epsilon(1e-2));
  std::filesystem::remove(path);
}

TEST_CASE("weights without the transformer. prefix and with only lm_head.weight load too") {
  Trainer<Tiny, Replicated<1>> a;
  const auto path = test::temp_path("test_plain.safetensors");
  std::vector<std::vector<float>> data;
  std::vector<TensorToWrite> tensors;
  a.for_each_param([&](const ParamSpec& p, float* v, float*) {
    const std::int64_t rows = p.name == "word_embeddings.weight" ? Tiny::vocab_size : p.rows;
    auto& d = data.emplace_back(v, v + rows * p.cols);
    const std::string name = p.name == "word_embeddings.weight" ? "lm_head.weight" : p.name;
    tensors.push_back(
        {name, DType::f32,
         p.vector ? std::vector<std::int64_t>{rows} : std::vector<std::int64_t>{rows, p.cols},
         std::as_bytes(std::span(d))});
  });
  write_safetensors(path, tensors);
  TrainOptions o;
  o.seed = 99;
  Trainer<Tiny, Replicated<1>> c(o);
  c.load_weights(path);
  const Batch b = pattern_batch(2, 8);
  CHECK(c.evaluate(b) == doctest::Approx(a.evaluate(b)).epsilon(1e-7));
  std::filesystem::remove(path);
}

TEST_CASE("bad weights and bad batches give errors that name the file, tensor or position") {
  Trainer<Tiny, Replicated<1>> t;
  const auto path = test::temp_path("test_bad.safetensors");
  {
    std::vector<float> wrong(7);
    const std::vector<TensorToWrite> ts = {
        {"transformer.word_embeddings.weight", DType::f32, {7}, std::as_bytes(std::span(wrong))}};
    write_safetensors(path, ts);
  }
  try {
    t.load_weights(path);
    FAIL("expected an error");
  } catch (const Error& e) {
    const std::string m = e.what();
    CHECK(m.find(path.string()) != std::string::npos);
    CHECK(m.find("word_embeddings.weight") != std::string::npos);
    CHECK(m.find("[100, 32]") != std::string::npos);
  }
  {
    std::vector<float> emb(100 * 32);
    const std::vector<TensorToWrite> ts = {{"transformer.word_embeddings.weight",
                                            DType::f32,
                                            {100, 32},
                                            std::as_bytes(std::span(emb))}};
    write_safetensors(path, ts);
  }
  CHECK_THROWS_WITH_AS(t.load_weights(path),
                       doctest::Contains("word_embeddings_layernorm.weight' (or"), Error);
  std::ofstream(path) << "not a checkpoint";
  CHECK_THROWS_WITH_AS(t.load_weights(path), doctest::Contains("not a safetensors file"), Error);
  std::filesystem::remove(path);
  Batch b = pattern_batch(2, 4);
  b.input_ids[5] = 100;
  CHECK_THROWS_WITH_AS(t.step(b), doctest::Contains("input_ids[1][1] = 100"), Error);
  b = pattern_batch(2, 4);
  b.labels.pop_back();
  CHECK_THROWS_WITH_AS(t.step(b), doctest::Contains("rows*seq = 8"), Error);
}

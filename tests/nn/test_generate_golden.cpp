// Decoding parity with Hugging Face transformers' generate() on the golden file
// tests/golden/generate_h6.safetensors (tools/make_generate_golden.py): the same token ids
// for greedy and beam search (3 and 4 beams), with and without the repetition penalty, on
// one rank and under TensorSplit<2>; and the best hypotheses' scores.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "../support/golden.hpp"
#include "seqpar/backend/cpu/ops.hpp"
#include "seqpar/comm/thread_comm.hpp"
#include "seqpar/nn/generate.hpp"
#include "seqpar/train/trainer.hpp"

using namespace seqpar;

namespace {
using H6 = Bloom<BloomConfig{
    .vocab_size = 160, .hidden = 48, .layers = 2, .heads = 6, .layer_norm_eps = 1e-5}>;
const std::string kFile = "generate_h6.safetensors";

struct Case {
  std::int64_t beams;
  double penalty;
  std::string tag;
};
const std::vector<Case> kCases{
    {1, 1.0, "b1.p1"}, {1, 2.0, "b1.p2"}, {3, 1.0, "b3.p1"}, {4, 1.0, "b4.p1"}, {4, 2.0, "b4.p2"}};

TensorLookup lookup(const SafetensorsFile& f) {
  return [&f](std::string_view name) { return f.find("param." + std::string(name)); };
}

Batch prompts(const SafetensorsFile& f) {
  const auto& e = f.at("input_ids");
  Batch b(e.shape[0], e.shape[1]);
  b.input_ids = test::ints(f, "input_ids");
  b.attention_mask = test::ints(f, "attention_mask");
  return b;
}

// transformers' layout of what was generated: the tokens, then eos if the row ended
// there, then pad up to max_new_tokens.
std::vector<std::int32_t> as_hf_row(const Generated& g, std::size_t r, std::int64_t width,
                                    std::int32_t eos, std::int32_t pad) {
  std::vector<std::int32_t> row = g.tokens[r];
  if (g.finished[r]) row.push_back(eos);
  row.resize(static_cast<std::size_t>(width), pad);
  return row;
}

template <class Stack>
void check_case(Stack& model, const SafetensorsFile& f, const Case& c) {
  CAPTURE(c.tag);
  const auto meta = [&](const char* k) { return std::stoi(f.metadata().at(k)); };
  const Batch p = prompts(f);
  GenerateOptions o;
  o.max_new_tokens = meta("max_new_tokens");
  o.eos_id = meta("eos_token_id");
  o.num_beams = c.beams;
  o.repetition_penalty = c.penalty;
  const Generated g = generate(model, p.view(), o);
  const auto want = test::ints(f, "generated." + c.tag);
  const auto width = o.max_new_tokens;
  for (std::size_t r = 0; r < static_cast<std::size_t>(p.rows); ++r) {
    CAPTURE(r);
    const std::vector<std::int32_t> hf(want.begin() + static_cast<std::ptrdiff_t>(r) * width,
                                       want.begin() + static_cast<std::ptrdiff_t>(r + 1) * width);
    CHECK(as_hf_row(g, r, width, o.eos_id, meta("pad_token_id")) == hf);
  }
  if (c.beams > 1) {
    const auto scores = test::floats(f, "score." + c.tag);
    REQUIRE(g.scores.size() == scores.size());
    for (std::size_t r = 0; r < scores.size(); ++r)
      CHECK(g.scores[r] == doctest::Approx(scores[r]).epsilon(1e-5));
  }
}
}  // namespace

TEST_CASE("greedy and beam search decode transformers' token ids, with and without the penalty") {
  const SafetensorsFile f(test::golden_path(kFile));
  REQUIRE(std::stoi(f.metadata().at("vocab_size")) == H6::vocab_size);
  Trainer<H6, Replicated<1>> t;
  t.load_weights(lookup(f), kFile);
  for (const Case& c : kCases) check_case(t.model(), f, c);
}

TEST_CASE("the golden file's cases differ where the test relies on it") {
  // Beams that agree with greedy everywhere, or a penalty that changes nothing, would let a
  // decoder that ignores them pass.
  const SafetensorsFile f(test::golden_path(kFile));
  const auto ids = [&](const std::string& tag) { return test::ints(f, "generated." + tag); };
  CHECK(ids("b1.p1") != ids("b4.p1"));
  CHECK(ids("b3.p1") != ids("b4.p1"));
  CHECK(ids("b1.p1") != ids("b1.p2"));
  CHECK(ids("b4.p1") != ids("b4.p2"));
}

TEST_CASE("transformers' token ids under TensorSplit<2> (a split vocabulary and heads)") {
  const SafetensorsFile f(test::golden_path(kFile));
  run_ranks(2, [&](ThreadComm& comm) {
    Trainer<H6, TP2> t(comm, TrainOptions{});
    t.load_weights(lookup(f), kFile);
    for (const Case& c : kCases) check_case(t.model(), f, c);
  });
}

// Numerical faults are never silent: a non-finite loss or gradient norm skips the update
// under every precision and plan, is counted, and stops the run after
// TrainOptions::max_nonfinite_steps in a row; non-finite values are never saved and never
// loaded; a weights file is checked against the model before anything loads.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <mutex>
#include <sstream>

#include "../support/files.hpp"
#include "../support/plans.hpp"
#include "../support/weights.hpp"

using namespace seqpar;
using test::Small;

namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

std::string file_bytes(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Copies the safetensors file `from` to `to` as F32 tensors, letting `edit` change the
// tensors (by name; it may add some) and the metadata on the way.
template <class Edit>
void rewrite(const std::filesystem::path& from, const std::filesystem::path& to, Edit edit) {
  std::map<std::string, std::vector<float>> values;
  std::map<std::string, std::vector<std::int64_t>> shapes;
  std::map<std::string, std::string> meta;
  {
    const SafetensorsFile f(from);
    for (const auto& n : f.names()) {
      const TensorEntry& e = f.at(n);
      values[n].resize(static_cast<std::size_t>(e.numel()));
      read_tensor<float>(e, values[n]);
      shapes[n] = e.shape;
    }
    meta = f.metadata();
  }
  edit(values, shapes, meta);
  std::vector<TensorToWrite> tensors;
  for (const auto& [n, v] : values)
    tensors.push_back({n, DType::f32, shapes.at(n), std::as_bytes(std::span(v))});
  write_safetensors(to, tensors, meta);
}

void poison(Trainer<Small, Replicated<1>>& t, const std::string& name) {
  t.for_each_param([&](const ParamSpec& p, float* v, float*) {
    if (p.name == name) v[3] = kNan;
  });
}

}  // namespace

TEST_CASE("StepGuard: a non-finite loss or gradient norm is a fault under every policy") {
  StepGuard<Fp32> g;
  CHECK(g.update(1.0, 2.0) == StepVerdict::take);
  CHECK(g.update(std::nan(""), 2.0) == StepVerdict::fault);
  CHECK(g.update(1.0, INFINITY) == StepVerdict::fault);
  CHECK(g.faults_in_a_row() == 2);
  CHECK(g.skipped_steps() == 2);
  CHECK(g.value() == 1.0);
  CHECK(g.update(1.0, 2.0) == StepVerdict::take);
  CHECK(g.faults_in_a_row() == 0);
  CHECK(g.skipped_steps() == 2);
  StepGuard<Bf16Mixed> b;
  CHECK(b.update(1.0, std::nan("")) == StepVerdict::fault);
}

TEST_CASE(
    "StepGuard under loss scaling: an overflow halves the scale; at the floor it is a fault") {
  // (Hysteresis 1: every overflow halves; the floor the one this guard had before
  // LossScaleOptions, 2^-16.)
  StepGuard<Fp16Mixed> g(LossScaleOptions{.hysteresis = 1, .min_loss_scale = 0x1p-16});
  CHECK(g.update(1.0, INFINITY) == StepVerdict::overflow);
  CHECK(g.value() == g.options().initial_scale() / 2);
  CHECK(g.faults_in_a_row() == 0);
  // A non-finite loss is no scale's doing: a fault, and the scale stays.
  CHECK(g.update(INFINITY, INFINITY) == StepVerdict::fault);
  CHECK(g.value() == g.options().initial_scale() / 2);
  CHECK(g.faults_in_a_row() == 1);
  LossScaleState near_floor = g.state();
  near_floor.scale = g.options().min_loss_scale * 2;
  near_floor.clean_steps = 0;
  g.restore(near_floor);
  CHECK(g.update(1.0, INFINITY) == StepVerdict::overflow);
  CHECK(g.value() == g.options().min_loss_scale);
  CHECK(g.update(1.0, INFINITY) == StepVerdict::fault);
  CHECK(g.update(1.0, INFINITY) == StepVerdict::fault);
  CHECK(g.faults_in_a_row() == 2);
  CHECK(g.skipped_steps() == 5);
}

TEST_CASE("a NaN in the weights skips every update, counted, until the run stops naming the step") {
  auto o = test::plan_options();
  o.max_nonfinite_steps = 3;
  Trainer<Small, Replicated<1>> t(o);
  CHECK(t.step(test::plan_batch(0)).attempt == 1);
  poison(t, "h.1.mlp.dense_h_to_4h.weight");
  const auto before = test::weights_by_name(t);
  for (int i = 1; i <= 2; ++i) {
    const StepStats st = t.step(test::plan_batch(i));
    CHECK(st.skipped);
    CHECK(std::isnan(st.loss));
    CHECK(st.step == 1);         // no optimizer step was taken
    CHECK(st.attempt == i + 1);  // the row's own number, not the last update's
    CHECK(st.nonfinite_in_a_row == i);
    CHECK(st.skipped_steps == i);
  }
  const auto after = test::weights_by_name(t);
  for (const auto& [name, v] : before) {
    CAPTURE(name);
    // Bit for bit: NaN != NaN, so compare the bytes.
    CHECK(std::memcmp(v.data(), after.at(name).data(), v.size() * sizeof(float)) == 0);
  }
  CHECK(t.steps_taken() == 1);
  CHECK_THROWS_WITH_AS(
      t.step(test::plan_batch(3)),
      doctest::Contains(
          "step 2: the loss (nan) or the gradient norm (nan) was not finite in 3 steps "
          "in a row (TrainOptions::max_nonfinite_steps = 3)"),
      Error);
  o.max_nonfinite_steps = 0;
  CHECK_THROWS_WITH_AS((Trainer<Small, Replicated<1>>(o)),
                       doctest::Contains("max_nonfinite_steps is 0"), Error);
}

TEST_CASE(
    "a learning rate that blows the weights up stops every rank of TP2 x PP2 x DP2 at the same "
    "step") {
  auto o = test::plan_options();
  o.schedule.peak = 1e30;  // one step makes the weights ~1e30: the next losses overflow
  o.schedule.warmup = 0;
  o.max_grad_norm = 0;
  o.max_nonfinite_steps = 2;
  std::mutex m;
  std::vector<std::int64_t> skipped_at;
  try {
    run_ranks(8, [&](ThreadComm& comm) {
      Trainer<Small, Hybrid<TP2, PP2, DP2>> t(comm, o);
      for (int s = 0; s < 10; ++s) {
        const StepStats st = t.step(test::plan_batch(s));
        if (st.skipped) {
          std::lock_guard lock(m);
          skipped_at.push_back(st.step);
        }
      }
    });
    FAIL("the run did not stop");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("was not finite in 2 steps in a row") != std::string::npos);
  }
  // Every rank skipped the same step before the second fault ended the run.
  REQUIRE(skipped_at.size() == 8);
  for (auto s : skipped_at) CHECK(s == skipped_at[0]);
}

TEST_CASE(
    "no checkpoint or weights file is written from non-finite values; the last good file stays") {
  const auto path = test::temp_path("faults_good.safetensors"),
             weights = test::temp_path("faults_weights.safetensors");
  Trainer<Small, Replicated<1>> t(test::plan_options());
  t.step(test::plan_batch(0));
  t.save_checkpoint(path);
  t.save_weights(weights);
  const std::string good = file_bytes(path), good_weights = file_bytes(weights);
  poison(t, "h.2.self_attention.dense.weight");
  CHECK_THROWS_WITH_AS(
      t.save_checkpoint(path),
      doctest::Contains(
          "not written: tensor 'transformer.h.2.self_attention.dense.weight' holds nan "
          "at element 3"),
      Error);
  CHECK_THROWS_WITH_AS(
      t.save_weights(weights, DType::bf16),
      doctest::Contains("tensor 'transformer.h.2.self_attention.dense.weight' holds nan"), Error);
  CHECK(file_bytes(path) == good);
  CHECK(file_bytes(weights) == good_weights);
  for (const auto& e : std::filesystem::directory_iterator(path.parent_path()))
    CHECK(e.path().filename().string().find(path.filename().string() + ".") == std::string::npos);
  std::filesystem::remove(path);
  std::filesystem::remove(weights);
}

TEST_CASE("weights or a checkpoint holding a NaN are refused, naming the tensor") {
  const auto path = test::temp_path("faults_ckpt.safetensors"),
             bad = test::temp_path("faults_nan.safetensors");
  Trainer<Small, Replicated<1>> t(test::plan_options());
  t.save_checkpoint(path);
  rewrite(path, bad, [](auto& values, auto&, auto&) {
    values.at("transformer.h.3.mlp.dense_4h_to_h.bias")[5] = kNan;
  });
  CHECK_THROWS_WITH_AS(
      t.load_weights(bad),
      doctest::Contains(
          "tensor 'transformer.h.3.mlp.dense_4h_to_h.bias' holds nan (row 5, column 0)"),
      Error);
  CHECK_THROWS_WITH_AS(t.load_checkpoint(bad),
                       doctest::Contains("'transformer.h.3.mlp.dense_4h_to_h.bias' holds nan"),
                       Error);
  rewrite(path, bad, [](auto& values, auto&, auto&) {
    values.at("optimizer.v.transformer.ln_f.weight")[0] = INFINITY;
  });
  CHECK_THROWS_WITH_AS(t.load_checkpoint(bad),
                       doctest::Contains("'optimizer.v.transformer.ln_f.weight' holds inf"), Error);
  std::filesystem::remove(path);
  std::filesystem::remove(bad);
}

TEST_CASE("a weights file with tensors the model does not have is refused, listing them") {
  const auto path = test::temp_path("faults_w.safetensors"),
             extra = test::temp_path("faults_extra.safetensors");
  {
    Trainer<Small, Replicated<1>> t(test::plan_options());
    t.save_weights(path);
  }
  rewrite(path, extra, [](auto& values, auto& shapes, auto&) {
    values["transformer.h.7.mlp.dense_4h_to_h.bias"] = std::vector<float>(32, 0.0f);
    shapes["transformer.h.7.mlp.dense_4h_to_h.bias"] = {32};
    values["score.weight"] = std::vector<float>(2, 0.0f);
    shapes["score.weight"] = {2};
  });
  Trainer<Small, Replicated<1>> t(test::plan_options());
  CHECK_THROWS_WITH_AS(
      t.load_weights(extra),
      doctest::Contains(
          "2 tensor(s) that this model (vocab 200, hidden 32, 4 layers) does not have: "
          "'score.weight', 'transformer.h.7.mlp.dense_4h_to_h.bias'"),
      Error);
  // A 2-layer model given a 4-layer file: once it loaded the first two layers silently.
  using Shallow = Bloom<BloomConfig{.vocab_size = 200, .hidden = 32, .layers = 2, .heads = 4}>;
  Trainer<Shallow, Replicated<1>> s;
  CHECK_THROWS_WITH_AS(
      s.load_weights(path),
      doctest::Contains("tensor(s) that this model (vocab 200, hidden 32, 2 layers)"), Error);
  // The check reads the header only and runs before any allocation: check_bloom_weights.
  const TensorFile f(path);
  using Wide = Bloom<BloomConfig{.vocab_size = 200, .hidden = 64, .layers = 4, .heads = 4}>;
  CHECK_THROWS_WITH_AS(
      check_bloom_weights<Wide>(
          f.names(), [&f](std::string_view n) { return f.find(n); }, path.string()),
      doctest::Contains(
          "tensor 'transformer.word_embeddings.weight' has shape [200, 32]; this model "
          "(vocab 200, hidden 64, 4 layers) expects [200, 64]"),
      Error);
  t.load_weights(path);  // the model's own file loads
  std::filesystem::remove(path);
  std::filesystem::remove(extra);
}

TEST_CASE(
    "checkpoint metadata that is not a number is refused naming the file, the field and the "
    "value") {
  const auto path = test::temp_path("faults_m.safetensors"),
             bad = test::temp_path("faults_badmeta.safetensors");
  Trainer<Small, Replicated<1>> t(test::plan_options());
  t.save_checkpoint(path);
  for (const char* value : {"12abc", "", " 3", "0x10", "99999999999999999999"}) {
    CAPTURE(value);
    rewrite(path, bad, [&](auto&, auto&, auto& meta) { meta["seqpar.step"] = value; });
    const std::string want = bad.string() + ": metadata seqpar.step is '" + value +
                             "'; expected an integer (plain decimal, in range)";
    CHECK_THROWS_WITH_AS(t.load_checkpoint(bad), doctest::Contains(want.c_str()), Error);
  }
  rewrite(path, bad, [&](auto&, auto&, auto& meta) { meta["seqpar.step"] = "-4"; });
  CHECK_THROWS_WITH_AS(t.load_checkpoint(bad), doctest::Contains("seqpar.step is -4"), Error);
  std::filesystem::remove(path);
  std::filesystem::remove(bad);
}

TEST_CASE("parse_number: whole decimal text in range, nothing else") {
  CHECK(detail::parse_number<std::int64_t>("42") == 42);
  CHECK(detail::parse_number<std::int64_t>("-7") == -7);
  CHECK(detail::parse_number<double>("2e-5") == 2e-5);
  CHECK(detail::parse_number<double>("0.5") == 0.5);
  for (const char* s : {"", "+1", " 1", "1 ", "0x10", "1e3", "9223372036854775808"})
    CHECK_FALSE(detail::parse_number<std::int64_t>(s).has_value());
  for (const char* s : {"nan", "inf", "-inf", "0x1p3", "1e400", "1.5x", "+2"})
    CHECK_FALSE(detail::parse_number<double>(s).has_value());
  CHECK_FALSE(detail::parse_number<std::uint64_t>("-1").has_value());
  CHECK_THROWS_WITH_AS(
      detail::parse_field<double>("nan", "f.json", "field x"),
      doctest::Contains("f.json: field x is 'nan'; expected a finite number (plain decimal)"),
      Error);
}

// Checkpoints: written under one plan, resumed under another, they continue the run of
// Replicated<1> exactly as if it had never stopped; weights export from any plan.
#include <doctest/doctest.h>

#include <filesystem>

#include "../support/files.hpp"
#include "../support/plans.hpp"

using namespace seqpar;
using test::Small;

namespace {
constexpr int kSteps = test::kPlanSteps, kSplit = 2;

using test::reference;

// kSplit steps under plan A, a checkpoint, then the remaining steps under plan B.
template <class A, class B>
void check_resume() {
  const auto path = test::temp_path("ckpt_resume.safetensors");
  run_ranks(std::max(1, PlanTraits<A>::world_size), [&](ThreadComm& comm) {
    Trainer<Small, A> t(comm, test::plan_options());
    for (int s = 0; s < kSplit; ++s) t.step(test::plan_batch(s));
    t.save_checkpoint(path, {{"data.position", "2"}});
  });
  const auto& ref = reference();
  std::mutex m;
  run_ranks(std::max(1, PlanTraits<B>::world_size), [&](ThreadComm& comm) {
    auto o = test::plan_options();
    o.seed = 777;  // the checkpoint, not the seed, decides the state
    Trainer<Small, B> t(comm, o);
    const auto meta = t.load_checkpoint(path);
    std::vector<double> losses;
    for (int s = kSplit; s < kSteps; ++s) losses.push_back(t.step(test::plan_batch(s)).loss);
    const double werr = test::max_weight_error(t, ref);
    std::lock_guard lock(m);
    CHECK(meta.at("data.position") == "2");
    CHECK(t.steps_taken() == kSteps);
    for (int s = kSplit; s < kSteps; ++s)
      CHECK(losses[s - kSplit] == doctest::Approx(ref.losses[s]).epsilon(1e-5));
    CHECK(werr < 1e-4);
  });
  std::filesystem::remove(path);
}
}  // namespace

TEST_CASE("a checkpoint resumes the same run under the same plan") {
  check_resume<Replicated<1>, Replicated<1>>();
}
TEST_CASE("ZeRO-3 over 2 ranks -> ZeRO-1 over 4 ranks") {
  check_resume<Sharded<Zero3, 2>, Sharded<Zero1, 4>>();
}
TEST_CASE("Replicated<1> -> TP2 x PP2") { check_resume<Replicated<1>, Hybrid<TP2, PP2>>(); }
TEST_CASE("TP2 x PP2 x DP2 -> ZeRO-2 over 2 ranks") {
  check_resume<Hybrid<TP2, PP2, DP2>, Sharded<Zero2, 2>>();
}
TEST_CASE("TP2 x ZeRO-3 -> PP4 with GPipe") {
  check_resume<Hybrid<TP2, Sharded<Zero3, 2>>, Pipeline<4, GPipe>>();
}

TEST_CASE("weights exported under TP2 x PP2 are the full Hugging Face tensors") {
  const auto split = test::temp_path("ckpt_split.safetensors"),
             single = test::temp_path("ckpt_single.safetensors");
  run_ranks(4, [&](ThreadComm& comm) {
    Trainer<Small, Hybrid<TP2, PP2>> t(comm, test::plan_options());
    t.step(test::plan_batch(0));
    t.save_weights(split);
  });
  {
    Trainer<Small, Replicated<1>> t(test::plan_options());
    t.step(test::plan_batch(0));
    t.save_weights(single);
  }
  const SafetensorsFile a(split), b(single);
  CHECK(a.names() == b.names());
  CHECK(a.find("lm_head.weight") == nullptr);
  CHECK(a.find("optimizer.m.transformer.ln_f.weight") == nullptr);
  for (const auto& name : b.names()) {
    CAPTURE(name);
    REQUIRE(a.at(name).shape == b.at(name).shape);
    CHECK(test::rel_norm_err(test::floats(a, name), test::floats(b, name)) < 1e-5);
  }
  std::filesystem::remove(split);
  std::filesystem::remove(single);
}

TEST_CASE("checkpoint errors name the file and what differs") {
  const auto path = test::temp_path("ckpt_other.safetensors");
  {
    Trainer<Small, Replicated<1>> t(test::plan_options());
    t.save_checkpoint(path);
  }
  using Other = Bloom<BloomConfig{.vocab_size = 200, .hidden = 32, .layers = 2, .heads = 4}>;
  Trainer<Other, Replicated<1>> o;
  CHECK_THROWS_WITH_AS(o.load_checkpoint(path),
                       doctest::Contains("layers = 4; this trainer's model has 2"), Error);
  {
    Trainer<Small, Replicated<1>> t(test::plan_options());
    t.save_weights(path);  // weights only: no optimizer state
    CHECK_THROWS_WITH_AS(
        t.load_checkpoint(path),
        doctest::Contains("not a training checkpoint (metadata 'seqpar.step' is missing)"), Error);
  }
  std::filesystem::remove(path);
  Trainer<Small, Replicated<1>> t(test::plan_options());
  CHECK_THROWS_WITH_AS(t.save_checkpoint("/nonexistent-dir/x.safetensors"),
                       doctest::Contains("/nonexistent-dir"), Error);
}

// Checkpoints: written under one plan, resumed under another, they continue the run of
// Replicated<1> exactly as if it had never stopped; weights export from any plan.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>

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

TEST_CASE("a flipped bit in a checkpoint or a weights file is refused on resume and on load") {
  const auto ckpt = test::temp_path("ckpt_flipped.safetensors"),
             weights = test::temp_path("weights_flipped.safetensors");
  {
    Trainer<Small, Replicated<1>> t(test::plan_options());
    t.step(test::plan_batch(0));
    t.save_checkpoint(ckpt, {{"data.position", "1"}});
    t.save_weights(weights);
  }
  // Every tensor of a saved file has its checksum; the caller's metadata comes back as given.
  const std::string moment = "optimizer.v.transformer.h.2.mlp.dense_4h_to_h.weight";
  {
    const SafetensorsFile f(ckpt);
    CHECK(f.checksums().size() == f.size() + 1);
    CHECK(f.checksums().count(moment) == 1);
    CHECK(f.metadata().count("seqpar.crc32c." + moment) == 0);
  }
  // One bit in the middle of a tensor: after the 8-byte header length and the header, at
  // the tensor's place in the data.
  const auto flip_in = [](const std::filesystem::path& path, const std::string& name) {
    std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
    unsigned char length[8] = {};
    io.read(reinterpret_cast<char*>(length), 8);
    std::uint64_t at = 0;
    for (int i = 7; i >= 0; --i) at = at << 8 | length[i];
    at += 8;
    {
      const SafetensorsFile f(path, Checksums::none);
      const TensorEntry& e = f.at(name);
      at += static_cast<std::uint64_t>(e.bytes.data() - f.entries().front().bytes.data()) +
            e.bytes.size() / 2;
    }
    io.seekg(static_cast<std::streamoff>(at));
    char c = 0;
    io.read(&c, 1);
    c = static_cast<char>(c ^ 0x04);
    io.seekp(static_cast<std::streamoff>(at));
    io.write(&c, 1);
    REQUIRE(io.good());
  };
  flip_in(ckpt, moment);
  flip_in(weights, "transformer.h.0.self_attention.query_key_value.weight");
  const std::string bad_moment = ckpt.string() + ": tensor '" + moment + "': its bytes' CRC-32C is",
                    bad_weight = weights.string() +
                                 ": tensor 'transformer.h.0.self_attention.query_key_value.weight'"
                                 ": its bytes' CRC-32C is";
  run_ranks(2, [&](ThreadComm& comm) {
    Trainer<Small, Sharded<Zero1, 2>> t(comm, test::plan_options());
    CHECK_THROWS_WITH_AS(t.load_checkpoint(ckpt), doctest::Contains(bad_moment.c_str()), Error);
    CHECK_THROWS_WITH_AS(t.load_weights(weights), doctest::Contains(bad_weight.c_str()), Error);
    CHECK(t.steps_taken() == 0);
  });
  std::filesystem::remove(ckpt);
  std::filesystem::remove(weights);
}

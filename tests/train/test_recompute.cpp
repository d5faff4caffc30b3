// Activation recomputation (TrainOptions::recompute): none, selective, full and full
// every k-th block give the same bits under every plan and attention kind, and keep the
// activation bytes each mode promises (the arena's activations peak).
#include <doctest/doctest.h>

#include <cstring>

#include "../support/plans.hpp"

using namespace seqpar;
using test::Small;

namespace {

struct Mode {
  Recompute recompute;
  std::int64_t every;
};
constexpr Mode kModes[] = {{Recompute::none, 1},
                           {Recompute::selective, 1},
                           {Recompute::full, 1},
                           {Recompute::full, 2},
                           {Recompute::full, 3}};

TrainOptions with_mode(TrainOptions o, Mode m) {
  o.recompute = m.recompute;
  o.recompute_every = m.every;
  return o;
}

// Every gradient element of one compute_gradients call, by name.
std::map<std::string, std::vector<float>> gradients_of(const TrainOptions& o) {
  Trainer<Small, Replicated<1>> t(o);
  t.step(test::plan_batch(0));
  t.compute_gradients(test::plan_batch(1));
  std::map<std::string, std::vector<float>> g;
  t.for_each_param(
      [&](const ParamSpec& p, float*, float* grad) { g[p.name].assign(grad, grad + p.numel()); });
  return g;
}

}  // namespace

TEST_CASE("every recomputation mode gives the same gradients, losses and weights on one rank") {
  for (const AttentionKind attention : {AttentionKind::standard, AttentionKind::fused}) {
    TrainOptions o = test::plan_options();
    o.attention = attention;
    const auto base = test::run_plan_threads<Replicated<1>>(1, 3, o);
    const auto base_grads = gradients_of(o);
    for (const Mode m : kModes) {
      CAPTURE(recompute_name(m.recompute));
      CAPTURE(m.every);
      CAPTURE(static_cast<int>(attention));
      const TrainOptions mo = with_mode(o, m);
      CHECK(test::run_plan_threads<Replicated<1>>(1, 3, mo) == base);
      const auto grads = gradients_of(mo);
      for (const auto& [name, g] : base_grads) {
        CAPTURE(name);
        CHECK(std::memcmp(g.data(), grads.at(name).data(), g.size() * sizeof(float)) == 0);
      }
    }
  }
}

TYPE_TO_STRING(Hybrid<TP2, PP2>);
TYPE_TO_STRING(Hybrid<TP2, Pipeline<2, GPipe>>);
TYPE_TO_STRING(Sharded<Zero3, 2>);
TYPE_TO_STRING(Hybrid<TP2, Sharded<Zero3, 2>>);
TYPE_TO_STRING(Pipeline<4, OneFOneB>);

TEST_CASE_TEMPLATE_DEFINE("every recomputation mode gives the same bits on every rank", Plan,
                          recompute_mode_plans) {
  // Tensor ranks recompute their own heads (with the tensor-axis sums of the forward);
  // pipeline stages hold several records in flight; ZeRO-3 recomputes a block inside the
  // backward's gather of its parameters, so its prefetch order is the forward's reversed.
  auto o = test::plan_options();
  const int n = PlanTraits<Plan>::world_size;
  const auto base = test::run_plan_threads<Plan>(n, 3, o);
  for (const Mode m : kModes) {
    if (m.recompute == Recompute::none) continue;
    CAPTURE(recompute_name(m.recompute));
    CAPTURE(m.every);
    const auto runs = test::run_plan_threads<Plan>(n, 3, with_mode(o, m));
    for (int r = 0; r < n; ++r) {
      CAPTURE(r);
      CHECK(runs[static_cast<std::size_t>(r)] == base[static_cast<std::size_t>(r)]);
    }
  }
}
TEST_CASE_TEMPLATE_INVOKE(recompute_mode_plans, Hybrid<TP2, PP2>, Hybrid<TP2, Pipeline<2, GPipe>>,
                          Sharded<Zero3, 2>, Hybrid<TP2, Sharded<Zero3, 2>>, Pipeline<4, OneFOneB>);

TEST_CASE(
    "the activations peak per mode: full keeps a block's input, selective its record without "
    "the probabilities, none all of it") {
  // One micro-batch of 2 rows x 12 tokens at a time (plan_options): N = 24 tokens.
  const TrainOptions o = test::plan_options();
  std::map<std::string, std::int64_t> peak;
  const auto run = [&](const std::string& name, Mode m) {
    Trainer<Small, Replicated<1>> t(with_mode(o, m));
    std::int64_t p = 0;
    for (int s = 0; s < 2; ++s) p = t.step(test::plan_batch(s)).memory.peak_of(Memory::activations);
    peak[name] = p;
  };
  run("none", {Recompute::none, 1});
  run("selective", {Recompute::selective, 1});
  run("full", {Recompute::full, 1});
  run("full/2", {Recompute::full, 2});
  constexpr std::int64_t L = Small::layers, H = Small::hidden, F = Small::ffn_hidden,
                         nh = Small::heads, rows = 2, seq = 12, N = rows * seq, f = sizeof(float);
  // A block's record: ln1, x_mid, ln2 [N, H], qkv [N, 3H], ctx [N, H], fc_pre and fc_act
  // [N, F], four [N] statistics; the probabilities [rows, nh, seq, seq] apart.
  const std::int64_t record = (7 * H + 2 * F) * N * f + 4 * N * f;
  const std::int64_t probs = rows * nh * seq * seq * f;
  INFO("none ", peak["none"], " selective ", peak["selective"], " full ", peak["full"], " full/2 ",
       peak["full/2"], "; a record ", record, " + ", probs, " bytes");
  CHECK(peak["none"] - peak["selective"] == L * probs);
  // Full: one block's record (with its probabilities) at a time, made by the forward and
  // made again by the backward; every block's input is the residual stream all modes keep.
  CHECK(peak["none"] - peak["full"] == (L - 1) * (record + probs));
  CHECK(peak["selective"] - peak["full"] == (L - 1) * record - probs);
  // Every 2nd block (0 and 2 of 4) recomputed: those two records less but the transient one.
  CHECK(peak["none"] - peak["full/2"] == (L / 2 - 1) * (record + probs));
  CHECK(peak["full"] < peak["full/2"]);
  CHECK(peak["full/2"] < peak["selective"]);
  CHECK(peak["selective"] < peak["none"]);
  // REFERENCE's order of magnitude: per layer a full block keeps its input, N H values
  // (2 s b h bytes in fp16), where selective keeps about 16 N H (34 s b h).
  const double kept_per_layer_selective =
      static_cast<double>(peak["selective"] - peak["full"] + record) / (L * N * H * f) + 1;
  CHECK(kept_per_layer_selective > 14);
  CHECK(kept_per_layer_selective < 18);
  TrainOptions bad = o;
  bad.recompute = Recompute::full;
  bad.recompute_every = 0;
  CHECK_THROWS_WITH_AS((Trainer<Small, Replicated<1>>(bad)),
                       doctest::Contains("TrainOptions::recompute_every is 0"), Error);
}

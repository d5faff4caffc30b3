// The plan registry: the short names of layouts (every name seqgpt_ner has taken keeps its
// meaning), the layout flags, the families' layouts, and resolve_plan: the data degree from
// the world, and each refusal naming what was asked and what is available.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "seqpar/plan/registry.hpp"

using namespace seqpar;

namespace registry_test {
using Tiny = Bloom<BloomConfig{.vocab_size = 4608, .hidden = 128, .layers = 2, .heads = 4}>;

PlanDesc named(const std::string& name) {
  const auto p = parse_plan_name(name);
  REQUIRE_MESSAGE(p.has_value(), name);
  return *p;
}

std::string refusal(const PlanRequest& r, WorldOrigin world, const BloomConfig& m = Tiny::config) {
  try {
    resolve_plan(r, world, m, StandardPlans::layouts());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("the names seqgpt_ner has always taken keep their layouts") {
  // {data, tensor, pipeline, zero stage, gpipe}
  CHECK(named("single") == PlanDesc{1, 1, 1, 0, false});
  CHECK(named("dp2") == PlanDesc{2, 1, 1, 0, false});
  CHECK(named("dp4") == PlanDesc{4, 1, 1, 0, false});
  CHECK(named("zero1x2") == PlanDesc{2, 1, 1, 1, false});
  CHECK(named("zero2x2") == PlanDesc{2, 1, 1, 2, false});
  CHECK(named("zero3x2") == PlanDesc{2, 1, 1, 3, false});
  CHECK(named("zero3x4") == PlanDesc{4, 1, 1, 3, false});
  CHECK(named("tp2") == PlanDesc{1, 2, 1, 0, false});
  CHECK(named("tp2dp2") == PlanDesc{2, 2, 1, 0, false});
  CHECK(named("tp2zero3x2") == PlanDesc{2, 2, 1, 3, false});
  CHECK(named("pp2") == PlanDesc{1, 1, 2, 0, false});
  CHECK(named("pp2dp2") == PlanDesc{2, 1, 2, 0, false});
}

TEST_CASE("new names: any degree, the data degree left to the launch, the schedule") {
  CHECK(named("tp2dp4") == PlanDesc{4, 2, 1, 0, false});
  CHECK(named("tp2pp2dp2") == PlanDesc{2, 2, 2, 0, false});
  CHECK(named("zero3") == PlanDesc{0, 1, 1, 3, false});
  CHECK(named("dp") == PlanDesc{0, 1, 1, 0, false});
  CHECK(named("tp4dp") == PlanDesc{0, 4, 1, 0, false});
  CHECK(named("pp2gpipezero1x3") == PlanDesc{3, 1, 2, 1, true});
  for (const char* bad : {"", "tp", "tp0", "dp0", "zero4", "zero0x2", "zero2x", "pp2dp2tp2", "TP2",
                          "tp2 ", "tp99999", "dp2x2", "singles", "pp21f1b"})
    CHECK_MESSAGE(!parse_plan_name(bad).has_value(), "'", bad, "'");
  // plan_name is the inverse of parse_plan_name on every layout it writes.
  for (const PlanDesc& p : StandardPlans::layouts())
    for (const int d : {0, 1, 3, 64}) {
      PlanDesc q = p;
      q.data = d;
      CHECK_MESSAGE(named(plan_name(q)) == q, plan_name(q));
    }
  CHECK(plan_name({4, 2, 1, 0, false}) == "tp2dp4");
  CHECK(plan_name({2, 2, 2, 3, true}) == "tp2pp2gpipezero3x2");
  CHECK(plan_name({1, 1, 1, 0, false}) == "single");
  std::string fields;
  layout_fields({2, 2, 2, 3, true}, [&](std::string_view field, const std::string& value) {
    fields += std::string(fields.empty() ? "" : " ") + std::string(field) + "=" + value;
  });
  CHECK(fields == "zero_stage=3 tensor_parallel=2 pipeline_parallel=2 pipeline_schedule=gpipe");
  CHECK(describe_layout({2, 2, 2, 3, true}) ==
        "ZeRO stage 3, tensor degree 2, 2 pipeline stages (gpipe)");
  CHECK(describe_layout({4, 1, 1, 0, false}) == "ZeRO stage 0");
}

TEST_CASE("the standard families: tensor 1, 2, 4 x one or two stages x every ZeRO stage") {
  const auto all = StandardPlans::layouts();
  CHECK(all.size() == 3 * 3 * 4);  // tensor x {1 stage, 2 x 1F1B, 2 x GPipe} x stage
  CHECK(describe_layouts(all) ==
        "tensor degrees 1, 2 and 4, pipeline degrees 1 and 2 (gpipe or 1f1b), ZeRO stages 0 to "
        "3, any data degree");
  int found = 0;
  StandardPlans::each([&](auto family) {
    decltype(family)::with(PlanDesc{0, 4, 2, 2, true}, [&](auto plan) {
      ++found;
      CHECK(std::is_same_v<typename decltype(plan)::type,
                           Hybrid<TensorSplit<4>, Pipeline<2, GPipe>, Sharded<Zero2>>>);
    });
  });
  CHECK(found == 1);
}

TEST_CASE("resolve_plan: the data degree is what the world leaves") {
  const auto compiled = StandardPlans::layouts();
  const auto resolve = [&](const std::string& name, int world) {
    return resolve_plan({named(name), name}, {world, ""}, SeqGPT560M::config, compiled);
  };
  CHECK(resolve("tp2dp", 8) == PlanDesc{4, 2, 1, 0, false});
  CHECK(resolve("tp2pp2dp", 8) == PlanDesc{2, 2, 2, 0, false});
  CHECK(resolve("zero1", 3) == PlanDesc{3, 1, 1, 1, false});
  CHECK(resolve("zero3", 64) == PlanDesc{64, 1, 1, 3, false});
  CHECK(resolve("tp4pp2zero2", 64) == PlanDesc{8, 4, 2, 2, false});
  CHECK(resolve("tp2dp4", 8) == PlanDesc{4, 2, 1, 0, false});
  for (int world = 1; world <= 64; ++world) {
    CHECK(resolve("zero2", world).data == world);
    if (world % 4 == 0) CHECK(resolve("tp2pp2dp", world).data == world / 4);
  }
}

TEST_CASE("resolve_plan refuses, naming what was asked and what is available") {
  CHECK(refusal({named("tp2dp2"), "plan tp2dp2"}, {8, "8 ranks were started"}) ==
        "plan tp2dp2 needs 4 ranks (tensor 2 x pipeline 1 x data 2), but 8 ranks were started; "
        "launch 4 ranks or leave the data degree to the launch (tp2dp)");
  // A program names its own launchers through the world's hook.
  const WorldOrigin mpirun{8, "mpirun started 8 processes", [](int n) {
                             return std::to_string(n) + " (mpirun -np " + std::to_string(n) + ")";
                           }};
  CHECK(refusal({named("tp2dp2"), "tp2dp2"}, mpirun) ==
        "tp2dp2 needs 4 ranks (tensor 2 x pipeline 1 x data 2), but mpirun started 8 "
        "processes; launch 4 (mpirun -np 4) or leave the data degree to the launch (tp2dp)");
  CHECK(refusal({{0, 2, 2, 0, false}, "tensor 2 x pipeline 2"}, {6, ""}) ==
        "tensor 2 x pipeline 2 over 6 ranks: 6 is not a multiple of tensor x pipeline = 2 x 2 = "
        "4; launch a multiple of 4 ranks or change the degrees");
  CHECK(refusal({{0, 8, 1, 0, false}, "tensor degree 8"}, {8, ""}) ==
        "tensor degree 8: tensor parallel 8 does not divide the model's 4 attention heads (a "
        "tensor rank computes whole heads)");
  CHECK(refusal({{0, 1, 4, 0, false}, "4 stages"}, {4, ""}) ==
        "4 stages: 4 pipeline stages do not divide the model's 2 layers (stages hold "
        "equal numbers of layers)");
  CHECK(refusal({{0, 1, 4, 0, false}, "4 stages"}, {4, ""}, SeqGPT560M::config) ==
        "4 stages: tensor 1 x pipeline 4 (1f1b) with ZeRO stage 0 is not compiled in "
        "this program; it has tensor degrees 1, 2 and 4, pipeline degrees 1 and 2 (gpipe or "
        "1f1b), ZeRO stages 0 to 3, any data degree");
  CHECK(refusal({{0, 1, 1, 4, false}, ""}, {4, ""}) ==
        "zero4: degrees are at least 1 and the ZeRO stage is 0, 1, 2 or 3");
  CHECK(refusal({{0, 8, 1, 0, false}, ""}, {8, ""}, SeqGPT560M::config)
            .starts_with("tp8dp: tensor 8 x pipeline 1 with ZeRO stage 0 is not compiled"));
  // One stage has nothing to schedule: gpipe over one stage is the one-stage layout.
  CHECK(resolve_plan({{0, 2, 1, 0, true}, ""}, {2, ""}, Tiny::config, StandardPlans::layouts()) ==
        PlanDesc{1, 2, 1, 0, false});
}

TEST_CASE("check_plan: one decision for the world, the model and the compiled layouts") {
  const auto compiled = StandardPlans::layouts();
  const auto broken = [&](PlanDesc p, int world) {
    return check_plan(p, world, Tiny::config, &compiled).broken;
  };
  CHECK(broken({0, 2, 1, 0, false}, 8) == PlanRule::none);
  CHECK(check_plan({0, 2, 1, 0, false}, 8, Tiny::config, &compiled).layout ==
        PlanDesc{4, 2, 1, 0, false});
  CHECK(broken({0, 0, 1, 0, false}, 8) == PlanRule::degrees);
  CHECK(broken({2, 2, 1, 0, false}, 8) == PlanRule::world_size);
  CHECK(broken({0, 2, 2, 0, false}, 6) == PlanRule::world_multiple);
  CHECK(broken({0, 8, 1, 0, false}, 8) == PlanRule::heads);
  CHECK(broken({0, 1, 4, 0, false}, 4) == PlanRule::layers);
  CHECK(check_plan({0, 1, 4, 0, false}, 4, SeqGPT560M::config, &compiled).broken ==
        PlanRule::not_compiled);
  CHECK(check_plan({0, 1, 4, 0, false}, 4, SeqGPT560M::config).ok());  // nothing compiled asked
  CHECK(layout_compiled({7, 2, 2, 1, true}, compiled));
  CHECK(!layout_compiled({1, 8, 1, 0, false}, compiled));
}

}  // namespace registry_test

// Tensor-split plans and their hybrids with data parallelism give the losses and final
// weights of Replicated<1>, in fp32 and in bf16 (against the fp32 run); their byte counts
// match the Megatron figures.
#include <doctest/doctest.h>

#include "../support/plans.hpp"

using namespace seqpar;
using test::Small;

TEST_CASE_TEMPLATE_DEFINE("tensor-split plan equals Replicated<1>", Plan, tensor_plans) {
  test::check_equivalent<Plan>(PlanTraits<Plan>::world_size);
}
TEST_CASE_TEMPLATE_INVOKE(tensor_plans, TP2, TP4, Hybrid<TP2, DP2>, Hybrid<DP2, TP2>,
                          Hybrid<TP2, Sharded<Zero3, 2>>, Hybrid<TP2, DP4>,
                          Hybrid<TP4, Sharded<Zero1, 2>>);

// The same plans in bf16, each named by the fp32 plan it stands for; a dynamic data degree
// serves several (one instantiation, not one a world size; ZeRO-1 over one data rank makes
// Replicated's step).
TEST_CASE("tensor-split plans in bf16 equal the fp32 Replicated<1> within bf16's bounds") {
  using test::check_equivalent;
  using TP2DP = Hybrid<TP2, Replicated<>>;
  using TP4Z1 = Hybrid<TP4, Sharded<Zero1>>;
  SUBCASE("TP2") { check_equivalent<TP2DP, Bf16Mixed>(2); }
  SUBCASE("TP4") { check_equivalent<TP4Z1, Bf16Mixed>(4); }
  SUBCASE("TP2 x DP2") { check_equivalent<TP2DP, Bf16Mixed>(4); }
  SUBCASE("DP2 x TP2") { check_equivalent<Hybrid<Replicated<>, TP2>, Bf16Mixed>(4); }
  SUBCASE("TP2 x ZeRO-3 over 2") { check_equivalent<Hybrid<TP2, Sharded<Zero3>>, Bf16Mixed>(4); }
  SUBCASE("TP2 x DP4") { check_equivalent<TP2DP, Bf16Mixed>(8); }
  SUBCASE("TP4 x ZeRO-1 over 2") { check_equivalent<TP4Z1, Bf16Mixed>(8); }
}

TEST_CASE_TEMPLATE_DEFINE(
    "recomputed attention probabilities give the same bits on every rank (TP2 x PP2)", Plan,
    recompute_plans) {
  // Tensor ranks hold different heads (their ALiBi slopes start at head0); four
  // micro-batches keep several records in flight on the first stage (all four under GPipe).
  auto o = test::plan_options();
  const auto kept = test::run_plan_threads<Plan>(4, 3, o);
  o.recompute = Recompute::selective;
  const auto remade = test::run_plan_threads<Plan>(4, 3, o);
  for (std::size_t r = 0; r < kept.size(); ++r) {
    CAPTURE(r);
    CHECK(remade[r] == kept[r]);
  }
}
TEST_CASE_TEMPLATE_INVOKE(recompute_plans, Hybrid<TP2, PP2>, Hybrid<TP2, Pipeline<2, GPipe>>);

TEST_CASE("hybrid world sizes are compile-time constants") {
  static_assert(Trainer<SeqGPT560M, Hybrid<TP2, DP4>>::world_size == 8);
  static_assert(Trainer<Small, Hybrid<TP2, Sharded<Zero3>>>::world_size == 0);
  static_assert(PlanTraits<Hybrid<TP4, DP2>>::tensor_degree == 4);
}

TEST_CASE("tensor split: parameter bytes per rank and bytes moved per step") {
  // Per rank: split tensors hold 1/N of their elements, replicated ones all of them.
  double split = 0, replicated = 0;
  for (const auto& u : bloom_units<Small>(1, 0))
    for (const auto& p : u.params)
      (p.split == Split::none ? replicated : split) += static_cast<double>(p.numel());
  std::mutex m;
  run_ranks(2, [&](ThreadComm& comm) {
    auto o = test::plan_options();
    o.micro_batch_rows = 0;
    Trainer<Small, TP2> t(comm, o);
    t.step(test::plan_batch(0));
    t.tensor_stats().reset();
    const auto st = t.step(test::plan_batch(1));
    // Bytes: per block 2 all-reduces forward and 2 backward of [N, H]; the embedding one
    // forward; the head 3 per-token reductions (max, sum, target) and dh; the norm.
    const auto b = test::plan_batch(1);
    const double N = static_cast<double>(b.rows * b.seq), H = Small::hidden;
    std::int64_t targets = 0;
    for (std::int64_t r = 0; r < b.rows; ++r)
      for (std::int64_t s = 0; s + 1 < b.seq; ++s)
        targets += b.labels[static_cast<std::size_t>(r * b.seq + s + 1)] != ignore_index;
    const double elems = 4.0 * Small::layers * N * H + N * H + 3.0 * targets + targets * H;
    const double ring = 2.0 * (2 - 1) / 2 * 4 * elems;  // all-reduce of S bytes: 2 (N-1)/N S
    std::lock_guard lock(m);
    CHECK(static_cast<double>(st.memory.peak_of(Memory::parameters)) ==
          doctest::Approx(4 * (split / 2 + replicated)).epsilon(0.01));
    CHECK(static_cast<double>(t.tensor_stats().total_bytes_sent()) ==
          doctest::Approx(ring).epsilon(0.01));
  });
}

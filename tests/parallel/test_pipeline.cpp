// Pipeline plans (both schedules) and their hybrids give the losses and final weights of
// Replicated<1>, in fp32 and in bf16 (against the fp32 run); 1F1B holds fewer activations
// on the first stage than GPipe; both schedules run over a transport whose sends wait for
// their receives.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "../comm/comm_test_util.hpp"
#include "../support/plans.hpp"

using namespace seqpar;
using test::Small;

TEST_CASE_TEMPLATE_DEFINE("pipeline plan equals Replicated<1>", Plan, pipeline_plans) {
  test::check_equivalent<Plan>(PlanTraits<Plan>::world_size);
}
TEST_CASE_TEMPLATE_INVOKE(pipeline_plans, PP2, PP4, Pipeline<2, GPipe>, Pipeline<4, GPipe>,
                          Hybrid<TP2, PP2>, Hybrid<TP2, PP2, DP2>, Hybrid<PP2, Sharded<Zero3, 2>>,
                          Hybrid<PP2, Sharded<Zero2, 2>>,
                          Hybrid<Pipeline<2, GPipe>, TP2, Sharded<Zero1, 2>>);

// The same plans in bf16, each named by the fp32 plan it stands for; a dynamic data degree
// serves several (one instantiation, not one a world size).
TEST_CASE("pipeline plans in bf16 equal the fp32 Replicated<1> within bf16's bounds") {
  using test::check_equivalent;
  using TP2PP2 = Hybrid<TP2, PP2, Replicated<>>;
  SUBCASE("PP2") { check_equivalent<Hybrid<PP2, Replicated<>>, Bf16Mixed>(2); }
  SUBCASE("PP4") { check_equivalent<PP4, Bf16Mixed>(4); }
  SUBCASE("Pipeline<2, GPipe>") {
    check_equivalent<Hybrid<Pipeline<2, GPipe>, Replicated<>>, Bf16Mixed>(2);
  }
  SUBCASE("Pipeline<4, GPipe>") { check_equivalent<Pipeline<4, GPipe>, Bf16Mixed>(4); }
  SUBCASE("TP2 x PP2") { check_equivalent<TP2PP2, Bf16Mixed>(4); }
  SUBCASE("TP2 x PP2 x DP2") { check_equivalent<TP2PP2, Bf16Mixed>(8); }
  SUBCASE("PP2 x ZeRO-3 over 2") { check_equivalent<Hybrid<PP2, Sharded<Zero3>>, Bf16Mixed>(4); }
  SUBCASE("PP2 x ZeRO-2 over 2") { check_equivalent<Hybrid<PP2, Sharded<Zero2>>, Bf16Mixed>(4); }
  SUBCASE("GPipe x TP2 x ZeRO-1 over 2") {
    check_equivalent<Hybrid<Pipeline<2, GPipe>, TP2, Sharded<Zero1>>, Bf16Mixed>(8);
  }
}

namespace {
template <class Plan>
std::int64_t first_stage_activation_peak() {
  std::int64_t peak = 0;
  run_ranks(PlanTraits<Plan>::world_size, [&](ThreadComm& comm) {
    auto o = test::plan_options();
    o.micro_batch_rows = 1;  // 8 micro-batches
    Trainer<Small, Plan> t(comm, o);
    const auto st = t.step(test::plan_batch(0));
    if (comm.rank() == 0) peak = st.memory.peak_of(Memory::activations);
  });
  return peak;
}
}  // namespace

TEST_CASE("1F1B keeps at most S micro-batches in flight on the first stage; GPipe keeps all") {
  const auto gpipe = first_stage_activation_peak<Pipeline<4, GPipe>>();
  const auto one_f_one_b = first_stage_activation_peak<Pipeline<4, OneFOneB>>();
  CHECK(one_f_one_b < gpipe);
  // 8 micro-batches of equal size: GPipe holds 8 records, 1F1B 4.
  CHECK(static_cast<double>(gpipe) / static_cast<double>(one_f_one_b) ==
        doctest::Approx(2.0).epsilon(0.1));
}

TEST_CASE("pipeline: parameter bytes per stage and bytes moved between stages") {
  std::mutex m;
  run_ranks(2, [&](ThreadComm& comm) {
    auto o = test::plan_options();
    o.micro_batch_rows = 2;  // 4 micro-batches
    Trainer<Small, PP2> t(comm, o);
    t.step(test::plan_batch(0));
    auto& stats = const_cast<CommStats&>(t.mesh().pipeline.stats());
    stats.reset();
    const auto st = t.step(test::plan_batch(1));
    // Stage 0: the embedding and 2 blocks; stage 1: 2 blocks, ln_f and its copy of the tied table.
    const auto units = bloom_units<Small>();
    double expect = static_cast<double>(units[0].numel);
    for (int l = 0; l < 2; ++l)
      expect += static_cast<double>(units[static_cast<std::size_t>(1 + l + 2 * comm.rank())].numel);
    if (comm.rank() == 1) expect += static_cast<double>(units.back().numel);
    // Each of 4 micro-batches sends [2 x 12, 32] floats one way (activations or their gradients);
    // the tied embedding's gradient crosses once; the loss and the norm are all-reduced.
    const double act = 4 * 2 * 12 * 32 * 4.0, tied = static_cast<double>(units[0].numel) * 4;
    std::lock_guard lock(m);
    CHECK(static_cast<double>(st.memory.peak_of(Memory::parameters)) ==
          doctest::Approx(4 * expect).epsilon(0.001));
    CHECK(static_cast<double>(stats[CollectiveKind::send].bytes_sent) ==
          doctest::Approx(act + tied));
  });
}

namespace {
// ThreadComm with a send that returns only once the receiver has the message, as NCCL's
// does: the receiver acknowledges each message (tag 32100). sendrecv posts both halves
// before it waits, as an NCCL group does. A schedule that relies on buffered sends hangs.
class RendezvousComm {
 public:
  explicit RendezvousComm(ThreadComm c) : c_(std::move(c)) {}
  int rank() const { return c_.rank(); }
  int size() const { return c_.size(); }
  CommStats& stats() { return c_.stats(); }
  const CommStats& stats() const { return c_.stats(); }
  void barrier() { c_.barrier(); }
  RendezvousComm split(int color, int key) { return RendezvousComm(c_.split(color, key)); }
  template <CommElement T>
  void all_reduce(T* d, std::size_t n, ReduceOp op) {
    c_.all_reduce(d, n, op);
  }
  template <CommElement T>
  void reduce_scatter(const T* in, T* out, std::size_t n, ReduceOp op) {
    c_.reduce_scatter(in, out, n, op);
  }
  template <CommElement T>
  void all_gather(const T* in, T* out, std::size_t n) {
    c_.all_gather(in, out, n);
  }
  template <CommElement T>
  void broadcast(T* d, std::size_t n, int root) {
    c_.broadcast(d, n, root);
  }
  template <CommElement T>
  void send(const T* d, std::size_t n, int peer, int tag) {
    c_.send(d, n, peer, tag);
    wait_ack(peer);
  }
  template <CommElement T>
  void recv(T* d, std::size_t n, int peer, int tag) {
    c_.recv(d, n, peer, tag);
    ack(peer);
  }
  template <CommElement T>
  void sendrecv(const T* s, std::size_t sn, int st, T* r, std::size_t rn, int rt, int peer) {
    c_.send(s, sn, peer, st);
    c_.recv(r, rn, peer, rt);
    ack(peer);
    wait_ack(peer);
  }

 private:
  static constexpr int ack_tag = 32100;
  void ack(int peer) {
    const std::int64_t one = 1;
    c_.send(&one, 1, peer, ack_tag);
  }
  void wait_ack(int peer) {
    std::int64_t got = 0;
    c_.recv(&got, 1, peer, ack_tag);
  }
  ThreadComm c_;
};
static_assert(Communicator<RendezvousComm>);

template <class Plan, class Comm>
std::vector<double> pipeline_losses() {
  std::vector<double> losses;
  run_ranks(PlanTraits<Plan>::world_size, [&](ThreadComm& comm) {
    auto o = test::plan_options();
    o.micro_batch_rows = 1;  // 8 micro-batches: 1F1B's steady state exchanges in both directions
    Trainer<Small, Plan> t(Comm(comm), o);
    std::vector<double> mine;
    for (int s = 0; s < 2; ++s) mine.push_back(t.step(test::plan_batch(s)).loss);
    if (comm.rank() == 0) losses = mine;
  });
  return losses;
}
}  // namespace

TEST_CASE_TEMPLATE("pipeline schedules run where a send waits for its receive (as NCCL's)", Plan,
                   Pipeline<2, OneFOneB>, Pipeline<4, OneFOneB>, Pipeline<4, GPipe>,
                   Hybrid<TP2, Pipeline<2>>) {
  const auto buffered = pipeline_losses<Plan, ThreadComm>();
  std::vector<double> rendezvous;
  // A deadlock cannot be unwound: past the limit the test program stops with a message.
  comm_test::timed_within(std::chrono::seconds(120),
                          [&] { rendezvous = pipeline_losses<Plan, RendezvousComm>(); });
  CHECK(rendezvous == buffered);
}

TEST_CASE_TEMPLATE(
    "hybrid plans whose async collectives run only when joined match ThreadComm exactly", Plan,
    Hybrid<PP2, Sharded<Zero3, 2>>, Hybrid<TP2, PP2, DP2>) {
  test::DeferredComm<ThreadComm>::Counts calls;
  comm_test::timed_within(std::chrono::seconds(120),
                          [&] { calls = test::check_over_deferred_comm<Plan>(); });
  CHECK(calls.all_reduce + calls.reduce_scatter > 0);
  CHECK((calls.all_gather > 0) == (PlanTraits<Plan>::zero_stage == 3));
}

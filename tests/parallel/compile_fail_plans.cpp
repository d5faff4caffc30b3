// Plans that cannot work must not compile. Built once per RULE by
// tests/parallel/CMakeLists.txt, each expecting its own message.
#include "seqpar/comm/thread_comm.hpp"
#include "seqpar/train/trainer.hpp"

using namespace seqpar;
using M = Bloom<BloomConfig{.vocab_size = 64, .hidden = 48, .layers = 4, .heads = 4}>;

int main() {
#if RULE == 1  // 4 heads over 3 tensor ranks
  Trainer<M, TensorSplit<3>> t(ThreadComm{}, TrainOptions{});
#elif RULE == 2  // 4 layers over 3 stages
  Trainer<M, Pipeline<3>> t(ThreadComm{}, TrainOptions{});
#elif RULE == 3
  Trainer<M, Hybrid<TP2, TP4>> t(ThreadComm{}, TrainOptions{});
#elif RULE == 4
  Trainer<M, Hybrid<DP2, Sharded<Zero1, 2>>> t(ThreadComm{}, TrainOptions{});
#elif RULE == 5
  Trainer<M, Hybrid<PP2, TP2, Pipeline<2, GPipe>>> t(ThreadComm{}, TrainOptions{});
#elif RULE == 6
  Trainer<M, Hybrid<Sharded<Zero3>, TensorSplit<dynamic>>> t(ThreadComm{}, TrainOptions{});
#elif RULE == 7
  Trainer<M, TensorSplit<dynamic>> t(ThreadComm{}, TrainOptions{});
#elif RULE == 8
  Trainer<M, Hybrid<DP2, int>> t(ThreadComm{}, TrainOptions{});
#elif RULE == 9  // a multi-rank plan needs a communicator
  Trainer<M, DP2> t(TrainOptions{});
#elif RULE == 10
  using Bad = Bloom<BloomConfig{.vocab_size = 64, .hidden = 50, .layers = 2, .heads = 4}>;
  Trainer<Bad, Replicated<1>> t;
#elif RULE == 11
  Trainer<M, Pipeline<2, int>> t(ThreadComm{}, TrainOptions{});
#elif RULE == 12
  Trainer<M, Pipeline<dynamic>> t(ThreadComm{}, TrainOptions{});
#elif RULE == 13  // a data axis for a policy that is not a data policy
  static_assert(sizeof(DataAxis<TensorSplit<2>, BloomStack<M, Cpu, float>, Cpu, float>) > 0);
#elif RULE == 14  // a data axis over something that is not a stack of units
  static_assert(sizeof(DataAxis<Replicated<2>, int, Cpu, float>) > 0);
#elif RULE == 15  // a stack whose tensor axis has no sum or max hooks
  static_assert(sizeof(BloomStack<M, Cpu, float, int>) > 0);
#endif
  return 0;
}

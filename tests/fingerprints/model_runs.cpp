// The model's axes and modes: tensor and pipeline splits (GPipe, 1F1B), hybrids,
// recomputation, fused attention.
#include "fingerprint.hpp"

namespace seqpar::fingerprint {

void model_runs(Record& rec) {
  const TrainOptions o = options();
  run<Small, TP2>(rec, "TP2", o);
  run<Small, TP4>(rec, "TP4", o);
  run<Small, Pipeline<2, GPipe>>(rec, "PP2 GPipe", o);
  run<Small, PP2>(rec, "PP2 1F1B", o);
  run<Small, PP4>(rec, "PP4 1F1B", o);
  run<Small, Hybrid<TP2, PP2>>(rec, "TP2 PP2", o);
  run<Small, Hybrid<TP2, Sharded<Zero3, 2>>>(rec, "TP2 ZeRO-3 x2", o);
  run<Small, Hybrid<TP2, PP2, DP2>>(rec, "TP2 PP2 DP2", o);
  run<Small, Hybrid<Sharded<Zero1, 2>, Pipeline<2, GPipe>>>(rec, "ZeRO-1 x2 PP2 GPipe", o);
  run<Small, Hybrid<Sharded<Zero3, 2>, PP2>>(rec, "ZeRO-3 x2 PP2", o);

  for (const auto& [mode, every, label] :
       {std::tuple{Recompute::selective, 1, "selective"}, std::tuple{Recompute::full, 1, "full"},
        std::tuple{Recompute::full, 2, "full every 2"}}) {
    TrainOptions r = o;
    r.recompute = mode;
    r.recompute_every = every;
    const std::string s = std::string(" recompute ") + label;
    run<Small, Replicated<1>>(rec, "Replicated<1>" + s, r);
    run<Small, Hybrid<TP2, PP2>>(rec, "TP2 PP2" + s, r);
    run<Small, Sharded<Zero3, 2>>(rec, "ZeRO-3 x2" + s, r);
  }
  TrainOptions fused = o;
  fused.attention = AttentionKind::fused;
  run<Small, Replicated<1>>(rec, "Replicated<1> fused", fused);
  run<Small, Hybrid<TP2, PP2>>(rec, "TP2 PP2 fused", fused);
  fused.recompute = Recompute::full;
  run<Small, Sharded<Zero3, 2>>(rec, "ZeRO-3 x2 fused recompute full", fused);
}

}  // namespace seqpar::fingerprint

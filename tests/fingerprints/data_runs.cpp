// The data axis: replicated, ZeRO-1/2/3, offloaded, and over a communicator whose async
// collectives run only when joined (reductions in flight, gathers ahead, pending downloads).
#include "fingerprint.hpp"

namespace seqpar::fingerprint {

void data_runs(Record& rec) {
  const TrainOptions o = options();
  run<Small, Replicated<1>>(rec, "Replicated<1>", o);
  run<Small, Replicated<2>>(rec, "Replicated<2>", o);
  run<Small, Sharded<Zero1, 2>>(rec, "ZeRO-1 x2", o);
  run<Small, Sharded<Zero2, 2>>(rec, "ZeRO-2 x2", o);
  run<Small, Sharded<Zero3, 2>>(rec, "ZeRO-3 x2", o);
  run<Small, Sharded<Zero3, 4>>(rec, "ZeRO-3 x4", o);
  run<Small, Sharded<Zero2, 1>>(rec, "ZeRO-2 x1", o);
  run<Small, Sharded<Zero3, 1>>(rec, "ZeRO-3 x1", o);

  TrainOptions off = o;
  off.offload = Offload::optimizer;
  run<Small, Replicated<1>>(rec, "Replicated<1> offload", off);
  run<Small, Replicated<2>>(rec, "Replicated<2> offload", off);
  run<Small, Sharded<Zero1, 2>>(rec, "ZeRO-1 x2 offload", off);
  run<Small, Sharded<Zero2, 2>>(rec, "ZeRO-2 x2 offload", off);
  run<Small, Sharded<Zero3, 2>>(rec, "ZeRO-3 x2 offload", off);
  run<Small, Hybrid<Sharded<Zero2, 2>, PP2>>(rec, "ZeRO-2 x2 PP2 offload", off);
  TrainOptions off_params = o;
  off_params.offload = Offload::optimizer_and_params;
  run<Small, Sharded<Zero3, 2>>(rec, "ZeRO-3 x2 offload params", off_params);
  run<Small, Hybrid<Sharded<Zero3, 2>, PP2>>(rec, "ZeRO-3 x2 PP2 offload params", off_params);

  constexpr bool deferred = true;
  run<Small, Replicated<2>>(rec, "deferred Replicated<2>", o, {}, deferred);
  run<Small, Sharded<Zero1, 2>>(rec, "deferred ZeRO-1 x2", o, {}, deferred);
  run<Small, Sharded<Zero2, 2>>(rec, "deferred ZeRO-2 x2", o, {}, deferred);
  run<Small, Sharded<Zero3, 2>>(rec, "deferred ZeRO-3 x2", o, {}, deferred);
  run<Small, Replicated<2>>(rec, "deferred Replicated<2> offload", off, {}, deferred);
  run<Small, Sharded<Zero1, 2>>(rec, "deferred ZeRO-1 x2 offload", off, {}, deferred);
  run<Small, Sharded<Zero2, 2>>(rec, "deferred ZeRO-2 x2 offload", off, {}, deferred);
  run<Small, Hybrid<Sharded<Zero2, 2>, PP2>>(rec, "deferred ZeRO-2 x2 PP2 offload", off, {},
                                             deferred);
  run<Small, Sharded<Zero3, 2>>(rec, "deferred ZeRO-3 x2 offload params", off_params, {}, deferred);
  run<Small, Hybrid<Sharded<Zero3, 2>, PP2>>(rec, "deferred ZeRO-3 x2 PP2 offload params",
                                             off_params, {}, deferred);
}

}  // namespace seqpar::fingerprint

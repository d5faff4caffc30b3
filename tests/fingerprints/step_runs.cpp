// The step around the model: loss scaling (skipped steps, unscaling, clipping), learning-rate
// schedules, fp64, checkpoints resumed under another plan, gradients without a step, and
// decoding.
#include "fingerprint.hpp"

namespace seqpar::fingerprint {

void step_runs(Record& rec) {
  const TrainOptions o = options();
  run<Small, Replicated<1>, Fp64>(rec, "Replicated<1> fp64", o);
  run<Small, Hybrid<TP2, PP2>, Fp64>(rec, "TP2 PP2 fp64", o);
  run<Small, Sharded<Zero3, 2>, Fp64>(rec, "ZeRO-3 x2 fp64", o);

  // A dynamic scale that starts too high: overflows, halvings, then clean steps and growth.
  TrainOptions scaled = o;
  scaled.loss_scale.enabled = true;
  scaled.loss_scale.initial_scale_power = 127;
  scaled.loss_scale.hysteresis = 1;
  scaled.loss_scale.loss_scale_window = 2;
  RunSpec six;
  six.steps = 6;
  run<Small, Replicated<1>>(rec, "Replicated<1> dynamic scale", scaled, six);
  run<Small, Sharded<Zero2, 2>>(rec, "ZeRO-2 x2 dynamic scale", scaled, six);
  scaled.offload = Offload::optimizer;
  run<Small, Sharded<Zero3, 2>>(rec, "ZeRO-3 x2 dynamic scale offload", scaled, six);
  TrainOptions fixed = o;
  fixed.loss_scale.enabled = true;
  fixed.loss_scale.loss_scale = 1024;
  run<Small, Replicated<1>>(rec, "Replicated<1> static scale", fixed);
  fixed.max_grad_norm = 0;
  run<Small, Replicated<1>>(rec, "Replicated<1> static scale no clip", fixed);
  fixed.max_grad_norm = 100;
  run<Small, Replicated<1>>(rec, "Replicated<1> static scale clip inactive", fixed);
  TrainOptions unclipped = o;
  unclipped.max_grad_norm = 0;
  run<Small, Replicated<1>>(rec, "Replicated<1> no clip", unclipped);

  TrainOptions cosine = o;
  cosine.schedule.decay = LrDecay::cosine;
  cosine.schedule.warmup_shape = LrWarmup::log;
  cosine.schedule.warmup = 3;
  cosine.schedule.total = 5;
  cosine.schedule.min_ratio = 1e-4 / cosine.schedule.peak;
  run<Small, Replicated<1>>(rec, "Replicated<1> cosine log warmup", cosine, six);
  TrainOptions constant = o;
  constant.schedule.decay = LrDecay::constant;
  run<Small, Replicated<1>>(rec, "Replicated<1> constant rate", constant, six);

  // Saved under ZeRO-3 over 2 ranks (run_rank saves every run), resumed elsewhere.
  run<Small, Sharded<Zero3, 2>>(rec, "checkpoint ZeRO-3 x2", o);
  RunSpec resume;
  resume.steps = 2;
  resume.load = rec.file("checkpoint ZeRO-3 x2");
  run<Small, Replicated<1>>(rec, "resumed Replicated<1>", o, resume);
  run<Small, Hybrid<TP2, PP2>>(rec, "resumed TP2 PP2", o, resume);
  TrainOptions resumed_off = o;
  resumed_off.offload = Offload::optimizer_and_params;
  run<Small, Sharded<Zero3, 2>>(rec, "resumed ZeRO-3 x2 offload params", resumed_off, resume);

  RunSpec grads;
  grads.steps = 1;
  grads.gradients = true;
  run<Small, Replicated<1>>(rec, "gradients Replicated<1>", o, grads);
  run<Small, TP2>(rec, "gradients TP2", o, grads);

  run_generation<Replicated<1>>(rec, "decode Replicated<1>", AttentionKind::standard);
  run_generation<Replicated<1>>(rec, "decode Replicated<1> fused", AttentionKind::fused);
  run_generation<TP2>(rec, "decode TP2", AttentionKind::standard);
}

}  // namespace seqpar::fingerprint

// The CPU side of test_trainer.cu.
#include "trainer_reference.hpp"

#include "seqpar/backend/cpu/ops.hpp"
#include "seqpar/nn/generate.hpp"

namespace seqpar::test {

TrainRun cpu_train_run(int steps) {
  Trainer<TrainTiny, Replicated<1>, Cpu, Fp32> t(trainer_options());
  TrainRun r;
  t.for_each_param([&](const ParamSpec& p, float* v, float*) {
    r.initial_weights[p.name].assign(v, v + p.numel());
  });
  for (int s = 0; s < steps; ++s) {
    const auto st = t.step(trainer_batch(s));
    r.losses.push_back(st.loss);
    r.norms.push_back(st.grad_norm);
  }
  t.for_each_param(
      [&](const ParamSpec& p, float* v, float*) { r.weights[p.name].assign(v, v + p.numel()); });
  r.logits = t.logits(trainer_batch(0));
  return r;
}

namespace {
// fn(trainer) on a Cpu trainer whose initial weights a load will overwrite.
template <class F>
auto with_cpu_trainer(F&& fn) {
  TrainOptions o = trainer_options();
  o.seed = 1;  // overwritten by the load
  Trainer<TrainTiny, Replicated<1>, Cpu, Fp32> t(o);
  return fn(t);
}
}  // namespace

double cpu_evaluate_file(const std::string& path, int step) {
  return with_cpu_trainer([&](auto& t) {
    t.load_weights(path);
    return t.evaluate(trainer_batch(step));
  });
}

StepStats cpu_resume_step(const std::string& checkpoint, int step) {
  return with_cpu_trainer([&](auto& t) {
    t.load_checkpoint(checkpoint);
    return t.step(trainer_batch(step));
  });
}

std::vector<StepStats> cpu_steps_saving(const std::string& checkpoint, int steps, int save_after) {
  Trainer<TrainTiny, Replicated<1>, Cpu, Fp32> t(trainer_options());
  std::vector<StepStats> stats;
  for (int s = 0; s < steps; ++s) {
    if (s == save_after) t.save_checkpoint(checkpoint);
    stats.push_back(t.step(trainer_batch(s)));
  }
  return stats;
}

std::vector<std::vector<std::int32_t>> cpu_greedy_tokens(std::int64_t prompt,
                                                         std::int64_t max_new) {
  Trainer<TrainTiny, Replicated<1>, Cpu, Fp32> t(generation_options());
  GenerateOptions o;
  o.max_new_tokens = max_new;
  o.eos_id = -1;
  return greedy_generate(t.model(), generation_batch(prompt).view(), o).tokens;
}

Generated cpu_beam_search(std::int64_t prompt, std::int64_t max_new, std::int64_t beams,
                          double penalty) {
  Trainer<TrainTiny, Replicated<1>, Cpu, Fp32> t(generation_options());
  GenerateOptions o;
  o.max_new_tokens = max_new;
  o.eos_id = 60;
  o.num_beams = beams;
  o.repetition_penalty = penalty;
  return generate(t.model(), generation_batch(prompt).view(), o);
}

}  // namespace seqpar::test

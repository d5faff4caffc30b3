// seqgpt_ner --device cpu: the training loop, evaluation and prediction (run.hpp), compiled
// once for both models and every plan; a model's own code (its services, and its trainers
// under each family of plans) is in units of its own (CMakeLists.txt, model_unit.cpp.in).
#include "run.hpp"

int ner::run_cpu(const Options& o, const Launch& launch) {
  using seqpar::Cpu, seqpar::Fp32;
  return o.model == "tiny" ? run_model<TinyNer, Cpu, Fp32, CpuFamilies>(o, launch)
                           : run_model<seqpar::SeqGPT560M, Cpu, Fp32, CpuFamilies>(o, launch);
}

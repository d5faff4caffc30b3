// seqgpt_ner --device cuda: the training loop, evaluation and prediction (run.hpp) on Cuda,
// in the precision --precision names, for both models and the plans of CudaPlans. A model's
// own code (its services, and its trainers in each precision) is in units of its own
// (CMakeLists.txt, model_unit.cpp.in).
#include "cuda_run.hpp"
#include "device_launch.hpp"
#include "models.hpp"
#include "run.hpp"

namespace ner {
namespace {

/// Model M on Cuda in Fp32, Bf16Mixed or Fp16Mixed (dynamic loss scaling, LossScaleOptions
/// from --deepspeed's fp16 block).
template <seqpar::BloomModel M>
int run_cuda_model(const Options& o, const Launch& launch) {
  if (o.precision == "bf16")
    return run_model<M, seqpar::Cuda, seqpar::Bf16Mixed, FamilyList<CudaPlans>>(o, launch);
  if (o.precision == "fp16")
    return run_model<M, seqpar::Cuda, seqpar::Fp16Mixed, FamilyList<CudaPlans>>(o, launch);
  SEQPAR_CHECK(o.precision == "fp32", "--precision '", o.precision,
               "': expected fp32, bf16 or fp16");
  return run_model<M, seqpar::Cuda, seqpar::Fp32, FamilyList<CudaPlans>>(o, launch);
}

}  // namespace

int run_cuda(const Options& o, const Launch& launch) {
  return o.model == "tiny" ? run_cuda_model<TinyNer>(o, launch)
                           : run_cuda_model<seqpar::SeqGPT560M>(o, launch);
}

}  // namespace ner

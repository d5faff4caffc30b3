// What cuda_tiny.cu and cuda_seqgpt560m.cu instantiate: run.hpp's training, evaluation and
// prediction on Cuda for the plans of CudaPlans, in each precision, with the model's stack
// and trainers (model_parts.hpp). Compiled only by nvcc.
#pragma once

#if !defined(__CUDACC__)
#error "cuda_model.cuh is for the CUDA units (nvcc); include cuda_run.hpp for their entry points"
#endif

#include "cuda_run.hpp"
#include "device_launch.hpp"
#include "model_parts.hpp"
#include "run.hpp"

namespace ner {

/// Model M on Cuda in the precision --precision names: Fp32, Bf16Mixed, or Fp16Mixed
/// (dynamic loss scaling, LossScaleOptions from --deepspeed's fp16 block).
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

}  // namespace ner

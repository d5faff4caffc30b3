// seqgpt_ner --device cuda with SeqGPT-560M: training under the plans of CudaPlans in fp32,
// bf16 and fp16, evaluation and prediction on the GPU (cuda_run.hpp).
#include "cuda_model.cuh"
#include "models.hpp"

int ner::run_cuda_seqgpt560m(const Options& o, const Launch& launch) {
  return run_cuda_model<seqpar::SeqGPT560M>(o, launch);
}

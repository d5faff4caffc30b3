// seqgpt_ner with SeqGPT-560M (fine-tuning the published weights: --weights, --tokenizer):
// evaluation, prediction and what training asks of the model under every plan
// (ModelServices); the plans themselves: train_plans.cpp.
#include "models.hpp"
#include "run.hpp"

int ner::run_seqgpt560m(const Options& o, const Launch& launch) {
  return run_model<seqpar::SeqGPT560M>(o, launch);
}

template struct ner::ModelServices<seqpar::SeqGPT560M>;

// seqgpt_ner with SeqGPT-560M (fine-tuning the published weights: --weights, --tokenizer):
// training under every plan of plans.hpp, evaluation and prediction, in one translation
// unit (as tiny.cpp).
#include "models.hpp"
#include "run.hpp"

int ner::run_seqgpt560m(const Options& o, const Launch& launch) {
  return run_model<seqpar::SeqGPT560M>(o, launch);
}

template struct ner::ModelServices<seqpar::SeqGPT560M>;

// seqgpt_ner with SeqGPT-560M (fine-tuning the published weights: --weights, --tokenizer).
#include "models.hpp"
#include "run.hpp"

int ner::run_seqgpt560m(const Options& o) { return run_model<seqpar::SeqGPT560M>(o); }

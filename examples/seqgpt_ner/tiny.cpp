// seqgpt_ner with the tiny model: evaluation, prediction and what training asks of the model
// under every plan (ModelServices); the plans themselves: train_plans.cpp.
#include "models.hpp"
#include "run.hpp"

int ner::run_tiny(const Options& o, const Launch& launch) { return run_model<TinyNer>(o, launch); }

template struct ner::ModelServices<ner::TinyNer>;

// seqgpt_ner with the tiny model: training under every plan of plans.hpp, evaluation and
// prediction. One translation unit per model: most of a Trainer's cost (the stack, the data
// axis, communicators, checkpoints) does not depend on the plan and is paid once here.
#include "models.hpp"
#include "run.hpp"

int ner::run_tiny(const Options& o, const Launch& launch) { return run_model<TinyNer>(o, launch); }

template struct ner::ModelServices<ner::TinyNer>;

// seqgpt_ner with the tiny model.
#include "models.hpp"
#include "run.hpp"

int ner::run_tiny(const Options& o) { return run_model<TinyNer>(o); }

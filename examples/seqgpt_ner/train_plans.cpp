// Training of one model under one family of plans, compiled once per (model, family) pair
// by CMakeLists.txt, which names them: SEQPAR_NER_MODEL (TinyNer, seqpar::SeqGPT560M) and
// SEQPAR_NER_FAMILY (a PlanFamily of plans.hpp). The pairs build in parallel, each in
// well under half a minute.
#include "models.hpp"
#include "plans.hpp"
#include "run.hpp"

#if !defined(SEQPAR_NER_MODEL) || !defined(SEQPAR_NER_FAMILY)
#error "train_plans.cpp is compiled with -DSEQPAR_NER_MODEL=<model> -DSEQPAR_NER_FAMILY=<family>"
#endif

namespace ner {

// What no plan changes is compiled once per model, in its own translation unit.
extern template struct ModelServices<SEQPAR_NER_MODEL>;

template <class M, class Family>
int TrainFamily<M, Family>::train(std::string_view plan, const Options& o, const Launch& launch) {
  int rc = -1;
  const bool known =
      Family::with(plan, [&](auto p) { rc = train_ner<M, typename decltype(p)::type>(o, launch); });
  SEQPAR_CHECK(known, "--plan '", plan, "' is not a plan of the ", Family::name, " family");
  return rc;
}

template struct TrainFamily<SEQPAR_NER_MODEL, SEQPAR_NER_FAMILY>;

}  // namespace ner

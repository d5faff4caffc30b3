// seqgpt_ner: SeqGPT-style Chinese named-entity recognition with seqpar.
//
//   seqgpt_ner                      train a tiny BLOOM from scratch on the bundled corpus
//                                   on 2 in-process ranks and print its dev F1
//   seqgpt_ner --data-dir ../shared/data/cluener --plan zero2x2
//   seqgpt_ner --weights SeqGPT-560M/pytorch_model.bin --tokenizer SeqGPT-560M/tokenizer.json
//              --data-dir cluener --plan single --lr 2e-5 --epochs 3
//   seqgpt_ner eval  [--out DIR]    dev F1 of the trained weights
//   seqgpt_ner predict --text "..." answers and entities as JSON lines
//
// docs/ner.md describes the prompt and answer format, the data and the options.
#include <cstdio>
#include <exception>
#include <stdexcept>

#include "data.hpp"
#include "deepspeed_config.hpp"
#include "models.hpp"
#include "options.hpp"
#include "plans.hpp"
#include "seqpar/core/error.hpp"

int main(int argc, char** argv) {
  ner::Options o;
  try {
    o = ner::parse_options(argc, argv);
  } catch (const std::invalid_argument& e) {
    if (e.what()[0] != '\0') std::fprintf(stderr, "seqgpt_ner: %s\n\n", e.what());
    std::fputs(ner::usage(), e.what()[0] != '\0' ? stderr : stdout);
    return e.what()[0] != '\0' ? 2 : 0;
  }
  try {
    if (!o.deepspeed.empty()) {
      SEQPAR_CHECK(o.command == "train", "--deepspeed configures training; ", o.command,
                   " takes no DeepSpeed configuration");
      for (const auto& line : ner::apply_deepspeed_file(o, ner::in_process_ranks).lines())
        std::printf("%s\n", line.c_str());
    }
    ner::check_precision_device(o, "cpu");
    if (o.command == "train" && !ner::with_plan(o.plan, [](auto) {})) {
      std::fprintf(stderr, "seqgpt_ner: --plan '%s' is not one of: %s\n", o.plan.c_str(),
                   ner::plan_list());
      return 2;
    }
    o.model = ner::resolve_model(o);
    return o.model == "tiny" ? ner::run_tiny(o) : ner::run_seqgpt560m(o);
  } catch (const seqpar::Error& e) {
    std::fprintf(stderr, "seqgpt_ner: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "seqgpt_ner: unexpected error: %s\n", e.what());
    return 1;
  }
}

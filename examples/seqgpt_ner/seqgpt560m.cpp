// seqgpt_ner --device cpu with SeqGPT-560M: its services (the stack, decoding, weight files) and
// its trainers under every plan of plans.hpp, for commands.cpp. One unit per model: most of
// what a trainer compiles (the stack, the data axis, checkpoints) is the same for every plan
// and is paid once here (docs/ner.md#build).
#include "model_parts.hpp"
#include "models.hpp"

namespace ner {

template std::unique_ptr<NerModel<Cpu>> make_ner_model<SeqGPT560M, Cpu>();
template std::optional<PlanRun<Cpu>> family_plan<SeqGPT560M, DataPlans, Cpu, Fp32>(
    std::string_view);
template std::optional<PlanRun<Cpu>> family_plan<SeqGPT560M, SplitPlans, Cpu, Fp32>(
    std::string_view);

}  // namespace ner

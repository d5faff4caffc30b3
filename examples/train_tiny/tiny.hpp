#pragma once
// The model train_tiny trains and the plans it compiles: tensor degree 1 or 2, every ZeRO
// stage, any data degree. Each tensor degree's trainers are instantiated in a unit of their
// own (trainers_tp1.cpp, trainers_tp2.cpp), so that the two build in parallel.
#include <filesystem>

#include "seqpar/seqpar.hpp"

using Tiny =
    seqpar::Bloom<seqpar::BloomConfig{.vocab_size = 512, .hidden = 128, .layers = 4, .heads = 4}>;
template <int Tensor>
using TinyPlans = seqpar::PlanSet<seqpar::PlanFamily<seqpar::Degrees<Tensor>, seqpar::Degrees<1>>>;

// The trainers of tensor degree `Tensor`, in fp32 (an explicit instantiation's declarator).
#define TINY_TRAINERS(Tensor)                                                                   \
  seqpar::AnyTrainer                                                                            \
  seqpar::make_trainer<Tiny, seqpar::Cpu, seqpar::Precisions<seqpar::Fp32>, TinyPlans<Tensor>>( \
      const seqpar::PlanDesc&, std::string_view, seqpar::AnyComm, const seqpar::TrainOptions&)
extern template TINY_TRAINERS(1);
extern template TINY_TRAINERS(2);

/// One rank's run (run.cpp): `steps` steps of `layout` on `ranks` ranks into `out`, resumed
/// there when `resume`.
void train_rank(seqpar::AnyComm world, const seqpar::PlanDesc& layout, int ranks,
                const seqpar::TrainOptions& o, const std::filesystem::path& out, int steps,
                bool resume);

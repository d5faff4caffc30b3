// libFuzzer target: a training checkpoint resumed by a tiny trainer — the safetensors
// image, the model metadata (check_model_metadata), the step, every weight and AdamW
// moment found by name and converted from its dtype, and the data position the example
// stores beside them (DataPosition::from_metadata).
//
// SEQPAR_FUZZ_WRITE_SEED=<path> makes the target write a valid checkpoint of its model
// to <path> at start-up (how tests/fuzz/corpus/checkpoint/ was made).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "fuzz_util.hpp"
#include "seqpar/backend/cpu/ops.hpp"
#include "seqpar/data/batching.hpp"
#include "seqpar/train/trainer.hpp"

namespace {
using Tiny =
    seqpar::Bloom<seqpar::BloomConfig{.vocab_size = 12, .hidden = 8, .layers = 1, .heads = 2}>;
using TinyTrainer = seqpar::Trainer<Tiny, seqpar::Replicated<1>>;

TinyTrainer& trainer() {
  static TinyTrainer t = [] {
    seqpar::TrainOptions o;
    o.seed = 3;
    return TinyTrainer(o);
  }();
  return t;
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* seed = std::getenv("SEQPAR_FUZZ_WRITE_SEED")) {
    std::map<std::string, std::string> meta;
    seqpar::DataPosition{1, 2}.to_metadata(meta, seqpar::BatchingOptions{.rows = 4});
    trainer().save_checkpoint(seed, meta);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const seqpar::fuzz::ScratchFile scratch(".safetensors");
  const auto& path = scratch.write(seqpar::fuzz::as_text(data, size));
  seqpar::fuzz::expect_clean([&] {
    const auto meta = trainer().load_checkpoint(path);
    (void)seqpar::DataPosition::from_metadata(meta, seqpar::BatchingOptions{.rows = 4},
                                              path.string());
  });
  return 0;
}

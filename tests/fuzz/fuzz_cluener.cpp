// libFuzzer target: one input read as a CLUENER file in both layouts (.json: concatenated
// objects or an array; .jsonl: one object per line), skipping bad records and, once
// more, failing on the first one. Every kept record must satisfy what the reader
// promises: spans inside the text, in order of the text's code points.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.hpp"
#include "seqpar/data/cluener.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const seqpar::fuzz::ScratchFile json(".json"), jsonl(".jsonl");
  const auto text = seqpar::fuzz::as_text(data, size);
  for (const auto* f : {&json, &jsonl}) {
    const auto& path = f->write(text);
    seqpar::fuzz::expect_clean([&] { seqpar::fuzz::check_ner(seqpar::read_cluener(path)); });
    seqpar::fuzz::expect_clean([&] {
      seqpar::ReadOptions o;
      o.on_bad = seqpar::OnBadRecord::fail;
      o.labels = {"name", "address", "organization"};
      o.max_chars = 40;
      seqpar::fuzz::check_ner(seqpar::read_cluener(path, o));
    });
  }
  return 0;
}

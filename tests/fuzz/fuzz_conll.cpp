// libFuzzer target: one input read as CoNLL BIO text, skipping bad sentences and, once
// more, failing on the first; every kept record's spans must lie inside its text.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.hpp"
#include "seqpar/data/conll.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const seqpar::fuzz::ScratchFile file(".txt");
  const auto& path = file.write(seqpar::fuzz::as_text(data, size));
  seqpar::fuzz::expect_clean([&] { seqpar::fuzz::check_ner(seqpar::read_conll(path)); });
  seqpar::fuzz::expect_clean([&] {
    seqpar::ReadOptions o;
    o.on_bad = seqpar::OnBadRecord::fail;
    o.labels = {"PER", "LOC", "ORG"};
    o.max_chars = 40;
    seqpar::fuzz::check_ner(seqpar::read_conll(path, o));
  });
  return 0;
}

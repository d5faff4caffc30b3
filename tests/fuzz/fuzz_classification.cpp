// libFuzzer target: one input read as classification records in both layouts (.json:
// concatenated objects or an array; .jsonl: one object per line), skipping bad records and,
// once more, failing on the first one; and the same input read back as a model's answer to
// a 分类 prompt. Every kept record must satisfy what the reader promises; an answer is one
// label of the set or exactly one counted error.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.hpp"
#include "seqpar/data/classification.hpp"
#include "seqpar/data/json_records.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const seqpar::fuzz::ScratchFile json(".json"), jsonl(".jsonl");
  const auto text = seqpar::fuzz::as_text(data, size);
  for (const auto* f : {&json, &jsonl}) {
    const auto& path = f->write(text);
    seqpar::fuzz::expect_clean(
        [&] { seqpar::fuzz::check_records(seqpar::read_classification(path), "classification"); });
    seqpar::fuzz::expect_clean([&] {
      seqpar::ReadOptions o;
      o.on_bad = seqpar::OnBadRecord::fail;
      o.labels = {"体育", "财经", "科技"};
      o.max_chars = 40;
      seqpar::fuzz::check_records(seqpar::read_classification(path, o), "classification");
    });
  }
  static const std::vector<std::string> labels{"体育", "财经", "a"};
  const seqpar::ClassAnswer a = seqpar::parse_class_answer(text, labels);
  seqpar::fuzz::require(a.label.empty() ? a.errors.total() == 1 : a.errors.total() == 0,
                        "an answer is neither one label nor one error");
  return 0;
}

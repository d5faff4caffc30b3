// libFuzzer target: one input read as relation records in both layouts (.json: concatenated
// objects or an array; .jsonl: one object per line), skipping bad records and, once more,
// failing on the first one; and the same input read back as a model's answer to each step of
// relation extraction, its pairs placed in a text. Every kept record must satisfy what the
// reader promises; answers give only relations of the schema and spans inside the text.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.hpp"
#include "seqpar/data/json_records.hpp"
#include "seqpar/data/relation.hpp"
#include "seqpar/data/spans.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const seqpar::fuzz::ScratchFile json(".json"), jsonl(".jsonl");
  const auto text = seqpar::fuzz::as_text(data, size);
  for (const auto* f : {&json, &jsonl}) {
    const auto& path = f->write(text);
    seqpar::fuzz::expect_clean(
        [&] { seqpar::fuzz::check_records(seqpar::read_relations(path), "relation"); });
    seqpar::fuzz::expect_clean([&] {
      seqpar::ReadOptions o;
      o.on_bad = seqpar::OnBadRecord::fail;
      o.labels = {"收购", "被收购", "合作"};
      o.max_chars = 40;
      seqpar::fuzz::check_records(seqpar::read_relations(path, o), "relation");
    });
  }
  static const std::vector<std::string> names{"收购", "被收购", "合作"};
  static const seqpar::RelationSchema schema = seqpar::RelationSchema::of(names, {});
  for (const auto& r : seqpar::parse_relation_types(text, schema).relations)
    seqpar::fuzz::require(r == "收购" || r == "合作", "a relation outside the schema");
  static const std::string sentence = "腾讯收购搜狗，腾讯与阿里合作";
  static const auto starts = seqpar::fuzz::code_point_starts(sentence);
  std::vector<std::string> entities;  // each distinct head and tail once, as predict places them
  for (const auto& [h, t] : seqpar::parse_relation_answer(text, "收购").pairs)
    for (const std::string* e : {&h, &t})
      if (std::find(entities.begin(), entities.end(), *e) == entities.end()) entities.push_back(*e);
  const auto spans = seqpar::place_spans(sentence, entities);
  for (std::size_t i = 0; i < spans.size(); ++i)
    if (spans[i])
      seqpar::fuzz::check_span(sentence, starts, spans[i]->start, spans[i]->end, entities[i]);
  return 0;
}

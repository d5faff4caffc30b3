// libFuzzer target: one input read as a test file of text only (read_texts) and as records of
// the task recognised from it (recognise_json_task, then that task's reader), in both layouts; and
// the same input as every answer of a model asked for entities, read back by predict. Every kept
// record must satisfy what the readers promise; every placed mention must lie inside its text and
// spell its string.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz_util.hpp"
#include "seqpar/data/json_records.hpp"
#include "seqpar/data/tasks.hpp"

namespace {

// The records of `path` read by the task of Ts whose name recognise_json_task gives, checked.
template <seqpar::NluTask... Ts>
void check_recognised(const std::filesystem::path& path) {
  const std::string task = seqpar::recognise_json_task(path, seqpar::builtin_json_shapes);
  seqpar::fuzz::require(task.empty() || ((Ts::name == task) || ...), "an unknown task recognised");
  ((Ts::name == task ? seqpar::fuzz::check_records(Ts::read(path, {}), Ts::name) : void()), ...);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const seqpar::fuzz::ScratchFile json(".json"), jsonl(".jsonl");
  const auto text = seqpar::fuzz::as_text(data, size);
  for (const auto* f : {&json, &jsonl}) {
    const auto& path = f->write(text);
    seqpar::fuzz::expect_clean([&] {
      const seqpar::TextDataset d = seqpar::read_texts(path);
      seqpar::fuzz::require(d.task().empty(), "a text-only read with a task");
      seqpar::fuzz::check_records(d, "");
    });
    seqpar::fuzz::expect_clean([&] {
      check_recognised<seqpar::NerTask, seqpar::ClassificationTask, seqpar::RelationTask>(path);
    });
    seqpar::fuzz::expect_clean([&] {
      seqpar::ReadOptions o;
      o.on_bad = seqpar::OnBadRecord::fail;
      o.max_chars = 40;
      seqpar::fuzz::check_records(seqpar::read_texts(path, o), "");
    });
  }
  static const seqpar::NerTask task({"name", "address"});
  static const std::vector<seqpar::TextRecord> records = [] {
    std::vector<seqpar::TextRecord> r(1);
    r[0].text = "李娜和李娜的教练都来自武汉。";
    return r;
  }();
  static const auto starts = seqpar::fuzz::code_point_starts(records[0].text);
  const std::string answer(text);
  const auto preds = task.predict(records, [&](std::span<const std::string> prompts) {
    return std::vector<std::string>(prompts.size(), answer);
  });
  for (const auto& m : preds[0].entities)
    if (m.span)
      seqpar::fuzz::check_span(records[0].text, starts, m.span->start, m.span->end, m.text);
  return 0;
}

// The readers on the real CLUENER2020 files (SEQPAR_DATA_DIR/cluener); skipped with a
// message when the folder is not there. Expected counts are those published with the data.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "data_test_util.hpp"
#include "seqpar/data/cluener.hpp"
#include "seqpar/data/conll.hpp"
#include "seqpar/data/prompt.hpp"

using namespace seqpar;
using seqpar::test::cluener_dir;
using seqpar::test::TempDir;

namespace {

const std::vector<std::string> cluener_labels{"address",    "book",  "company", "game",
                                              "government", "movie", "name",    "organization",
                                              "position",   "scene"};

ReadOptions strict_options() {
  ReadOptions o;
  o.labels = cluener_labels;
  o.max_chars = 50;  // CLUENER's own limit
  o.on_bad = OnBadRecord::fail;
  return o;
}

}  // namespace

TEST_CASE("CLUENER: every split reads completely in both layouts, with the published counts") {
  const auto dir = cluener_dir();
  if (dir.empty()) {
    MESSAGE("skipped: SEQPAR_DATA_DIR has no cluener/ folder");
    return;
  }
  struct Split {
    const char* name;
    std::int64_t records, mentions;
    bool labelled;
  };
  for (const Split s : {Split{"train", 10748, 23971, true}, Split{"dev", 1343, 3072, true},
                        Split{"test", 1345, 0, false}}) {
    const NerDataset json = read_cluener(dir / (std::string(s.name) + ".json"), strict_options());
    const NerDataset jsonl = read_cluener(dir / (std::string(s.name) + ".jsonl"), strict_options());
    for (const NerDataset* d : {&json, &jsonl}) {
      CAPTURE(d->report.file);
      CHECK(d->report.records == s.records);
      CHECK(static_cast<std::int64_t>(d->records.size()) == s.records);
      CHECK(d->report.mentions == s.mentions);
      std::int64_t spans = 0;
      for (const auto& r : d->records) spans += static_cast<std::int64_t>(r.spans.size());
      CHECK(spans == s.mentions);
      CHECK(d->report.skipped == 0);
      for (const auto& r : d->records) CHECK(r.labelled == s.labelled);
    }
    REQUIRE(json.records.size() == jsonl.records.size());
    std::size_t same = 0;
    for (std::size_t i = 0; i < json.records.size(); ++i)
      same += json.records[i].same_content(jsonl.records[i]);
    CHECK(same == json.records.size());
  }
}

TEST_CASE("CLUENER: mentions per label match the published table") {
  const auto dir = cluener_dir();
  if (dir.empty()) {
    MESSAGE("skipped: SEQPAR_DATA_DIR has no cluener/ folder");
    return;
  }
  const std::map<std::string, std::pair<std::int64_t, std::int64_t>> want{
      {"address", {2891, 373}}, {"book", {1139, 154}},         {"company", {2980, 378}},
      {"game", {2376, 295}},    {"government", {1835, 247}},   {"movie", {1123, 151}},
      {"name", {3755, 465}},    {"organization", {3210, 367}}, {"position", {3141, 433}},
      {"scene", {1521, 209}}};
  const NerDataset train = read_cluener(dir / "train.jsonl", strict_options());
  const NerDataset dev = read_cluener(dir / "dev.json", strict_options());
  CHECK(train.labels() == cluener_labels);
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> got;
  for (const auto& r : train.records)
    for (const auto& sp : r.spans) ++got[sp.label].first;
  for (const auto& r : dev.records)
    for (const auto& sp : r.spans) ++got[sp.label].second;
  CHECK(got == want);
}

TEST_CASE("CLUENER: the dev split survives BIO and the answer format") {
  const auto dir = cluener_dir();
  if (dir.empty()) {
    MESSAGE("skipped: SEQPAR_DATA_DIR has no cluener/ folder");
    return;
  }
  const NerDataset dev = read_cluener(dir / "dev.jsonl", strict_options());
  TempDir scratch;
  write_conll(scratch.path / "dev.bio", dev.records);
  const NerDataset back = read_conll(scratch.path / "dev.bio", strict_options());
  REQUIRE(back.records.size() == dev.records.size());
  std::size_t same = 0;
  for (std::size_t i = 0; i < dev.records.size(); ++i)
    same += back.records[i].same_content(dev.records[i]);
  CHECK(same == dev.records.size());

  // Answers read back into the gold mentions except where a mention holds the separator.
  std::int64_t lost = 0, with_separator = 0;
  for (const auto& r : dev.records) {
    for (const auto& sp : r.spans)
      with_separator += sp.text.find(list_separator) != std::string::npos;
    for (const auto& chunk : chunk_labels(cluener_labels)) {
      auto got = parse_answer(ner_answer(r, chunk), chunk).mentions, want = gold_mentions(r, chunk);
      std::sort(got.begin(), got.end());
      std::sort(want.begin(), want.end());
      lost += got != want;
    }
  }
  CHECK(with_separator == 5);
  CHECK(lost == 5);
}

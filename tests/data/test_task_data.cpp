// The tasks on the public data sets (SEQPAR_DATA_DIR: smp2017_ecdt, tnews, finre, cluener);
// each case is skipped with a message where its folder is not there. Expected counts are
// those the data's README.md publishes; the scores of a model that answers right, and of
// the majority class, are worked out from those counts.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "data_test_util.hpp"
#include "seqpar/data/cluener.hpp"
#include "seqpar/data/json_records.hpp"
#include "seqpar/data/tasks.hpp"

using namespace seqpar;
using seqpar::test::shared_data_dir;

namespace {

// The folder, or an empty path after saying the case is skipped.
std::filesystem::path data_or_skip(const char* name) {
  const auto dir = shared_data_dir(name);
  if (dir.empty()) MESSAGE("skipped: SEQPAR_DATA_DIR has no " << name << "/ folder");
  return dir;
}

ReadOptions all_or_nothing() {
  ReadOptions o;
  o.max_chars = 0;
  o.on_bad = OnBadRecord::fail;
  return o;
}

// A model that answers every prompt as the records' training answers say.
template <NluTask T>
AnswerFn right_answers(const T& task, std::span<const typename T::Record> records) {
  std::map<std::string, std::string> key;
  for (const auto& r : records)
    for (const auto& p : task.prompts(r)) key[p.prompt] = p.answer;
  return [key](std::span<const std::string> prompts) {
    std::vector<std::string> out;
    for (const auto& p : prompts) out.push_back(key.at(p));
    return out;
  };
}

std::map<std::string, std::int64_t> class_counts(const ClassDataset& d) {
  std::map<std::string, std::int64_t> n;
  for (const auto& r : d.records) ++n[r.label];
  return n;
}

}  // namespace

TEST_CASE("SMP2017-ECDT: every split reads completely, 31 intents, the published counts") {
  const auto dir = data_or_skip("smp2017_ecdt");
  if (dir.empty()) return;
  struct Split {
    const char* name;
    std::int64_t records, chat, video, datetime;
  };
  for (const Split s : {Split{"train", 2299, 455, 182, 18}, Split{"dev", 770, 154, 60, 6},
                        Split{"test", 667, 51, 61, 6}}) {
    CAPTURE(s.name);
    const auto file = dir / (std::string(s.name) + ".jsonl");
    CHECK(recognise_json_task(file, builtin_json_shapes, all_or_nothing()) == "classification");
    const ClassDataset d = read_classification(file, all_or_nothing());
    CHECK(d.task() == "classification");
    CHECK(d.report.records == s.records);
    CHECK(d.report.skipped == 0);
    CHECK(d.labels().size() == 31);
    const auto n = class_counts(d);
    CHECK(n.at("闲聊") == s.chat);
    CHECK(n.at("视频") == s.video);
    CHECK(n.at("日期时间") == s.datetime);
    CHECK(d.records.front().id == RecordId{1, {}, false, false});
  }
  // The odd dev record is kept verbatim: a tab and a private-use character.
  const ClassDataset dev = read_classification(dir / "dev.jsonl", all_or_nothing());
  CHECK(std::any_of(dev.records.begin(), dev.records.end(),
                    [](const ClassRecord& r) { return r.text == "啥呀\t0\xEE\x90\x95"; }));
}

TEST_CASE("TNEWS: every split reads completely, 15 topics, the published counts") {
  const auto dir = data_or_skip("tnews");
  if (dir.empty()) return;
  struct Split {
    const char* name;
    std::int64_t records, stock, story;
  };
  for (const Split s :
       {Split{"train", 1185, 72, 79}, Split{"dev", 1098, 41, 65}, Split{"test", 2010, 134, 134}}) {
    CAPTURE(s.name);
    const ClassDataset d =
        read_classification(dir / (std::string(s.name) + ".jsonl"), all_or_nothing());
    CHECK(d.report.records == s.records);
    CHECK(d.labels().size() == 15);
    const auto n = class_counts(d);
    CHECK(n.at("股票") == s.stock);
    CHECK(n.at("故事") == s.story);
  }
}

TEST_CASE("FinRE: every split reads completely, with the published relations, negatives, spans") {
  const auto dir = data_or_skip("finre");
  if (dir.empty()) return;
  struct Split {
    const char* name;
    std::int64_t records, relations, negatives, no_head_span, labels;
  };
  for (const Split s :
       {Split{"train", 6140, 9862, 1668, 1550, 43}, Split{"dev", 677, 1104, 178, 172, 41},
        Split{"test", 1677, 2720, 458, 427, 43}}) {
    CAPTURE(s.name);
    const RelationDataset d =
        RelationTask::read(dir / (std::string(s.name) + ".jsonl"), all_or_nothing());
    CHECK(d.task() == "relation");
    CHECK(d.report.records == s.records);
    CHECK(d.report.mentions == s.relations);
    std::int64_t negatives = 0, no_head = 0, no_tail = 0;
    for (const auto& r : d.records) {
      negatives += r.relations.empty();
      for (const auto& t : r.relations) no_head += !t.head_span, no_tail += !t.tail_span;
    }
    CHECK(negatives == s.negatives);
    CHECK(no_head == s.no_head_span);
    CHECK(no_tail == s.no_head_span);
    CHECK(static_cast<std::int64_t>(d.labels().size()) == s.labels);
  }
}

TEST_CASE("CLUENER: the test split reads as texts with their ids, in both layouts") {
  const auto dir = data_or_skip("cluener");
  if (dir.empty()) return;
  for (const char* file : {"test.json", "test.jsonl"}) {
    CAPTURE(file);
    const TextDataset d = read_texts(dir / file, all_or_nothing());
    REQUIRE(d.records.size() == 1345);
    CHECK(d.task().empty());
    for (std::size_t i = 0; i < d.records.size(); ++i)
      CHECK(d.records[i].id == RecordId{static_cast<std::int64_t>(i), {}, false, true});
  }
  CHECK(recognise_json_task(dir / "train.jsonl", builtin_json_shapes, all_or_nothing()) == "ner");
  CHECK(NerTask::read(dir / "train.jsonl", all_or_nothing()).task() == "ner");
}

TEST_CASE("FinRE's schema: 16 passives folded, 11 symmetric relations, 27 in the prompts") {
  const auto dir = data_or_skip("finre");
  if (dir.empty()) return;
  const RelationDataset train = read_relations(dir / "train.jsonl", all_or_nothing());
  const RelationTask spec = RelationTask::of(train, {});
  const RelationSchema& s = spec.schema();
  CHECK(s.passive.size() == 16);
  for (const auto& [passive, active] : s.passive) CHECK(passive == "被" + active);
  CHECK(s.symmetric == std::set<std::string>{"交易", "合作", "合并", "合资", "商讨", "竞争", "签约",
                                             "纠纷", "自己", "订单", "重组"});
  REQUIRE(s.relations.size() == 27);
  // The first step's prompt, byte for byte, for train.jsonl's line 1.
  CHECK(
      relation_types_prompt(train.records[0].text, s) ==
      "输入: 东方航空AH股临时停牌传将与上航合并\n分类: "
      "买资，交易，借壳，入股，减持，分析，发行，合作，合并，合资，商讨，增持，帮助，成立，拟收购，"
      "拥有，持股，收购，欠款，注资，竞争，签约，纠纷，自己，订单，转让，重组，无关系\n输出: "
      "[GEN]");
  // Prompts a training sentence costs: one first step, one second step per relation it
  // states (4,033 sentences state one, 425 two, 14 three; 1,668 none).
  std::int64_t prompts = 0;
  for (const auto& r : train.records) prompts += static_cast<std::int64_t>(spec.prompts(r).size());
  CHECK(prompts == 6140 + 4033 + 2 * 425 + 3 * 14);
}

TEST_CASE("the classification prompt of a real record, byte for byte") {
  const auto dir = data_or_skip("smp2017_ecdt");
  if (dir.empty()) return;
  const ClassDataset train = read_classification(dir / "train.jsonl", all_or_nothing());
  const ClassificationTask spec = ClassificationTask::of(train, {});
  CHECK(
      spec.prompts(train.records[0])[0].prompt ==
      "输入: 打开熊猫看书\n分类: "
      "健康，地图，天气，小说，应用，彩票，影院，新闻，日期时间，日程，比赛，火车，电台，电视节目，"
      "电视频道，电话，短信，网站，翻译，联系人，股票，航班，菜谱，视频，计算，诗词，谜语，邮件，长"
      "途汽车，闲聊，音乐\n输出: [GEN]");
  CHECK(spec.prompts(train.records[0])[0].answer == "应用");
}

TEST_CASE("classification: right answers score 1, the majority class as its counts say") {
  struct Set {
    const char* name;
    const char* majority;
    std::int64_t majority_in_dev, dev, labels;
  };
  for (const Set s : {Set{"smp2017_ecdt", "闲聊", 154, 770, 31},
                      Set{"tnews", "体育", 76, 1098, 15}}) {  // eight topics tie at 80: 体 first
    CAPTURE(s.name);
    const auto dir = data_or_skip(s.name);
    if (dir.empty()) continue;
    const ClassDataset train = read_classification(dir / "train.jsonl", all_or_nothing());
    const ClassDataset dev = read_classification(dir / "dev.jsonl", all_or_nothing());
    const ClassificationTask spec = ClassificationTask::of(train, {});
    CHECK(spec.majority() == s.majority);
    const auto right = spec.score(
        dev.records,
        spec.predict(texts_of(dev.records), right_answers(spec, std::span(dev.records))));
    CHECK(right.classes.accuracy() == 1.0);
    CHECK(right.classes.macro_f1() == 1.0);
    CHECK(right.errors.total() == 0);
    // The baseline: accuracy is the majority's share of dev; its F1 is 2p / (1 + p) with
    // p that share (recall 1), every other label's 0.
    const double p = static_cast<double>(s.majority_in_dev) / static_cast<double>(s.dev);
    CHECK(right.baseline.accuracy() == doctest::Approx(p));
    CHECK(right.baseline.macro_f1() ==
          doctest::Approx(2 * p / (1 + p) / static_cast<double>(s.labels)));
    // A model that answers off the label set: every answer garbled and counted.
    const auto off = spec.score(
        dev.records, spec.predict(texts_of(dev.records), [](std::span<const std::string> prompts) {
          return std::vector<std::string>(prompts.size(), "不知道");
        }));
    CHECK(off.classes.correct() == 0);
    CHECK(off.errors == AnswerErrors{.unknown_label = s.dev});
  }
}

TEST_CASE("FinRE: right answers come back as every canonical triple, spans as the file's") {
  const auto dir = data_or_skip("finre");
  if (dir.empty()) return;
  const RelationTask spec =
      RelationTask::of(read_relations(dir / "train.jsonl", all_or_nothing()), {});
  for (const char* split : {"train", "dev", "test"}) {
    CAPTURE(split);
    const RelationDataset d =
        read_relations(dir / (std::string(split) + ".jsonl"), all_or_nothing());
    const auto preds = spec.predict(texts_of(d.records), right_answers(spec, std::span(d.records)));
    const auto s = spec.score(d.records, preds);
    CHECK(s.relations.micro().f1() == 1.0);
    CHECK(s.errors.total() == 0);
    // Every span the file gives is where the offset rule puts that entity.
    std::int64_t given = 0, same = 0;
    for (std::size_t i = 0; i < d.records.size(); ++i) {
      std::map<std::string, CharSpan> placed;
      for (const auto& t : preds[i].relations) {
        placed[t.head] = *t.head_span;
        placed[t.tail] = *t.tail_span;
      }
      for (const auto& t : d.records[i].relations)
        for (const auto& [e, span] :
             {std::pair{&t.head, &t.head_span}, std::pair{&t.tail, &t.tail_span}})
          if (*span) {
            ++given;
            same += placed.at(*e) == **span;
          }
    }
    CHECK(given > 0);
    CHECK(same == given);
  }
}

TEST_CASE("CLUENER: right answers lose only mentions holding '，'; offsets by the rule") {
  const auto dir = data_or_skip("cluener");
  if (dir.empty()) return;
  const NerDataset dev = read_cluener(dir / "dev.jsonl", all_or_nothing());
  const NerTask spec = NerTask::of(read_cluener(dir / "train.jsonl", all_or_nothing()), {});
  const auto preds =
      spec.predict(texts_of(dev.records), right_answers(spec, std::span(dev.records)));
  const auto s = spec.score(dev.records, preds);
  // docs/ner.md: 5 dev mentions hold '，' and come back as 10 pieces.
  CHECK(s.ner.micro() == PrfCounts{3067, 3077, 3072});
  CHECK(s.errors.total() == 0);
  // Of the 3,072 gold mentions, 3,062 come back at their offsets: the 5 in pieces and 5
  // repeated strings the rule places at another occurrence (an independent computation of
  // the rule over the same answers gives the same figure).
  std::int64_t at_gold = 0;
  for (std::size_t i = 0; i < dev.records.size(); ++i)
    for (const auto& g : dev.records[i].spans)
      at_gold +=
          std::any_of(preds[i].entities.begin(), preds[i].entities.end(), [&](const auto& m) {
            return m.label == g.label && m.span == CharSpan{g.start, g.end};
          });
  CHECK(at_gold == 3062);
}

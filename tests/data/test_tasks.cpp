// The library's tasks (NerTask, ClassificationTask, RelationTask) on the committed fixtures:
// the offset rule, the task a training set defines, the prompts that train a record and the
// examples made of them, predict with a model that answers right (perfect scores, the file's
// offsets) and one that garbles (counted, never a crash), the prediction records, CLUENER's
// submission file and batched_answers.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "data_test_util.hpp"
#include "seqpar/data/cluener.hpp"
#include "seqpar/data/json_records.hpp"
#include "seqpar/data/predictions.hpp"
#include "seqpar/data/tasks.hpp"
#include "seqpar/data/token_cache.hpp"

using namespace seqpar;
using seqpar::test::data_fixture;
using seqpar::test::TempDir;

namespace {

// One id per code point (10 + cp), eos 2, pad 3; decodes back.
struct PointCodec {
  std::vector<std::int32_t> encode(std::string_view s) const {
    std::vector<std::int32_t> out;
    for (std::size_t i = 0; i < s.size();)
      out.push_back(static_cast<std::int32_t>(10 + detail::utf8_next(s, i)));
    return out;
  }
  std::string decode(std::span<const std::int32_t> ids, bool skip_special = false) const {
    std::string s;
    for (const auto id : ids)
      if (id >= 10 || !skip_special) detail::utf8_append(static_cast<char32_t>(id - 10), s);
    return s;
  }
  std::int32_t eos_id() const { return 2; }
  std::int32_t pad_id() const { return 3; }
};

// A model that answers every prompt of `gold` as its training answer.
template <NluTask T>
AnswerFn answer_key(const T& task, std::span<const typename T::Record> gold) {
  std::map<std::string, std::string> key;
  for (const auto& r : gold)
    for (const auto& p : task.prompts(r)) key[p.prompt] = p.answer;
  return [key](std::span<const std::string> prompts) {
    std::vector<std::string> out;
    for (const auto& p : prompts) out.push_back(key.at(p));
    return out;
  };
}

// A model that answers the i-th prompt it is asked with answers[i] (and "" after them).
AnswerFn scripted(std::vector<std::string> answers) {
  auto next = std::make_shared<std::size_t>(0);
  return [answers = std::move(answers), next](std::span<const std::string> prompts) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < prompts.size(); ++i, ++*next)
      out.push_back(*next < answers.size() ? answers[*next] : "");
    return out;
  };
}

NerDataset ner_fixture() { return read_cluener(data_fixture("cluener_fixture.jsonl")); }
ClassDataset class_fixture() {
  return read_classification(data_fixture("classification_fixture.jsonl"));
}
RelationDataset relation_fixture() {
  return read_relations(data_fixture("relation_fixture.jsonl"));
}

}  // namespace

TEST_CASE("offsets: longest first, the first free occurrence, else the first") {
  using Spans = std::vector<std::optional<CharSpan>>;
  const auto place = [](std::string_view text, std::vector<std::string> strings) {
    return place_spans(text, strings);
  };
  // A name listed twice takes both occurrences, in order.
  CHECK(place("李娜和李娜的教练都来自武汉。", {"李娜", "李娜", "教练", "武汉"}) ==
        Spans{CharSpan{0, 1}, CharSpan{3, 4}, CharSpan{6, 7}, CharSpan{11, 12}});
  // Longest first: 北京大学 takes 0..3, so 北京 goes to its free occurrence.
  CHECK(place("北京大学在北京", {"北京", "北京大学"}) == Spans{CharSpan{5, 6}, CharSpan{0, 3}});
  // Listed more often than it occurs: the extra listing takes the first occurrence.
  CHECK(place("李娜和李娜", {"李娜", "李娜", "李娜"}) ==
        Spans{CharSpan{0, 1}, CharSpan{3, 4}, CharSpan{0, 1}});
  // Overlapping occurrences of one string: the second overlaps the first, so it is first too.
  CHECK(place("aaa", {"aa", "aa"}) == Spans{CharSpan{0, 1}, CharSpan{0, 1}});
  // Code points, not bytes; a string the text does not hold, or nothing, has no span.
  CHECK(place("CSOL玩家在上海聚会", {"玩家", "上海", "北京", ""}) ==
        Spans{CharSpan{4, 5}, CharSpan{7, 8}, std::nullopt, std::nullopt});
}

TEST_CASE("a task comes from its training set: labels, schema, majority class") {
  static_assert(NerTask::name == "ner" && ClassificationTask::name == "classification" &&
                RelationTask::name == "relation");
  const ClassificationTask cls = ClassificationTask::of(class_fixture(), {});
  CHECK(cls.labels() == std::vector<std::string>{"体育", "科技", "财经"});
  CHECK(cls.majority() == "体育");
  const RelationTask rel = RelationTask::of(relation_fixture(), {});
  CHECK(rel.schema().relations == std::vector<std::string>{"合并", "持股", "收购", "注资", "竞争"});
  CHECK(
      rel.describe().starts_with("task=relation;labels=合并,持股,收购,注资,竞争,被持股,被收购;"
                                 "relations=合并"));
  const NerTask ner = NerTask::of(ner_fixture(), {"name", "address"});
  CHECK(ner.labels() == std::vector<std::string>{"name", "address"});
  CHECK(ner.describe() == "task=ner;labels=name,address;labels_per_prompt=6");
  // A file of text only trains no task, whichever reads it.
  const auto texts = data_fixture("texts_fixture.json");
  CHECK_THROWS_WITH_AS(NerTask::of(read_cluener(texts), {"name"}),
                       doctest::Contains("holds text only"), Error);
  CHECK_THROWS_WITH_AS(ClassificationTask::of(read_classification(texts), {"体育"}),
                       doctest::Contains("holds text only"), Error);
  CHECK_THROWS_WITH_AS(RelationTask::of(read_relations(texts), {"合并"}),
                       doctest::Contains("holds text only"), Error);
  CHECK_THROWS_WITH_AS(NerTask::of(ner_fixture(), {"a，b"}),
                       doctest::Contains("label 'a，b' holds '，'"), Error);
}

TEST_CASE("a task kept without its training data (state) is the same task again") {
  const ClassificationTask cls = ClassificationTask::of(class_fixture(), {});
  const RelationTask rel = RelationTask::of(relation_fixture(), {});
  const NerTask ner = NerTask::of(ner_fixture(), {"name", "address"});
  for (const AnyTask& t : {AnyTask(cls), AnyTask(rel), AnyTask(ner)}) {
    // Through its JSON text, as a file keeps it.
    const auto kept = nlohmann::json::parse(t.state().dump());
    const AnyTask back = StandardTasks::restore(kept, "task.json");
    CHECK(back.name() == t.name());
    CHECK(back.describe() == t.describe());  // labels, chunks, the relations' schema
    CHECK(back.prompt_words() == t.prompt_words());
  }
  // The relation schema's symmetric relations come from the training set: kept, not guessed.
  CHECK(StandardTasks::restore(AnyTask(rel).state(), "x").describe() == rel.describe());
  // Made from its state alone, classification keeps its majority class (eval's baseline); a
  // state written without one makes a task without a baseline.
  CHECK(ClassificationTask::from_state(cls.state()).majority() == "体育");
  nlohmann::json bare = cls.state();
  bare.erase("majority");
  CHECK(ClassificationTask::from_state(bare).majority().empty());
  CHECK(ClassificationTask::from_state(bare).overview().find("majority") == std::string::npos);
  CHECK_THROWS_WITH_AS(StandardTasks::restore({{"task", "sentiment"}, {"state", {}}}, "t.json"),
                       doctest::Contains("t.json: task 'sentiment' is not one of"), Error);
  CHECK_THROWS_WITH_AS(
      StandardTasks::restore({{"task", "ner"}, {"state", {{"labels", 3}}}}, "t.json"),
      doctest::Contains("t.json: the ner task's state is not as written"), Error);
}

TEST_CASE("the prompts that train a record, for each task") {
  const ClassDataset c = class_fixture();
  const auto cp = ClassificationTask::of(c, {}).prompts(c.records[0]);
  REQUIRE(cp.size() == 1);
  CHECK(cp[0].prompt == "输入: 国足客场战平叙利亚\n分类: 体育，科技，财经\n输出: [GEN]");
  CHECK(cp[0].answer == "体育");
  CHECK(cp[0].part == 0);

  const RelationDataset r = relation_fixture();
  const RelationTask rs = RelationTask::of(r, {});
  const auto negative = rs.prompts(r.records[2]);
  REQUIRE(negative.size() == 1);
  CHECK(negative[0].answer == "无关系");
  const auto two = rs.prompts(r.records[4]);
  REQUIRE(two.size() == 3);
  CHECK(two[0].answer == "注资，竞争");
  CHECK(two[1].prompt ==
        "输入: 华为与中兴在通信领域竞争，华为向海思注资\n抽取: 注资的主体，注资的客体\n"
        "输出: [GEN]");
  CHECK(two[1].answer == "注资的主体: 华为\n注资的客体: 海思");
  CHECK(two[1].part == 4);  // 1 + the place of 注资 among the schema's relations
  CHECK(two[2].answer == "竞争的主体: 华为\n竞争的客体: 中兴");
  CHECK(two[2].part == 5);
  // The passive listing trains the active relation.
  CHECK(rs.prompts(r.records[3])[1].answer == "持股的主体: 美国运通\n持股的客体: 工行");

  const NerDataset n = ner_fixture();
  const NerTask ns(NerTask::of(n, {}).labels(), 4);
  const auto np = ns.prompts(n.records[0]);
  REQUIRE(np.size() == 2);
  CHECK(np[1].answer == ner_answer(n.records[0], chunk_labels(ns.labels(), 4)[1]));

  NerRecord unlabelled;
  unlabelled.labelled = false;
  CHECK_THROWS_WITH_AS(ns.prompts(unlabelled), doctest::Contains("has no annotation"), Error);
  RelationRecord unlabelled_relation;
  unlabelled_relation.labelled = false;
  CHECK_THROWS_WITH_AS(rs.prompts(unlabelled_relation), doctest::Contains("has no annotation"),
                       Error);
  // NER and relations may train a subset of their labels; a class must be one of the set.
  const ClassificationTask some = ClassificationTask::of(c, {"体育", "财经"});
  CHECK_THROWS_WITH_AS(some.prompts(c.records[2]),
                       doctest::Contains("class '科技' is not one of the task's labels"), Error);
}

TEST_CASE("examples of every task: one per prompt, tagged with record and part; cached by task") {
  const PointCodec tok;
  const RelationDataset r = relation_fixture();
  const RelationTask rt = RelationTask::of(r, {});
  const ExampleOptions o{1024, TooLong::skip};
  ExampleReport rep;
  const ExampleSet ex = make_examples(rt, r.records, o, tok, &rep);
  // 5 first steps and 1 + 1 + 0 + 1 + 2 second steps.
  REQUIRE(ex.size() == 10);
  CHECK(rep.examples == 10);
  std::size_t i = 0;
  for (std::size_t rec = 0; rec < r.records.size(); ++rec)
    for (const auto& p : rt.prompts(r.records[rec])) {
      CAPTURE(i);
      CHECK(ex.record(i) == static_cast<std::int32_t>(rec));
      CHECK(ex.chunk(i) == p.part);
      CHECK(tok.decode(ex.prompt(i)) == p.prompt);
      const auto answer = ex.answer(i);
      CHECK(tok.decode(answer.first(answer.size() - 1)) == p.answer);
      ++i;
    }
  // NER through make_ner_examples is the NER task of make_examples.
  const NerDataset n = ner_fixture();
  NerExampleOptions no;
  no.labels = n.labels();
  const ExampleSet a = make_ner_examples(n.records, no, tok);
  const ExampleSet b = make_examples(NerTask(n.labels()), n.records, no.example_options(), tok);
  CHECK(a.size() == b.size());
  CHECK(std::ranges::equal(a.columns().tokens, b.columns().tokens));
  CHECK(std::ranges::equal(a.columns().chunks, b.columns().chunks));

  TempDir dir;
  CacheStatus st;
  const auto cache = dir.path / "rel.tokens.safetensors";
  cached_examples(cache, "src", rt, r.records, o, tok, "codec", &st);
  CHECK_FALSE(st.hit);
  const ExampleSet hit = cached_examples(cache, "src", rt, r.records, o, tok, "codec", &st);
  CHECK(st.hit);
  CHECK(std::ranges::equal(hit.columns().tokens, ex.columns().tokens));
  // Another task (or another schema) is another key.
  RelationSchema folded = rt.schema();
  REQUIRE_FALSE(folded.symmetric.empty());
  folded.symmetric.clear();
  const RelationTask other(rt.labels(), folded);
  cached_examples(cache, "src", other, r.records, o, tok, "codec", &st);
  CHECK_FALSE(st.hit);
  CHECK(st.reason == "key differs");
  const ClassDataset c = class_fixture();
  cached_examples(cache, "src", ClassificationTask::of(c, {}), c.records, o, tok, "codec", &st);
  CHECK_FALSE(st.hit);
  CHECK(st.reason == "key differs");
}

// Each task of its training set `d` predicts `d` with a model that answers right; the
// predictions and their score, checked to count every record and no garbled answer.
template <NluTask T>
std::pair<std::vector<typename T::Prediction>, typename T::Score> answered_right(
    const Dataset<typename T::Record>& d) {
  CAPTURE(T::name);
  const T task = T::of(d, {});
  auto preds = task.predict(texts_of(d.records), answer_key(task, std::span(d.records)));
  REQUIRE(preds.size() == d.records.size());
  auto s = task.score(d.records, preds);
  CHECK(s.errors.total() == 0);
  CHECK(s.records == static_cast<std::int64_t>(d.records.size()));
  CHECK(s.summary().starts_with(std::string(T::name) + ": "));
  return {std::move(preds), std::move(s)};
}

TEST_CASE("a model that answers right scores perfectly, with the file's offsets") {
  {
    const NerDataset d = ner_fixture();
    const auto [preds, s] = answered_right<NerTask>(d);
    CHECK(s.ner.micro() == PrfCounts{12, 12, 12});
    CHECK(s.prompts == 10);  // 7 labels: 2 prompts a sentence
    // Every mention placed where the file has it (李娜 twice included).
    for (std::size_t i = 0; i < d.records.size(); ++i) {
      std::vector<NerSpan> got;
      for (const auto& m : preds[i].entities)
        got.push_back({m.label, m.span->start, m.span->end, m.text});
      detail::sort_spans(got);
      CHECK(got == d.records[i].spans);
    }
  }
  {
    const auto [preds, s] = answered_right<ClassificationTask>(class_fixture());
    CHECK(s.classes.accuracy() == 1.0);
    CHECK(s.classes.macro_f1() == 1.0);
    CHECK(s.baseline.accuracy() == doctest::Approx(0.5));  // 体育 for all: 3 of 6
    CHECK(s.prompts == 6);
  }
  {
    const auto [preds, s] = answered_right<RelationTask>(relation_fixture());
    CHECK(s.relations.micro() == PrfCounts{5, 5, 5});
    CHECK(s.prompts == 5 + 5);  // first steps and one second step per stated relation
    // Offsets where the file gives them; 工行 (twice in its text) at its first occurrence.
    CHECK(preds[0].relations == std::vector<RelationTriple>{{"东方航空", "合并", "上航",
                                                             CharSpan{0, 3}, CharSpan{14, 15}}});
    CHECK(preds[3].relations == std::vector<RelationTriple>{
                                    {"美国运通", "持股", "工行", CharSpan{3, 6}, CharSpan{0, 1}}});
  }
}

TEST_CASE("garbled answers are counted in the scores, never taken for labels") {
  const ClassDataset c = class_fixture();
  const ClassificationTask cs = ClassificationTask::of(c, {});
  const auto cp =
      cs.predict(texts_of(c.records), scripted({"体育", "", "科技", "体育，财经", "足球", "a\nb"}));
  const auto s = cs.score(c.records, cp);
  CHECK(s.classes.correct() == 2);  // 体育 and 科技
  CHECK(s.errors ==
        AnswerErrors{.empty = 1, .malformed = 1, .unknown_label = 1, .several_labels = 1});
  CHECK(cp[1].label.empty());
  CHECK(s.summary().find("garbled answers 4 (empty 1, malformed 1, unknown_label 1, "
                         "several_labels 1)") != std::string::npos);

  const NerDataset n = ner_fixture();
  // One prompt per record: a mention not in the text, a line without a colon, a label of
  // another chunk, an empty answer.
  const NerTask ns(n.labels(), 7);
  const auto np = ns.predict(
      texts_of(n.records),
      scripted({"name: 张伟，王五\norganization: 北京大学", "胡话", "movie: x", "", "name: None"}));
  const auto t = ns.score(n.records, np);
  CHECK(t.errors ==
        AnswerErrors{.empty = 1, .malformed = 1, .unknown_label = 1, .span_not_in_text = 1});
  CHECK(t.ner.micro().correct == 2);
  CHECK(t.ner.micro().predicted == 3);  // 王五 counts as a wrong prediction
  REQUIRE(np[0].entities.size() == 3);
  CHECK_FALSE(np[0].entities[1].span.has_value());

  const RelationDataset r = relation_fixture();
  const RelationTask rs = RelationTask::of(r, {});
  // First steps (5), then the second steps they ask for, by record and in the schema's order:
  // 合并 of record 1, 收购 of record 2, 收购 and 竞争 of record 5.
  const auto rp = rs.predict(
      texts_of(r.records),
      scripted({"合并，并购", "收购", "", "被持股", "竞争，收购",
                "合并的主体: 东方航空\n合并的客体: 上航", "收购的主体: 腾讯",
                "收购的主体: 华为\n收购的客体: 台积电", "竞争的主体: 中兴\n竞争的客体: 华为"}));
  const auto u = rs.score(r.records, rp);
  CHECK(u.errors == AnswerErrors{.empty = 1, .unknown_label = 2, .span_not_in_text = 1});
  // 合并 right; 竞争 right once ordered; 收购(华为, 台积电) wrong.
  CHECK(u.relations.micro() == PrfCounts{2, 3, 5});
  REQUIRE(rp[4].relations.size() == 2);
  CHECK_FALSE(rp[4].relations[0].tail_span.has_value());  // 台积电
  CHECK(rp[4].relations[1] ==
        RelationTriple{"华为", "竞争", "中兴", CharSpan{0, 1}, CharSpan{3, 4}});
  // A model that gives too few answers is refused, not read past.
  CHECK_THROWS_WITH_AS(
      rs.predict(texts_of(r.records),
                 [](std::span<const std::string>) { return std::vector<std::string>{"无关系"}; }),
      doctest::Contains("the model gave 1 answers to 5 prompts"), Error);
}

TEST_CASE("prediction records: id, task, answer, labels or spans with offsets") {
  const ClassDataset c = class_fixture();
  const ClassificationTask cs = ClassificationTask::of(c, {});
  const auto cp = cs.predict(texts_of(c.records), scripted({"体育", "足球", "科技", "体育"}));
  CHECK(cs.prediction_json(cp[0]) ==
        R"({"id":1,"task":"classification","text":"国足客场战平叙利亚","answer":"体育",)"
        R"("label":"体育","errors":{}})");
  CHECK(cs.prediction_json(cp[1]) ==
        R"({"id":2,"task":"classification","text":"央行宣布降准0.5个百分点","answer":"足球",)"
        R"("label":null,"errors":{"unknown_label":1}})");
  CHECK(cs.prediction_json(cp[3]).starts_with(R"({"id":"n-4",)"));

  const NerDataset n = ner_fixture();
  const NerTask ns(n.labels(), 7);
  const auto np = ns.predict(texts_of(n.records), scripted({"", "name: 李娜，李娜，王五"}));
  CHECK(
      ns.prediction_json(np[1]) ==
      R"({"id":2,"task":"ner","text":"李娜和李娜的教练都来自武汉。","answer":"name: 李娜，李娜，王五",)"
      R"("entities":[{"label":"name","text":"李娜","start":0,"end":1},)"
      R"({"label":"name","text":"李娜","start":3,"end":4},)"
      R"({"label":"name","text":"王五","start":null,"end":null}],)"
      R"("errors":{"span_not_in_text":1}})");

  // Relation predictions list triples as the data does: a relation file reads them back.
  const RelationDataset r = relation_fixture();
  const RelationTask rs = RelationTask::of(r, {});
  const auto rp = rs.predict(texts_of(r.records), answer_key(rs, std::span(r.records)));
  TempDir dir;
  write_predictions(dir.path / "pred.jsonl", rs, rp);
  const RelationDataset back = read_relations(dir.path / "pred.jsonl");
  REQUIRE(back.records.size() == r.records.size());
  for (std::size_t i = 0; i < r.records.size(); ++i) {
    CAPTURE(i);
    CHECK(back.records[i].id.number == static_cast<std::int64_t>(i + 1));
    auto got = back.records[i].relations, want = r.records[i].relations;
    const auto order = [](const RelationTriple& x, const RelationTriple& y) {
      return std::tie(x.relation, x.head, x.tail) < std::tie(y.relation, y.head, y.tail);
    };
    std::sort(got.begin(), got.end(), order);
    std::sort(want.begin(), want.end(), order);
    REQUIRE(got.size() == want.size());
    for (std::size_t k = 0; k < got.size(); ++k) {
      CHECK(triple_of(got[k]) == triple_of(want[k]));
      // The file's spans where it gives them; ours where it gives none.
      if (want[k].head_span) CHECK(got[k].head_span == want[k].head_span);
      if (want[k].tail_span) CHECK(got[k].tail_span == want[k].tail_span);
    }
  }
  std::ifstream in(dir.path / "pred.jsonl");
  std::string line;
  std::getline(in, line);
  const auto j = nlohmann::json::parse(line);
  CHECK(j.at("task") == "relation");
  CHECK(j.at("answer") == "合并\n合并的主体: 东方航空\n合并的客体: 上航");
}

TEST_CASE("CLUENER's submission from a test file of text only") {
  const TextDataset test = read_texts(data_fixture("texts_fixture.json"));
  const NerTask spec({"address", "name", "organization", "position"});
  const auto preds = spec.predict(
      test.records,
      scripted({"address: None\nname: 张伟\norganization: 北京大学\nposition: 教授",
                "address: 武汉\nname: 李娜，李娜，赵六\norganization: None\nposition: 教练",
                "address: None\nname: None\norganization: None\nposition: None"}));
  TempDir dir;
  write_cluener_submission(dir.path / "cluener_predict.json", preds);
  std::ifstream in(dir.path / "cluener_predict.json");
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  CHECK(lines ==
        std::vector<std::string>{
            R"({"id":0,"label":{"name":{"张伟":[[0,1]]},"organization":{"北京大学":[[3,6]]},)"
            R"("position":{"教授":[[9,10]]}}})",
            R"({"id":1,"label":{"address":{"武汉":[[11,12]]},"name":{"李娜":[[0,1],[3,4]]},)"
            R"("position":{"教练":[[6,7]]}}})",
            R"({"id":2,"label":{}})"});
  // A record without an "id" of its file cannot be named in a submission.
  const NerDataset dev = ner_fixture();
  std::vector<NerTask::Prediction> no_id(1);
  no_id[0].id = dev.records[0].id;
  CHECK_THROWS_WITH_AS(write_cluener_submission(dir.path / "x.json", no_id),
                       doctest::Contains("has no \"id\" from its file"), Error);
  CHECK_FALSE(std::filesystem::exists(dir.path / "x.json"));
}

TEST_CASE("scores as JSON, and predictions that do not match their records are refused") {
  const ClassDataset c = class_fixture();
  const ClassificationTask cs = ClassificationTask::of(c, {});
  const auto preds = cs.predict(texts_of(c.records), answer_key(cs, std::span(c.records)));
  const auto j = nlohmann::json::parse(cs.score(c.records, preds).json());
  CHECK(j.at("task") == "classification");
  CHECK(j.at("accuracy") == 1.0);
  CHECK(j.at("baseline").at("label") == "体育");
  CHECK(j.at("baseline").at("accuracy") == 0.5);
  CHECK(j.at("by_label").at("财经").at("support") == 2);
  CHECK(j.at("garbled") == 0);
  CHECK_THROWS_WITH_AS(cs.score(std::span(c.records).first(2), preds),
                       doctest::Contains("6 predictions for 2 records"), Error);
  std::vector<ClassificationTask::Prediction> shifted(preds.begin() + 1, preds.end());
  CHECK_THROWS_WITH_AS(cs.score(std::span(c.records).first(5), shifted),
                       doctest::Contains("is of record 2, not of record 1"), Error);
  // Records read without annotation (a file of text only) cannot be scored against.
  const ClassDataset texts = read_classification(data_fixture("texts_fixture.json"));
  REQUIRE_FALSE(texts.records.empty());
  CHECK_FALSE(texts.records[0].labelled);
  CHECK_THROWS_WITH_AS(cs.score(texts.records, cs.predict(texts_of(texts.records), scripted({}))),
                       doctest::Contains("has no annotation to score against"), Error);
}

TEST_CASE("batched_answers: prompts cut on the left, batched longest first, answers in order") {
  const PointCodec tok;
  std::vector<std::pair<std::int64_t, std::int64_t>> batches;  // (rows, seq)
  // The "model" answers each row with its last two real tokens.
  const auto generate = [&](const Batch& b) {
    batches.emplace_back(b.rows, b.seq);
    std::vector<std::vector<std::int32_t>> out(static_cast<std::size_t>(b.rows));
    for (std::int64_t r = 0; r < b.rows; ++r) {
      const auto* row = &b.input_ids[static_cast<std::size_t>(r * b.seq)];
      out[static_cast<std::size_t>(r)] = {row[b.seq - 2], row[b.seq - 1], tok.eos_id()};
    }
    return out;
  };
  const AnswerFn answer = batched_answers(tok, generate, 2, 4);
  const std::vector<std::string> prompts{"ab", "一二三四五六", "xyz"};
  CHECK(answer(prompts) == std::vector<std::string>{"ab", "五六", "yz"});
  // Longest first: (一二三四五六 cut to 4 tokens, xyz), then ab; left-padded to the longest.
  CHECK(batches == std::vector<std::pair<std::int64_t, std::int64_t>>{{2, 4}, {1, 2}});
  CHECK_THROWS_AS(batched_answers(tok, generate, 0, 4), Error);
}

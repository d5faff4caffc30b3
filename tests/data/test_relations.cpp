// Relation extraction from the two atomic prompts: the schema (passives folded into their
// active relation, symmetric relations told from the data), canonical triples, both steps'
// prompts byte for byte and their answers, answers read back (garbled ones counted), and the
// triple-level score worked out by hand.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "data_test_util.hpp"
#include "seqpar/data/json_records.hpp"
#include "seqpar/data/relation.hpp"

using namespace seqpar;
using seqpar::test::data_fixture;

namespace {

RelationSchema fixture_schema() {
  const RelationDataset d = read_relations(data_fixture("relation_fixture.jsonl"));
  return RelationSchema::of(d.labels(), d.records);
}

RelationTriple bare(const char* h, const char* r, const char* t) {
  return {h, r, t, std::nullopt, std::nullopt};
}

}  // namespace

TEST_CASE("the schema folds 被X into X and tells symmetric relations from the records") {
  const RelationSchema s = fixture_schema();
  CHECK(s.relations == std::vector<std::string>{"合并", "持股", "收购", "注资", "竞争"});
  CHECK(s.passive == std::map<std::string, std::string>{{"被持股", "持股"}, {"被收购", "收购"}});
  // 合并 and 竞争 are listed both ways; 注资 one way only: directed, without a passive.
  CHECK(s.symmetric == std::set<std::string>{"合并", "竞争"});
  CHECK(s.type_labels().back() == "无关系");
  CHECK(s.describe() ==
        "relations=合并,持股,收购,注资,竞争;passive=被持股>持股,被收购>收购;symmetric=合并,竞争");
  // One pair listed one way makes a relation directed.
  RelationRecord r;
  r.text = "甲乙丙";
  r.relations = {bare("甲", "合作", "乙"), bare("乙", "合作", "甲"), bare("甲", "合作", "丙")};
  const std::vector<std::string> labels{"合作"};
  CHECK(RelationSchema::of(labels, std::span(&r, 1)).symmetric.empty());
  const std::vector<std::string> bad{"无关系"};
  CHECK_THROWS_WITH_AS(RelationSchema::of(bad, {}), doctest::Contains("a relation is called"),
                       Error);
}

TEST_CASE("canonical triples: passives turned active, symmetric pairs in text order") {
  const RelationSchema s = fixture_schema();
  const std::string text = "华为与中兴在通信领域竞争，华为向海思注资";
  CHECK(s.canonical(text, {"搜狗", "被收购", "腾讯", CharSpan{6, 7}, CharSpan{0, 1}}) ==
        RelationTriple{"腾讯", "收购", "搜狗", CharSpan{0, 1}, CharSpan{6, 7}});
  CHECK(s.canonical(text, bare("中兴", "竞争", "华为")) == bare("华为", "竞争", "中兴"));
  CHECK(s.canonical(text, bare("华为", "竞争", "中兴")) == bare("华为", "竞争", "中兴"));
  // A directed relation keeps its order even against the text.
  CHECK(s.canonical(text, bare("海思", "注资", "华为")) == bare("海思", "注资", "华为"));
  // Each fact once, by relation, then where head and tail first occur.
  const std::vector<RelationTriple> listed{
      bare("中兴", "竞争", "华为"), bare("华为", "竞争", "中兴"), bare("华为", "注资", "海思")};
  CHECK(s.canonical_relations(text, listed) ==
        std::vector<RelationTriple>{bare("华为", "注资", "海思"), bare("华为", "竞争", "中兴")});
  // And back as the data lists them.
  CHECK(s.listed(bare("腾讯", "收购", "搜狗")) ==
        std::vector<RelationTriple>{bare("腾讯", "收购", "搜狗"), bare("搜狗", "被收购", "腾讯")});
  CHECK(s.listed(bare("华为", "竞争", "中兴")) ==
        std::vector<RelationTriple>{bare("华为", "竞争", "中兴"), bare("中兴", "竞争", "华为")});
  CHECK(s.listed(bare("华为", "注资", "海思")) ==
        std::vector<RelationTriple>{bare("华为", "注资", "海思")});
}

TEST_CASE("the two steps' prompts are byte for byte SeqGPT's 分类 and 抽取") {
  const RelationSchema s = fixture_schema();
  CHECK(relation_types_prompt("腾讯收购搜狗", s) ==
        "输入: 腾讯收购搜狗\n分类: 合并，持股，收购，注资，竞争，无关系\n输出: [GEN]");
  // 输入: 腾讯收购搜狗\n抽取: 收购的主体，收购的客体\n输出: [GEN], as UTF-8 bytes.
  CHECK(relation_prompt("腾讯收购搜狗", "收购") ==
        "\xE8\xBE\x93\xE5\x85\xA5: "
        "\xE8\x85\xBE\xE8\xAE\xAF\xE6\x94\xB6\xE8\xB4\xAD\xE6\x90\x9C\xE7\x8B\x97"
        "\n\xE6\x8A\xBD\xE5\x8F\x96: "
        "\xE6\x94\xB6\xE8\xB4\xAD\xE7\x9A\x84\xE4\xB8\xBB\xE4\xBD\x93\xEF\xBC\x8C"
        "\xE6\x94\xB6\xE8\xB4\xAD\xE7\x9A\x84\xE5\xAE\xA2\xE4\xBD\x93"
        "\n\xE8\xBE\x93\xE5\x87\xBA: [GEN]");
}

TEST_CASE("the answers that train both steps") {
  const RelationSchema s = fixture_schema();
  const std::vector<RelationTriple> two{bare("华为", "注资", "海思"), bare("华为", "竞争", "中兴")};
  CHECK(relation_types_answer(s, two) == "注资，竞争");
  CHECK(relation_types_answer(s, {}) == "无关系");
  CHECK(relation_answer("竞争", two) == "竞争的主体: 华为\n竞争的客体: 中兴");
  CHECK(relation_answer("收购", two) == "收购的主体: None\n收购的客体: None");
  // Pairs listed pair by pair: a head with two tails is listed twice.
  const std::vector<RelationTriple> fan{bare("甲", "收购", "乙"), bare("甲", "收购", "丙")};
  CHECK(relation_answer("收购", fan) == "收购的主体: 甲，甲\n收购的客体: 乙，丙");
  const RelationPairs back = parse_relation_answer(relation_answer("收购", fan), "收购");
  CHECK(back.pairs == std::vector<std::pair<std::string, std::string>>{{"甲", "乙"}, {"甲", "丙"}});
  CHECK(back.errors.total() == 0);
}

TEST_CASE("first-step answers read back; garbled pieces are counted") {
  const RelationSchema s = fixture_schema();
  CHECK(parse_relation_types("收购", s).relations == std::vector<std::string>{"收购"});
  // In the schema's order, each once; 无关系 beside relations is ignored.
  const RelationTypes a = parse_relation_types(" 竞争,收购，竞争，无关系 ", s);
  CHECK(a.relations == std::vector<std::string>{"收购", "竞争"});
  CHECK(a.errors.total() == 0);
  CHECK(parse_relation_types("无关系", s).relations.empty());
  CHECK(parse_relation_types("无关系", s).errors.total() == 0);
  CHECK(parse_relation_types("", s).errors == AnswerErrors{.empty = 1});
  CHECK(parse_relation_types("收购\n竞争", s).errors == AnswerErrors{.malformed = 1});
  CHECK(parse_relation_types("收购的主体: 腾讯", s).errors == AnswerErrors{.malformed = 1});
  // A passive is not a label of the prompt; nor is an invented relation.
  const RelationTypes b = parse_relation_types("被收购，收购，并购", s);
  CHECK(b.relations == std::vector<std::string>{"收购"});
  CHECK(b.errors == AnswerErrors{.unknown_label = 2});
}

TEST_CASE("second-step answers pair heads with tails; garbled lines are counted") {
  using Pairs = std::vector<std::pair<std::string, std::string>>;
  CHECK(parse_relation_answer("收购的主体: 腾讯\n收购的客体: 搜狗", "收购").pairs ==
        Pairs{{"腾讯", "搜狗"}});
  // Equal counts pair in order; unequal counts pair every head with every tail.
  CHECK(parse_relation_answer("收购的主体: 甲，乙\n收购的客体: 丙，丁", "收购").pairs ==
        Pairs{{"甲", "丙"}, {"乙", "丁"}});
  CHECK(parse_relation_answer("收购的主体: 甲\n收购的客体: 丙，丁", "收购").pairs ==
        Pairs{{"甲", "丙"}, {"甲", "丁"}});
  CHECK(parse_relation_answer("收购的主体: 甲\n收购的客体: None", "收购").pairs.empty());
  const RelationPairs g =
      parse_relation_answer("收购的主体: 甲\n持股的客体: 乙\n胡言乱语\n收购的客体: 丙", "收购");
  CHECK(g.pairs == Pairs{{"甲", "丙"}});
  CHECK(g.errors == AnswerErrors{.malformed = 1, .unknown_label = 1});
  CHECK(parse_relation_answer(" \n", "收购").errors == AnswerErrors{.empty = 1});
}

TEST_CASE("triple-level precision, recall and F1, worked out by hand") {
  RelationScore s;
  // Record 1: one of two right (the second has the wrong tail), one gold missed.
  s.add(std::vector<Triple>{{"腾讯", "收购", "搜狗"}, {"腾讯", "收购", "阿里"}},
        std::vector<Triple>{{"腾讯", "收购", "搜狗"}, {"华为", "竞争", "中兴"}});
  // Record 2: a repeated answer counts once; the relation must match as well.
  s.add(std::vector<Triple>{{"甲", "持股", "乙"}, {"甲", "持股", "乙"}, {"甲", "注资", "乙"}},
        std::vector<Triple>{{"甲", "持股", "乙"}});
  // Record 3: a negative answered as one.
  s.add({}, {});
  CHECK(s.micro() == PrfCounts{2, 4, 3});
  CHECK(s.micro().f1() == doctest::Approx(2 * 0.5 * (2.0 / 3) / (0.5 + 2.0 / 3)));
  CHECK(s.by_relation().at("收购") == PrfCounts{1, 2, 1});
  CHECK(s.by_relation().at("竞争") == PrfCounts{0, 0, 1});
  CHECK(s.by_relation().at("注资") == PrfCounts{0, 1, 0});
  CHECK(s.summary() == "P 0.5000 R 0.6667 F1 0.5714 (correct 2, predicted 4, gold 3)");
}

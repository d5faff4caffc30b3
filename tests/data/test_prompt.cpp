// SeqGPT prompts, label chunks and the answer contract: exact text, and answers read back.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "seqpar/data/prompt.hpp"

using namespace seqpar;

namespace {
NerRecord sample_record() {
  // 李娜 occurs twice; the second mention of a label follows the first in the answer.
  NerRecord r;
  r.text = "李娜和李娜的教练都来自武汉。";
  r.spans = {{"name", 0, 1, "李娜"},
             {"name", 3, 4, "李娜"},
             {"position", 6, 7, "教练"},
             {"address", 11, 12, "武汉"}};
  return r;
}
}  // namespace

TEST_CASE("the extraction prompt is byte for byte SeqGPT's") {
  const std::vector<std::string> labels{"人物", "地点"};
  const std::string p = seqgpt_prompt("张三在杭州。", Instruction::extraction, labels);
  // 输入: text \n 抽取: 人物，地点 \n 输出: [GEN], spelled as UTF-8 bytes so the check does not
  // depend on how this source file is read.
  const std::string want =
      "\xE8\xBE\x93\xE5\x85\xA5: "                                                // 输入:
      "\xE5\xBC\xA0\xE4\xB8\x89\xE5\x9C\xA8\xE6\x9D\xAD\xE5\xB7\x9E\xE3\x80\x82"  // 张三在杭州。
      "\n\xE6\x8A\xBD\xE5\x8F\x96: "                                              // 抽取:
      "\xE4\xBA\xBA\xE7\x89\xA9\xEF\xBC\x8C\xE5\x9C\xB0\xE7\x82\xB9"  // 人物，地点 (U+FF0C between)
      "\n\xE8\xBE\x93\xE5\x87\xBA: [GEN]";                            // 输出: [GEN]
  CHECK(p == want);
}

TEST_CASE("the classification prompt names the task 分类") {
  const std::vector<std::string> labels{"体育", "财经", "科技"};
  CHECK(seqgpt_prompt("股市大涨", Instruction::classification, labels) ==
        "输入: 股市大涨\n分类: 体育，财经，科技\n输出: [GEN]");
  CHECK(instruction_word(Instruction::classification) == "\xE5\x88\x86\xE7\xB1\xBB");
  CHECK(instruction_word(Instruction::extraction) == "\xE6\x8A\xBD\xE5\x8F\x96");
}

TEST_CASE("prompts refuse empty label lists and labels that would break the format") {
  const std::vector<std::string> none;
  CHECK_THROWS_WITH_AS(seqgpt_prompt("x", Instruction::extraction, none),
                       doctest::Contains("label list is empty"), Error);
  for (const std::string bad : {"a，b", "a\nb", "a: b", ""}) {
    const std::vector<std::string> labels{"ok", bad};
    CHECK_THROWS_AS(seqgpt_prompt("x", Instruction::extraction, labels), Error);
  }
}

TEST_CASE("label sets are cut into chunks of at most six, in order") {
  std::vector<std::string> ten;
  for (int i = 0; i < 10; ++i) ten.push_back("l" + std::to_string(i));
  const auto c = chunk_labels(ten);
  REQUIRE(c.size() == 2);
  CHECK(c[0] == std::vector<std::string>{"l0", "l1", "l2", "l3", "l4", "l5"});
  CHECK(c[1] == std::vector<std::string>{"l6", "l7", "l8", "l9"});
  CHECK(chunk_labels(std::vector<std::string>(ten.begin(), ten.begin() + 6)).size() == 1);
  CHECK(chunk_labels(std::vector<std::string>(ten.begin(), ten.begin() + 7)).back() ==
        std::vector<std::string>{"l6"});
  CHECK(chunk_labels(ten, 4).size() == 3);
  CHECK(chunk_labels(std::vector<std::string>{}).empty());
  CHECK_THROWS_AS(chunk_labels(ten, 0), Error);
}

TEST_CASE(
    "the answer has one line per label of the chunk, mentions in text order, None when absent") {
  const NerRecord r = sample_record();
  const std::vector<std::string> chunk{"name", "book", "address", "position"};
  CHECK(ner_answer(r, chunk) == "name: 李娜，李娜\nbook: None\naddress: 武汉\nposition: 教练");
  const std::vector<std::string> empty_chunk{"game"};
  CHECK(ner_answer(r, empty_chunk) == "game: None");
}

TEST_CASE("answers read back into the mentions they were made from") {
  const NerRecord r = sample_record();
  const std::vector<std::string> labels{"address", "book", "name", "position"};
  for (const auto& chunk : chunk_labels(labels, 2)) {
    const ParsedAnswer p = parse_answer(ner_answer(r, chunk), chunk);
    CHECK(p.bad_lines == 0);
    CHECK(p.unknown_labels == 0);
    auto got = p.mentions, want = gold_mentions(r, chunk);
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    CHECK(got == want);
  }
  CHECK(gold_mentions(r).size() == 4);
}

TEST_CASE("parsing tolerates spacing and ignores lines it cannot use") {
  const std::vector<std::string> chunk{"name", "address"};
  const ParsedAnswer p = parse_answer(
      "  name :  张三 ， 李四 \r\nnonsense line\ngame: 魔兽\naddress:上海\n\naddress: None", chunk);
  const std::vector<NerMention> want{{"name", "张三"}, {"name", "李四"}, {"address", "上海"}};
  CHECK(p.mentions == want);
  CHECK(p.bad_lines == 1);
  CHECK(p.unknown_labels == 1);
  // Without a label list every label is taken.
  CHECK(parse_answer("game: 魔兽").mentions == std::vector<NerMention>{{"game", "魔兽"}});
  CHECK(parse_answer("").mentions.empty());
}

TEST_CASE(
    "a mention holding the separator comes back in pieces (a documented limit of the format)") {
  NerRecord r;
  r.text = "看了《色，戒》";
  r.spans = {{"movie", 2, 6, "《色，戒》"}};
  const std::vector<std::string> chunk{"movie"};
  CHECK(ner_answer(r, chunk) == "movie: 《色，戒》");
  CHECK(parse_answer(ner_answer(r, chunk), chunk).mentions ==
        std::vector<NerMention>{{"movie", "《色"}, {"movie", "戒》"}});
}

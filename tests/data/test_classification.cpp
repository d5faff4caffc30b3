// Classification: SeqGPT's 分类 prompt over the whole label set, answers read back (garbled
// ones counted by kind), accuracy and macro-F1 against hand-worked figures and against
// scikit-learn (tests/data/fixtures/classification_golden.json, made by
// tools/make_classification_golden.py), the majority-class baseline.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data_test_util.hpp"
#include "seqpar/data/classification.hpp"

using namespace seqpar;
using seqpar::test::data_fixture;

TEST_CASE("the classification prompt is byte for byte SeqGPT's, over every label at once") {
  const std::vector<std::string> labels{"体育", "财经"};
  // 输入: 股市大涨\n分类: 体育，财经\n输出: [GEN], spelled as UTF-8 bytes.
  CHECK(classification_prompt("股市大涨", labels) ==
        "\xE8\xBE\x93\xE5\x85\xA5: "
        "\xE8\x82\xA1\xE5\xB8\x82\xE5\xA4\xA7\xE6\xB6\xA8"
        "\n\xE5\x88\x86\xE7\xB1\xBB: "
        "\xE4\xBD\x93\xE8\x82\xB2\xEF\xBC\x8C\xE8\xB4\xA2\xE7\xBB\x8F"
        "\n\xE8\xBE\x93\xE5\x87\xBA: [GEN]");
  // No chunks: SMP2017's 31 labels make one prompt.
  std::vector<std::string> many;
  for (int i = 0; i < 31; ++i) many.push_back("l" + std::to_string(i));
  const std::string p = classification_prompt("x", many);
  CHECK(p.find("l0，l1，") != std::string::npos);
  CHECK(p.find("，l30\n输出: [GEN]") != std::string::npos);
  // An ASCII comma would be a separator to SeqGPT's inference: refused.
  const std::vector<std::string> comma{"a,b"};
  CHECK_THROWS_WITH_AS(classification_prompt("x", comma), doctest::Contains("holds ','"), Error);
}

TEST_CASE("an answer is exactly one label of the set; anything else is counted by kind") {
  const std::vector<std::string> labels{"体育", "财经", "科技"};
  const auto label_of = [&](const char* a) { return parse_class_answer(a, labels).label; };
  CHECK(label_of("体育") == "体育");
  CHECK(label_of("  财经 \r\n") == "财经");
  struct Garbled {
    const char* answer;
    AnswerErrors want;
  };
  for (const auto& g : {
           Garbled{"", {.empty = 1}},
           Garbled{" \n ", {.empty = 1}},
           Garbled{"体育\n财经", {.malformed = 1}},
           Garbled{"体育: 国足", {.malformed = 1}},
           Garbled{"体育，财经", {.several_labels = 1}},
           Garbled{"体育, 科技，财经", {.several_labels = 1}},
           Garbled{"足球", {.unknown_label = 1}},
           Garbled{"体育，足球", {.unknown_label = 1}},
           Garbled{"体育，", {.unknown_label = 1}},
           Garbled{"体育。", {.unknown_label = 1}},
       }) {
    CAPTURE(g.answer);
    const ClassAnswer a = parse_class_answer(g.answer, labels);
    CHECK(a.label.empty());
    CHECK(a.errors == g.want);
    CHECK(a.errors.total() == 1);
  }
}

TEST_CASE("accuracy, macro-F1 and the per-label table, worked out by hand") {
  ClassificationScore s;
  // gold 体育 x3, 财经 x2, 科技 x1; answers: 体育 体育 财经 | 财经 (garbled) | 体育
  s.add("体育", "体育");
  s.add("体育", "体育");
  s.add("财经", "体育");
  s.add("财经", "财经");
  s.add("", "财经");
  s.add("体育", "科技");
  CHECK(s.records() == 6);
  CHECK(s.correct() == 3);
  CHECK(s.accuracy() == doctest::Approx(0.5));
  const auto& by = s.by_label();
  CHECK(by.at("体育") == PrfCounts{2, 3, 3});  // P 2/3, R 2/3
  CHECK(by.at("财经") == PrfCounts{1, 2, 2});  // P 1/2, R 1/2
  CHECK(by.at("科技") == PrfCounts{0, 0, 1});  // never answered: F1 0
  // macro-F1 = (2/3 + 1/2 + 0) / 3
  CHECK(s.macro_f1() == doctest::Approx((2.0 / 3 + 0.5 + 0) / 3));
  CHECK(s.summary() == "accuracy 0.5000 macro-F1 0.3889 (3 of 6)");
  CHECK(s.table() ==
        "体育  P 0.6667  R 0.6667  F1 0.6667  support 3\n"
        "科技  P 0.0000  R 0.0000  F1 0.0000  support 1\n"
        "财经  P 0.5000  R 0.5000  F1 0.5000  support 2\n");
}

TEST_CASE("the scores equal scikit-learn's on sixty answers with garbled ones") {
  std::ifstream in(data_fixture("classification_golden.json"));
  REQUIRE(in.good());
  const auto golden = nlohmann::json::parse(in);
  const auto gold = golden.at("gold").get<std::vector<std::string>>();
  const auto& answers = golden.at("answers");
  REQUIRE(gold.size() == answers.size());
  ClassificationScore s;
  for (std::size_t i = 0; i < gold.size(); ++i)
    s.add(answers[i].is_null() ? std::string() : answers[i].get<std::string>(), gold[i]);
  CHECK(s.accuracy() == doctest::Approx(golden.at("accuracy").get<double>()).epsilon(1e-12));
  CHECK(s.macro_f1() == doctest::Approx(golden.at("macro_f1").get<double>()).epsilon(1e-12));
  const auto& per = golden.at("per_label");
  REQUIRE(s.by_label().size() == per.size());
  for (const auto& [label, c] : s.by_label()) {
    CAPTURE(label);
    const auto& want = per.at(label);
    CHECK(c.precision() == doctest::Approx(want.at("precision").get<double>()).epsilon(1e-12));
    CHECK(c.recall() == doctest::Approx(want.at("recall").get<double>()).epsilon(1e-12));
    CHECK(c.f1() == doctest::Approx(want.at("f1").get<double>()).epsilon(1e-12));
    CHECK(c.gold == want.at("support").get<std::int64_t>());
  }
}

TEST_CASE("the majority class of the training labels is the baseline") {
  std::vector<ClassRecord> train(5), dev(4);
  const char* train_labels[] = {"财经", "体育", "财经", "体育", "科技"};
  for (int i = 0; i < 5; ++i) train[static_cast<std::size_t>(i)].label = train_labels[i];
  // 体育 and 财经 tie at 2: the smaller in byte order (体 E4 < 财 E8).
  CHECK(majority_label(train) == "体育");
  train[4].label = "财经";
  CHECK(majority_label(train) == "财经");
  const char* dev_labels[] = {"财经", "体育", "财经", "科技"};
  for (int i = 0; i < 4; ++i) dev[static_cast<std::size_t>(i)].label = dev_labels[i];
  const ClassificationScore b = constant_score(dev, "财经");
  CHECK(b.accuracy() == doctest::Approx(0.5));
  // 财经: P 2/4, R 1, F1 2/3; 体育 and 科技: 0. Macro over the three.
  CHECK(b.macro_f1() == doctest::Approx((2.0 / 3) / 3));
  CHECK_THROWS_WITH_AS(majority_label(std::vector<ClassRecord>(2)),
                       doctest::Contains("no record has a class label"), Error);
}

// Entity-level micro precision, recall and F1 on hand-made cases, worked out by hand.
#include <doctest/doctest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "seqpar/data/classification.hpp"
#include "seqpar/data/metrics.hpp"
#include "seqpar/data/task_json.hpp"

using namespace seqpar;

TEST_CASE("matching counts a mention once per occurrence: (label, text) multisets") {
  const std::vector<NerMention> gold{{"name", "李娜"}, {"name", "李娜"}, {"address", "武汉"}};
  CHECK(match_mentions(gold, gold) == PrfCounts{3, 3, 3});
  // One 李娜 predicted: it matches one of the two gold ones.
  CHECK(match_mentions(std::vector<NerMention>{{"name", "李娜"}}, gold) == PrfCounts{1, 1, 3});
  // Predicted three times: only two are right.
  const std::vector<NerMention> thrice{{"name", "李娜"}, {"name", "李娜"}, {"name", "李娜"}};
  CHECK(match_mentions(thrice, gold) == PrfCounts{2, 3, 3});
  // The label must match as well as the text.
  CHECK(match_mentions(std::vector<NerMention>{{"address", "李娜"}}, gold) == PrfCounts{0, 1, 3});
  CHECK(match_mentions({}, gold) == PrfCounts{0, 0, 3});
  CHECK(match_mentions(gold, {}) == PrfCounts{0, 3, 0});
}

TEST_CASE("precision, recall and F1 from counts") {
  const PrfCounts c{2, 4, 5};
  CHECK(c.precision() == doctest::Approx(0.5));
  CHECK(c.recall() == doctest::Approx(0.4));
  CHECK(c.f1() == doctest::Approx(2 * 0.5 * 0.4 / 0.9));
  CHECK(PrfCounts{}.precision() == 0.0);
  CHECK(PrfCounts{}.recall() == 0.0);
  CHECK(PrfCounts{}.f1() == 0.0);
  CHECK(PrfCounts{0, 3, 0}.f1() == 0.0);
  CHECK(PrfCounts{3, 3, 3}.f1() == doctest::Approx(1.0));
}

TEST_CASE("the score is micro-averaged over prompts and split by label") {
  NerScore s;
  // Prompt 1: 2 of 3 predictions right, 2 of 2 gold found.
  s.add(std::vector<NerMention>{{"name", "张三"}, {"address", "上海"}, {"address", "北京"}},
        std::vector<NerMention>{{"name", "张三"}, {"address", "上海"}});
  // Prompt 2: the right text under the wrong label, and a gold mention missed.
  s.add(std::vector<NerMention>{{"company", "阿里"}},
        std::vector<NerMention>{{"organization", "阿里"}, {"name", "王五"}});
  // Prompt 3: nothing to find, nothing found.
  s.add({}, {});
  CHECK(s.micro() == PrfCounts{2, 4, 4});
  CHECK(s.micro().precision() == doctest::Approx(0.5));
  CHECK(s.micro().recall() == doctest::Approx(0.5));
  CHECK(s.micro().f1() == doctest::Approx(0.5));
  const auto& by = s.by_label();
  CHECK(by.at("name") == PrfCounts{1, 1, 2});
  CHECK(by.at("address") == PrfCounts{1, 2, 1});
  CHECK(by.at("company") == PrfCounts{0, 1, 0});
  CHECK(by.at("organization") == PrfCounts{0, 0, 1});
  // Per-label counts add up to the micro counts.
  PrfCounts sum;
  for (const auto& [label, c] : by) sum += c;
  CHECK(sum == s.micro());
  CHECK(s.summary() == "P 0.5000 R 0.5000 F1 0.5000 (correct 2, predicted 4, gold 4)");
}

TEST_CASE("a mention matched in one prompt cannot be matched by another prompt's prediction") {
  NerScore s;
  s.add(std::vector<NerMention>{}, std::vector<NerMention>{{"name", "张三"}});
  s.add(std::vector<NerMention>{{"name", "张三"}}, std::vector<NerMention>{});
  CHECK(s.micro() == PrfCounts{0, 1, 1});
}

TEST_CASE("per-label tables align CJK labels by display width") {
  CHECK(detail::display_width("abc") == 3);
  CHECK(detail::display_width("人名") == 4);
  CHECK(detail::display_width("ＡＢ") == 4);       // fullwidth forms
  CHECK(detail::display_width("e\xcc\x81") == 1);  // e and a combining acute accent
  const std::map<std::string, PrfCounts> by{
      {"address", {1, 1, 1}}, {"人名", {2, 1, 1}}, {"组织机构名称很长的标签", {1, 2, 1}}};
  // Each line's "F1" starts at the same terminal column.
  std::vector<std::int64_t> columns;
  std::istringstream lines(detail::prf_lines(by));
  for (std::string line; std::getline(lines, line);)
    columns.push_back(detail::display_width(line.substr(0, line.find(" F1 "))));
  REQUIRE(columns.size() == 3);
  CHECK(columns[0] == columns[1]);
  CHECK(columns[1] == columns[2]);
  ClassificationScore s;
  s.add("体育", "体育");
  s.add("finance", "体育");
  std::istringstream table(s.table());
  std::vector<std::int64_t> at;
  for (std::string line; std::getline(table, line);)
    at.push_back(detail::display_width(line.substr(0, line.find("P "))));
  REQUIRE(at.size() == 2);
  CHECK(at[0] == at[1]);
}

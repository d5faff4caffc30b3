// Entity-level micro precision, recall and F1 on hand-made cases, worked out by hand.
#include <doctest/doctest.h>

#include <vector>

#include "seqpar/data/metrics.hpp"

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

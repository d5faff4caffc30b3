// The dev sample of an evaluation during training (data/sample.hpp, AnyRecords::sample): on
// a split grouped by label, as SMP2017-ECDT's dev file is, the first records cover a few
// labels; a stratified sample covers every label in proportion, the same for a seed, and
// takes the records it names.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "data_test_util.hpp"
#include "seqpar/data/any_task.hpp"
#include "seqpar/data/sample.hpp"
#include "seqpar/data/tasks.hpp"

using namespace seqpar;

namespace {

// 20 labels, grouped in the file: label k has 5 + 5k records (a long tail of rare labels
// first, one frequent label last).
std::vector<std::vector<std::string>> grouped() {
  std::vector<std::vector<std::string>> labels;
  for (int k = 0; k < 20; ++k)
    for (int i = 0; i < 5 + 5 * k; ++i) labels.push_back({"L" + std::to_string(k)});
  return labels;
}

std::map<std::string, int> counts(const std::vector<std::vector<std::string>>& labels,
                                  const RecordSample& s) {
  std::map<std::string, int> n;
  for (const auto i : s.indices) ++n[labels[i].front()];
  return n;
}

}  // namespace

TEST_CASE("a stratified sample covers every label, in proportion, the same for a seed") {
  const auto labels = grouped();  // 1,050 records
  const RecordSample s = stratified_sample(labels, 100, 42);
  CHECK(s.indices.size() == 100);
  CHECK(s.of == labels.size());
  CHECK(s.strata == 20);
  CHECK(std::set<std::size_t>(s.indices.begin(), s.indices.end()).size() == 100);
  CHECK(std::is_sorted(s.indices.begin(), s.indices.end()));
  const auto n = counts(labels, s);
  CHECK(n.size() == 20);  // the first 100 records would hold 5 labels
  // Each label near its share of 100: (5 + 5k) / 1050 of the records.
  for (int k = 0; k < 20; ++k) {
    const double share = 100.0 * (5 + 5 * k) / 1050.0;
    CHECK(std::abs(n.at("L" + std::to_string(k)) - share) <= 1.5);
  }
  CHECK(stratified_sample(labels, 100, 42).indices == s.indices);
  CHECK(stratified_sample(labels, 100, 43).indices != s.indices);
  // Fewer records asked than labels: one of each of the rarest.
  const RecordSample few = stratified_sample(labels, 5, 1);
  CHECK(counts(labels, few) ==
        std::map<std::string, int>{{"L0", 1}, {"L1", 1}, {"L2", 1}, {"L3", 1}, {"L4", 1}});
  // 0 or more than there are: all of them, said so.
  CHECK(stratified_sample(labels, 0, 1).whole());
  CHECK(stratified_sample(labels, 5000, 1).indices.size() == labels.size());
  CHECK(stratified_sample(labels, 0, 1).describe() == "all 1050 records");
  CHECK(s.describe() == "100 of 1050 records (seed 42, stratified over 20 labels)");
  CHECK(s.json()["size"] == 100);
  CHECK(s.json()["stratified_by"] == "label");
}

TEST_CASE("a record of several labels counts under its rarest; unlabelled records too") {
  std::vector<std::vector<std::string>> labels;
  for (int i = 0; i < 30; ++i) labels.push_back({"common"});
  for (int i = 0; i < 3; ++i) labels.push_back({"common", "rare"});
  for (int i = 0; i < 7; ++i) labels.push_back({});
  const RecordSample s = stratified_sample(labels, 8, 3);
  CHECK(s.strata == 3);
  int rare = 0, none = 0;
  for (const auto i : s.indices) {
    rare += labels[i].size() == 2;
    none += labels[i].empty();
  }
  CHECK(rare >= 1);
  CHECK(none >= 1);
  CHECK(s.indices.size() == 8);
}

TEST_CASE("AnyRecords::sample takes the records its indices name") {
  const auto [task, records] = StandardTasks::train(
      "classification", seqpar::test::data_fixture("classification_fixture.jsonl"), {}, {});
  const auto [some, s] = records.sample(3, 7);
  REQUIRE(some.size() == 3);
  for (std::size_t k = 0; k < 3; ++k) {
    CHECK(some.texts()[k].text == records.texts()[s.indices[k]].text);
    CHECK(some.as<ClassRecord>()[k].label == records.as<ClassRecord>()[s.indices[k]].label);
  }
  // Every class of the fixture is in a sample of as many records as classes.
  std::set<std::string> classes;
  const auto three = records.sample(3, 1).first;
  for (const auto& r : three.as<ClassRecord>()) classes.insert(r.label);
  CHECK(classes.size() == 3);
}

// The JSON record reader for every task: classification, relation and text-only records,
// the committed fixtures, record ids, task recognition (a wrong or contradicted task is
// refused naming file, line and record) and every kind of bad record (skipped and counted,
// or a seqpar::Error naming file, line, record and problem).
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "data_test_util.hpp"
#include "seqpar/data/cluener.hpp"
#include "seqpar/data/conll.hpp"
#include "seqpar/data/json_records.hpp"
#include "seqpar/data/tasks.hpp"

using namespace seqpar;
using seqpar::test::data_fixture;
using seqpar::test::TempDir;

namespace {

RecordId number_id(std::int64_t n, bool from_file = true) { return {n, {}, false, from_file}; }

const std::string good_class = R"({"text": "国足战平叙利亚", "label": "体育"})";
const std::string good_relation =
    R"({"text": "腾讯收购搜狗", "relations": [{"head": "腾讯", "head_span": [0, 1], )"
    R"("relation": "收购", "tail": "搜狗", "tail_span": [4, 5]}]})";

struct BadCase {
  std::string line;
  const char* reason;
  const char* says;
};

// Each bad record between two good ones (on line 2): skipped and counted with its reason and
// a message naming file, line and record; in fail mode the same message is thrown.
// `read` is the task's reader (T::read).
template <class Read>
void check_bad_cases(const std::vector<BadCase>& cases, const std::string& good, Read read,
                     const ReadOptions& o) {
  TempDir dir;
  for (const auto& c : cases) {
    CAPTURE(c.line);
    const auto p = dir.write("bad.jsonl", good + "\n" + c.line + "\n" + good + "\n");
    const auto d = read(p, o);
    CHECK(d.records.size() == 2);
    CHECK(d.report.skipped == 1);
    CHECK(d.report.skipped_by_reason.count(c.reason) == 1);
    REQUIRE(d.report.problems.size() == 1);
    CHECK(d.report.problems[0].find(p.string() + ":2: record 2: ") == 0);
    CHECK(d.report.problems[0].find(c.says) != std::string::npos);
    ReadOptions strict = o;
    strict.on_bad = OnBadRecord::fail;
    CHECK_THROWS_WITH_AS(read(p, strict), doctest::Contains(c.says), Error);
  }
}

}  // namespace

TEST_CASE("fixture: classification records keep text, class and id") {
  const ClassDataset d = read_classification(data_fixture("classification_fixture.jsonl"));
  REQUIRE(d.records.size() == 6);
  CHECK(d.task() == "classification");
  CHECK(d.labels() == std::vector<std::string>{"体育", "科技", "财经"});
  CHECK(d.records[0].text == "国足客场战平叙利亚");
  CHECK(d.records[0].label == "体育");
  CHECK(d.records[0].labelled);
  CHECK(d.records[0].id == number_id(1));
  CHECK(d.records[3].id == RecordId{0, "n-4", true, true});
  CHECK(d.records[3].id.text() == "n-4");
  // No "id": the record is known by its line.
  CHECK(d.records[4].id == number_id(5, false));
  CHECK(d.records[4].line == 5);
  CHECK(d.report.summary() ==
        data_fixture("classification_fixture.jsonl").string() + ": 6 records, 0 skipped");
}

TEST_CASE("fixture: relation records keep their triples as listed, spans or none") {
  const RelationDataset d = read_relations(data_fixture("relation_fixture.jsonl"));
  REQUIRE(d.records.size() == 5);
  CHECK(d.task() == "relation");
  CHECK(d.report.mentions == 9);
  CHECK(d.report.summary().find(": 5 records, 9 relations, 0 skipped") != std::string::npos);
  CHECK(d.labels() ==
        std::vector<std::string>{"合并", "持股", "收购", "注资", "竞争", "被持股", "被收购"});
  CHECK(d.records[0].relations[0] ==
        RelationTriple{"东方航空", "合并", "上航", CharSpan{0, 3}, CharSpan{14, 15}});
  // A negative: no relation, still annotated.
  CHECK(d.records[2].relations.empty());
  CHECK(d.records[2].labelled);
  // 工行 occurs twice: the file gives no span.
  CHECK(d.records[3].relations[0] ==
        RelationTriple{"工行", "被持股", "美国运通", std::nullopt, CharSpan{3, 6}});
  CHECK(d.records[4].id == number_id(5, false));
}

TEST_CASE("fixture: a test file of text only reads into texts and ids") {
  const auto file = data_fixture("texts_fixture.json");
  // No annotated record: no task is recognised.
  CHECK(recognise_json_task(file, builtin_json_shapes).empty());
  {
    const TextDataset d = read_texts(file);
    REQUIRE(d.records.size() == 3);
    CHECK(d.task().empty());
    CHECK(d.records[1].text == "李娜和李娜的教练都来自武汉。");
    CHECK(d.records[1].id == number_id(1));
    CHECK(d.records[1].line == 5);
    for (const auto& r : d.records) CHECK_FALSE(r.labelled);
  }
  // read_texts takes the text and id of any record and leaves its annotation unread.
  const TextDataset texts = read_texts(data_fixture("relation_fixture.jsonl"));
  REQUIRE(texts.records.size() == 5);
  CHECK(texts.task().empty());
  CHECK(texts.records[0].text == "东方航空AH股临时停牌传将与上航合并");
  CHECK_FALSE(texts.records[0].labelled);
  // A task's reader takes a file of text only as records without annotation.
  const ClassDataset unannotated = read_classification(file);
  REQUIRE(unannotated.records.size() == 3);
  CHECK_FALSE(unannotated.records[0].labelled);
  CHECK(unannotated.records[0].label.empty());
}

TEST_CASE("the task is recognised from the first annotated record") {
  const auto recognise = [](const std::filesystem::path& p) {
    return recognise_json_task(p, builtin_json_shapes);
  };
  CHECK(recognise(data_fixture("classification_fixture.jsonl")) == "classification");
  CHECK(recognise(data_fixture("relation_fixture.jsonl")) == "relation");
  CHECK(recognise(data_fixture("cluener_fixture.json")) == "ner");
  CHECK(NerTask::read(data_fixture("cluener_fixture.jsonl"), {}).records.size() == 5);
  TempDir dir;
  // Text-only records first, then a classification record: the file is classification.
  const auto p = dir.write("t.jsonl", "{\"text\": \"x\"}\n" + good_class + "\n");
  CHECK(recognise(p) == "classification");
  const ClassDataset d = read_classification(p);
  CHECK(d.task() == "classification");
  CHECK_FALSE(d.records[0].labelled);
  CHECK(d.records[1].labelled);
}

TEST_CASE("a named task that the records contradict is refused with the record") {
  const auto cls = data_fixture("classification_fixture.jsonl");
  CHECK_THROWS_WITH_AS(
      read_cluener(cls),
      doctest::Contains((cls.string() + ":1: record 1 is a classification record (its \"label\" "
                                        "is a string); the task ner reads NER records")
                            .c_str()),
      Error);
  CHECK_THROWS_WITH_AS(read_cluener(cls), doctest::Contains(":1: record 1 is a classification"),
                       Error);
  const auto rel = data_fixture("relation_fixture.jsonl");
  CHECK_THROWS_WITH_AS(read_classification(rel),
                       doctest::Contains(":1: record 1 is a relation record (it has "
                                         "\"relations\"); the task classification reads"),
                       Error);
  CHECK_THROWS_WITH_AS(read_relations(data_fixture("cluener_fixture.json")),
                       doctest::Contains(":1: record 1 is a ner record (its \"label\" is an "
                                         "object); the task relation reads relation records"),
                       Error);
  // Refused in every mode: the file is of another task, not a bad record.
  ReadOptions skip;
  skip.on_bad = OnBadRecord::skip;
  CHECK_THROWS_AS(read_classification(rel, skip), Error);
}

TEST_CASE("a record that contradicts the recognised task is refused naming both records") {
  TempDir dir;
  const auto p = dir.write("mixed.jsonl", good_class + "\n{\"text\": \"y\"}\n" + good_relation +
                                              "\n" + good_class + "\n");
  const std::string want =
      p.string() + ":3: record 3 is a relation record (it has \"relations\"), but " + p.string() +
      ":1: record 1 (its \"label\" is a string) made the file's task "
      "classification";
  CHECK_THROWS_WITH_AS(recognise_json_task(p, builtin_json_shapes), doctest::Contains(want.c_str()),
                       Error);
}

TEST_CASE("bad classification records are skipped, counted and described") {
  ReadOptions o;
  o.labels = {"体育", "财经"};
  o.max_chars = 10;
  o.keep_problems = 100;
  check_bad_cases(
      {
          {R"({"text": "x", "label": ""})", "bad_label", "label '' is empty"},
          {R"({"text": "x", "label": "体育，财经"})", "bad_label", "holds '，'"},
          {R"({"text": "x", "label": "体育,财经"})", "bad_label", "holds ','"},
          {R"({"text": "x", "label": "a: b"})", "bad_label", "holds ': '"},
          {R"({"text": "x", "label": "科技"})", "unknown_label", "label '科技' is not one of"},
          {R"({"text": "x", "label": 5})", "bad_label_field", "\"label\" is an integer"},
          {R"({"text": "x", "label": "体育", "relations": []})", "bad_label_field",
           "has both \"label\" and \"relations\""},
          {R"({"label": "体育"})", "missing_text", "no \"text\""},
          {R"({"text": "一二三四五六七八九十壹", "label": "体育"})", "too_long",
           "11 characters; the limit is 10"},
          {R"({"id": 1.5, "text": "x", "label": "体育"})", "bad_id",
           "\"id\" is a floating-point number; expected an integer or a string"},
          {R"({"id": true, "text": "x", "label": "体育"})", "bad_id", "\"id\" is a boolean"},
          {R"({"id": "", "text": "x", "label": "体育"})", "bad_id", "\"id\" is an empty string"},
          {R"({"id": 18446744073709551615, "text": "x", "label": "体育"})", "bad_id",
           "above 2^63 - 1"},
          {R"({"text": "x", "label": "体育")", "malformed_json", "not valid JSON"},
      },
      good_class, &ClassificationTask::read, o);
}

TEST_CASE("bad relation records are skipped, counted and described") {
  ReadOptions o;
  o.labels = {"收购", "被收购"};
  o.keep_problems = 100;
  const auto rel = [](const std::string& body) {
    return R"({"text": "腾讯收购搜狗", "relations": [)" + body + "]}";
  };
  check_bad_cases(
      {
          {R"({"text": "腾讯收购搜狗", "relations": {}})", "bad_relation",
           "\"relations\" is an object; expected [{"},
          {rel("5"), "bad_relation", "relation 1 is an integer; expected an object"},
          {rel(R"({"relation": "收购", "tail": "搜狗"})"), "bad_relation",
           "relation 1: \"head\" is missing; expected a non-empty string"},
          {rel(R"({"head": "腾讯", "relation": "收购", "tail": ""})"), "bad_relation",
           "relation 1: \"tail\" is empty"},
          {rel(R"({"head": "腾讯", "relation": 3, "tail": "搜狗"})"), "bad_relation",
           "\"relation\" is an integer"},
          {rel(R"({"head": "腾讯", "relation": "收购", "tail": "搜狗"}, {"head": "腾讯", )"
               R"("head_span": [0], "relation": "收购", "tail": "搜狗"})"),
           "bad_span", "relation 2 (head_span of '腾讯'): span [0] is not [start, end]"},
          {rel(R"({"head": "腾讯", "relation": "收购", "tail": "搜狗", "tail_span": [4, 6]})"),
           "span_outside_text", "span [4, 6] is outside the text of 6 characters"},
          {rel(R"({"head": "腾讯", "head_span": [1, 2], "relation": "收购", "tail": "搜狗"})"),
           "span_mismatch", "span [1, 2] reads '讯收'"},
          {rel(R"({"head": "阿里", "relation": "收购", "tail": "搜狗"})"), "entity_not_in_text",
           "relation 1: '阿里' does not occur in the text"},
          {rel(R"({"head": "腾讯", "relation": "收，购", "tail": "搜狗"})"), "bad_label",
           "relation 1: relation '收，购' holds '，'"},
          {rel(R"({"head": "腾讯", "relation": "持股", "tail": "搜狗"})"), "unknown_label",
           "label '持股' is not one of"},
      },
      good_relation, &RelationTask::read, o);
}

TEST_CASE("ids: the file's, else the line; a repeated id is a bad record") {
  TempDir dir;
  // .jsonl without ids: each record is known by its line (blank lines count).
  const auto lines = dir.write("l.jsonl", good_class + "\n\n" + good_class + "\n");
  const ClassDataset l = read_classification(lines);
  REQUIRE(l.records.size() == 2);
  CHECK(l.records[0].id == number_id(1, false));
  CHECK(l.records[1].id == number_id(3, false));
  // Pretty-printed .json: the line where the record starts.
  const auto pretty = dir.write("p.json",
                                "{\n \"text\": \"a\",\n \"label\": \"体育\"\n}\n{\n "
                                "\"text\": \"b\",\n \"label\": \"体育\"\n}\n");
  const ClassDataset p = read_classification(pretty);
  REQUIRE(p.records.size() == 2);
  CHECK(p.records[1].id == number_id(5, false));
  // A top-level array has no lines: a record's place in it.
  const auto array = dir.write("a.json", "[" + good_class + ", " + good_class + "]");
  const ClassDataset a = read_classification(array);
  REQUIRE(a.records.size() == 2);
  CHECK(a.records[1].id == number_id(2, false));
  CHECK(a.records[1].line == 0);
  // Ids are kept as written, negative and string ids included.
  const auto kinds = dir.write("k.jsonl", R"({"id": -3, "text": "a", "label": "体育"})"
                                          "\n"
                                          R"({"id": "3", "text": "b", "label": "体育"})"
                                          "\n");
  const ClassDataset k = read_classification(kinds);
  CHECK(k.records[0].id == number_id(-3));
  CHECK(k.records[1].id == RecordId{0, "3", true, true});
  // A repeated id, or an id that repeats another record's line, is a bad record.
  ReadOptions o;
  o.keep_problems = 10;
  const auto twice = dir.write("d.jsonl", R"({"id": 7, "text": "a", "label": "体育"})"
                                          "\n"
                                          R"({"id": 7, "text": "b", "label": "体育"})"
                                          "\n"
                                          R"({"id": 4, "text": "c", "label": "体育"})"
                                          "\n" +
                                              good_class + "\n");
  const ClassDataset d = read_classification(twice, o);
  CHECK(d.records.size() == 2);
  CHECK(d.report.skipped_by_reason.at("duplicate_id") == 2);
  CHECK(d.report.problems[0].find(":2: record 2: id 7 is also the id of " + twice.string() +
                                  ":1: record 1") != std::string::npos);
  CHECK(d.report.problems[1].find(":4: record 4: id 4 is also the id of") != std::string::npos);
  CHECK(d.report.problems[1].find("known by its line") != std::string::npos);
}

TEST_CASE("CLUENER and CoNLL records get ids too") {
  const NerDataset c = read_cluener(data_fixture("cluener_fixture.json"));
  CHECK(c.records[1].id == number_id(c.records[1].line, false));
  const NerDataset b = read_conll(data_fixture("conll_fixture.txt"));
  CHECK(b.records[1].id == number_id(14, false));
}

TEST_CASE("files that are not JSON records are refused with an Error that names them") {
  TempDir dir;
  CHECK_THROWS_WITH_AS(read_classification(dir.path / "none.jsonl"),
                       doctest::Contains("no such file; expected classification records"), Error);
  CHECK_THROWS_WITH_AS(read_texts(data_fixture("conll_fixture.txt")),
                       doctest::Contains(":1: starts with '张 B-name'"), Error);
  CHECK_THROWS_WITH_AS(read_relations(dir.write("e.jsonl", "\n")),
                       doctest::Contains("holds no records; expected relation records"), Error);
  CHECK_THROWS_WITH_AS(
      recognise_json_task(dir.write("bad.jsonl", "{\"a\": 1}\n"), builtin_json_shapes),
      doctest::Contains("no record could be read (1 skipped)"), Error);
}

// The CLUENER JSON and CoNLL BIO readers: the committed fixtures, and every kind of bad
// input (skipped and counted, or a seqpar::Error naming file, line, record and problem).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "data_test_util.hpp"
#include "seqpar/data/cluener.hpp"
#include "seqpar/data/conll.hpp"

using namespace seqpar;
using seqpar::test::data_fixture;
using seqpar::test::TempDir;

namespace {

// The fixture's records, written out by hand (code-point spans, end inclusive).
std::vector<NerRecord> fixture_records() {
  return {
      {{"张伟在北京大学担任教授。"},
       {{"name", 0, 1, "张伟"}, {"organization", 3, 6, "北京大学"}, {"position", 9, 10, "教授"}}},
      {{"李娜和李娜的教练都来自武汉。"},
       {{"name", 0, 1, "李娜"},
        {"name", 3, 4, "李娜"},
        {"position", 6, 7, "教练"},
        {"address", 11, 12, "武汉"}}},
      {{"《三体》是刘慈欣写的书，腾讯游戏也改编了它。"},
       {{"book", 0, 3, "《三体》"}, {"name", 5, 7, "刘慈欣"}, {"company", 12, 15, "腾讯游戏"}}},
      {{"CSOL玩家在上海聚会"}, {{"game", 0, 3, "CSOL"}, {"address", 7, 8, "上海"}}},
      {{"今天天气很好。"}, {}},
  };
}

void check_fixture(const NerDataset& d) {
  const auto want = fixture_records();
  REQUIRE(d.records.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CHECK(d.records[i].text == want[i].text);
    CHECK(d.records[i].spans == want[i].spans);
    CHECK(d.records[i].labelled);
  }
  CHECK(d.report.records == 5);
  CHECK(d.report.mentions == 12);
  CHECK(d.report.skipped == 0);
  CHECK(d.labels() == std::vector<std::string>{"address", "book", "company", "game", "name",
                                               "organization", "position"});
}

const std::string good_line =
    R"({"text": "王芳在上海工作", "label": {"name": {"王芳": [[0, 1]]}, "address": {"上海": [[3, 4]]}}})";

}  // namespace

TEST_CASE("fixture: pretty-printed CLUENER JSON reads into the expected records") {
  const NerDataset d = read_cluener(data_fixture("cluener_fixture.json"));
  check_fixture(d);
  CHECK(d.records[0].line == 1);
  CHECK(d.records[1].line > d.records[0].line);
}

TEST_CASE("fixture: one-object-per-line CLUENER JSON reads into the same records") {
  const NerDataset d = read_cluener(data_fixture("cluener_fixture.jsonl"));
  check_fixture(d);
  for (std::size_t i = 0; i < d.records.size(); ++i)
    CHECK(d.records[i].line == static_cast<std::int64_t>(i + 1));
  // Read as concatenated objects, the line layout gives the same records.
  check_fixture(read_cluener(data_fixture("cluener_fixture.jsonl"), {}, JsonLayout::concatenated));
}

TEST_CASE("fixture: the CoNLL BIO file reads into the same records") {
  const NerDataset d = read_conll(data_fixture("conll_fixture.txt"));
  check_fixture(d);
  CHECK(d.records[0].line == 1);
  CHECK(d.records[1].line == 14);  // 12 characters and a blank line before it
}

TEST_CASE("records written as BIO read back unchanged; overlapping mentions are refused") {
  TempDir dir;
  const auto records = fixture_records();
  write_conll(dir.path / "out.txt", records);
  const NerDataset back = read_conll(dir.path / "out.txt");
  REQUIRE(back.records.size() == records.size());
  for (std::size_t i = 0; i < records.size(); ++i) CHECK(back.records[i].same_content(records[i]));
  CHECK(bio_tags(records[3]) == std::vector<std::string>{"B-game", "I-game", "I-game", "I-game",
                                                         "O", "O", "O", "B-address", "I-address",
                                                         "O", "O"});
  NerRecord overlap{{"北京大学"}, {{"organization", 0, 3, "北京大学"}, {"address", 0, 1, "北京"}}};
  CHECK_THROWS_WITH_AS(bio_tags(overlap), doctest::Contains("overlaps"), Error);
}

TEST_CASE("an array of records is read too") {
  TempDir dir;
  const auto p = dir.write("a.json", "[" + good_line + ",\n" + good_line + "]");
  const NerDataset d = read_cluener(p);
  CHECK(d.records.size() == 2);
  CHECK(d.report.mentions == 4);
}

TEST_CASE(
    "bad CLUENER records are skipped, counted by reason and described with file, line and record") {
  TempDir dir;
  struct Case {
    const char* line;
    const char* reason;
    const char* says;
  };
  const std::vector<Case> cases{
      {R"({"text": "王芳在上海", "label": {"name": {"王芳": [[0, 1]]})", "malformed_json",
       "not valid JSON"},
      {R"(["not", "an", "object"])", "not_an_object", "expected an object"},
      {R"({"label": {}})", "missing_text", "no \"text\""},
      {R"({"text": 5})", "missing_text", "expected a string"},
      {R"({"text": "王芳", "label": ["name"]})", "bad_label_field", "\"label\" is an array"},
      {R"({"text": "王芳", "label": {"name": ["王芳"]}})", "bad_label_field", "maps to an array"},
      {R"({"text": "王芳", "label": {"name": {"王芳": [[0]]}}})", "bad_span", "not [start, end]"},
      {R"({"text": "王芳", "label": {"name": {"王芳": [[0.5, 1]]}}})", "bad_span",
       "not [start, end]"},
      {R"({"text": "王芳", "label": {"name": {"王芳": []}}})", "bad_span",
       "expected [[start, end]"},
      {R"({"text": "王芳", "label": {"name": {"王芳": [[0, 2]]}}})", "span_outside_text",
       "outside the text of 2 characters"},
      {R"({"text": "王芳", "label": {"name": {"王芳": [[1, 0]]}}})", "span_outside_text",
       "outside the text"},
      {R"({"text": "王芳", "label": {"name": {"王芳": [[-1, 0]]}}})", "span_outside_text",
       "outside the text"},
      {R"({"text": "王芳在上海", "label": {"name": {"王芳": [[1, 2]]}}})", "span_mismatch",
       "reads '芳在'"},
      {R"({"text": "王芳", "label": {"weather": {"王芳": [[0, 1]]}}})", "unknown_label",
       "label 'weather' is not one of"},
      {R"({"text": "王芳王芳王芳王芳王芳王芳", "label": {}})", "too_long",
       "12 characters; the limit is 10"},
  };
  ReadOptions o;
  o.labels = {"name", "address"};
  o.max_chars = 10;
  o.keep_problems = 100;
  for (const auto& c : cases) {
    CAPTURE(c.line);
    // The bad record sits between two good ones, on line 2.
    const auto p = dir.write("one.jsonl", good_line + "\n" + c.line + "\n" + good_line + "\n");
    const NerDataset d = read_cluener(p, o);
    CHECK(d.records.size() == 2);
    CHECK(d.report.records == 2);
    CHECK(d.report.skipped == 1);
    CHECK(d.report.skipped_by_reason.at(c.reason) == 1);
    REQUIRE(d.report.problems.size() == 1);
    CHECK(d.report.problems[0].find(p.string() + ":2: record 2: ") == 0);
    CHECK(d.report.problems[0].find(c.says) != std::string::npos);
    CHECK(d.report.summary().find(std::string(c.reason) + " 1") != std::string::npos);
    // In fail mode the same record throws that message.
    ReadOptions strict = o;
    strict.on_bad = OnBadRecord::fail;
    CHECK_THROWS_WITH_AS(read_cluener(p, strict), doctest::Contains(c.says), Error);
  }
}

TEST_CASE("records without labels are unlabelled, or bad when labels are required") {
  TempDir dir;
  const auto p = dir.write("t.jsonl", R"({"id": 0, "text": "王芳在上海"})"
                                      "\n" +
                                          good_line + "\n");
  const NerDataset d = read_cluener(p);
  REQUIRE(d.records.size() == 2);
  CHECK_FALSE(d.records[0].labelled);
  CHECK(d.records[1].labelled);
  ReadOptions o;
  o.require_labels = true;
  const NerDataset strict = read_cluener(p, o);
  CHECK(strict.records.size() == 1);
  CHECK(strict.report.skipped_by_reason.at("missing_label") == 1);
}

TEST_CASE(
    "concatenated JSON: a broken object costs only itself; stray text and an unclosed object are "
    "reported") {
  TempDir dir;
  const std::string good =
      "{\n  \"text\": \"王芳在上海\",\n  \"label\": {\"name\": {\"王芳\": [[0, 1]]}}\n}\n";
  // Record 2 misses a comma; then stray text; the last object never closes.
  const std::string broken = "{\n  \"text\": \"李四\"\n  \"label\": {}\n}\n";
  const auto p =
      dir.write("c.json", good + broken + "garbage here\n" + good + "{\n \"text\": \"x\"\n");
  ReadOptions o;
  o.keep_problems = 10;
  const NerDataset d = read_cluener(p, o);
  CHECK(d.records.size() == 2);
  CHECK(d.records[1].line == 10);
  CHECK(d.report.skipped == 3);
  CHECK(d.report.skipped_by_reason.at("malformed_json") == 2);
  CHECK(d.report.skipped_by_reason.at("stray_text") == 1);
  REQUIRE(d.report.problems.size() == 3);
  CHECK(d.report.problems[0].find(":5: record 2: not valid JSON") != std::string::npos);
  CHECK(d.report.problems[1].find(":9: unexpected text 'garbage here") != std::string::npos);
  CHECK(d.report.problems[2].find(":14: record 4 starts here but is not closed") !=
        std::string::npos);
}

TEST_CASE("the report keeps only the first problems but counts all of them") {
  TempDir dir;
  std::string s;
  for (int i = 0; i < 25; ++i) s += "{\"text\": 1}\n";
  s += good_line + "\n";
  ReadOptions o;
  o.keep_problems = 3;
  const NerDataset d = read_cluener(dir.write("m.jsonl", s), o);
  CHECK(d.report.skipped == 25);
  CHECK(d.report.problems.size() == 3);
  CHECK(d.records.size() == 1);
}

TEST_CASE("files that are not CLUENER JSON are refused with an Error that names them") {
  TempDir dir;
  CHECK_THROWS_WITH_AS(read_cluener(dir.path / "missing.json"), doctest::Contains("no such file"),
                       Error);
  CHECK_THROWS_WITH_AS(read_cluener(dir.path), doctest::Contains("not a regular file"), Error);
  CHECK_THROWS_WITH_AS(read_cluener(dir.write("empty.json", " \n\n")),
                       doctest::Contains("holds no records"), Error);
  CHECK_THROWS_WITH_AS(read_cluener(dir.write("bin.json", std::string("\x08\0\0\0\0\0\0\0{}", 10))),
                       doctest::Contains("binary file"), Error);
  const auto conll = data_fixture("conll_fixture.txt");
  CHECK_THROWS_WITH_AS(read_cluener(conll),
                       doctest::Contains((conll.string() + ":1: starts with '张 B-name'").c_str()),
                       Error);
  // Only bad records: nothing could be read, which says the file is of another kind.
  CHECK_THROWS_WITH_AS(read_cluener(dir.write("allbad.jsonl", "{\"a\": 1}\n{\"b\": 2}\n")),
                       doctest::Contains("no record could be read (2 skipped)"), Error);
  CHECK_THROWS_WITH_AS(read_cluener(dir.write("badarray.json", "[{\"text\": \"x\"},")),
                       doctest::Contains("not a valid JSON array"), Error);
}

TEST_CASE("bytes that are not UTF-8 are named by file, line and byte; skipped or stopping") {
  TempDir dir;
  // Line 2 cuts a character short (E4 BD, then '"'); line 4 holds a Latin-1 byte.
  const std::string lines = good_line + "\n{\"text\": \"\xE4\xBD\"}\n" + good_line +
                            "\n{\"text\": \"caf\xE9\"}\n" + good_line + "\n";
  const auto p = dir.write("u.jsonl", lines);
  const NerDataset d = read_cluener(p);
  CHECK(d.records.size() == 3);
  CHECK(d.report.skipped == 2);
  CHECK(d.report.skipped_by_reason.at("invalid_utf8") == 2);
  REQUIRE(d.report.problems.size() == 2);
  CHECK(d.report.problems[0] == p.string() +
                                    ":2: record 2: line 2, byte 11: 0xe4 0xbd are not UTF-8; "
                                    "expected UTF-8 text");
  CHECK(d.report.problems[1] ==
        p.string() + ":4: record 4: line 4, byte 14: 0xe9 is not UTF-8; expected UTF-8 text");
  CHECK(d.report.summary().find("invalid_utf8 2") != std::string::npos);
  // Stopping instead (OnBadRecord::fail): the first such line, named.
  ReadOptions strict;
  strict.on_bad = OnBadRecord::fail;
  CHECK_THROWS_WITH_AS(
      read_cluener(p, strict),
      doctest::Contains((p.string() + ":2: record 2: line 2, byte 11: 0xe4 0xbd").c_str()), Error);
  // Read as texts (prediction's input) the same.
  const TextDataset t = read_texts(p);
  CHECK(t.records.size() == 3);
  CHECK(t.report.skipped_by_reason.at("invalid_utf8") == 2);
  // Pretty-printed records: the line of the byte inside its record, the record's first line.
  const std::string good = "{\n  \"text\": \"王芳\",\n  \"label\": {}\n}\n";
  const auto c = dir.write("u.json", good + "{\n  \"text\":\n  \"\xFF\"\n}\n" + good);
  const NerDataset dc = read_cluener(c);
  CHECK(dc.records.size() == 2);
  REQUIRE(dc.report.problems.size() == 1);
  CHECK(dc.report.problems[0] ==
        c.string() + ":5: record 2: line 7, byte 4: 0xff is not UTF-8; expected UTF-8 text");
  // A top-level array is parsed whole: refused, naming the line, whatever on_bad says.
  const auto a = dir.write("u_array.json", "[" + good_line + ",\n{\"text\": \"\xC0\xAF\"}]");
  CHECK_THROWS_WITH_AS(
      read_cluener(a),
      doctest::Contains((a.string() + ": line 2, byte 11: 0xc0 is not UTF-8").c_str()), Error);
}

TEST_CASE(
    "plain text lines: each non-empty line a text; empty lines and bytes not UTF-8 named, "
    "skipped or stop") {
  TempDir dir;
  const auto p = dir.write("input.txt", "王芳在北京。\r\n\n李\xE4\xBD 在上海\nok \xFF\nlast\n");
  const TextDataset d = read_text_lines(p);
  REQUIRE(d.records.size() == 2);
  CHECK(d.records[0].text == "王芳在北京。");
  CHECK(d.records[0].line == 1);
  CHECK(!d.records[0].labelled);
  CHECK(d.records[1].text == "last");
  CHECK(d.records[1].line == 5);
  CHECK(d.report.records == 2);
  CHECK(d.report.skipped_by_reason.at("invalid_utf8") == 2);
  CHECK(d.report.skipped_by_reason.at("empty_line") == 1);  // reported, never silent
  REQUIRE(d.report.problems.size() == 3);
  CHECK(d.report.problems[0] == p.string() + ":2: empty line");
  CHECK(d.report.problems[1] == p.string() +
                                    ":3: record 2: line 3, byte 4: 0xe4 0xbd are not UTF-8; "
                                    "expected UTF-8 text");
  CHECK(d.report.problems[2].starts_with(p.string() + ":4: record 3: line 4, byte 4: 0xff"));
  ReadOptions strict;
  strict.on_bad = OnBadRecord::fail;
  CHECK_THROWS_WITH_AS(read_text_lines(p, strict),
                       doctest::Contains((p.string() + ":3: record 2: line 3, byte 4").c_str()),
                       Error);
  const auto bad = dir.write("bad.txt", "\xFF\n\n");
  CHECK_THROWS_WITH_AS(read_text_lines(bad), doctest::Contains("no record could be read"), Error);
  CHECK_THROWS_WITH_AS(read_text_lines(dir.path / "none.txt"), doctest::Contains("no such file"),
                       Error);
}

TEST_CASE("allowed labels that are empty, repeated or unlistable are refused naming the list") {
  TempDir dir;
  const auto p = dir.write("l.jsonl", good_line + "\n");
  ReadOptions o;
  o.labels = {"name", "", "company"};
  CHECK_THROWS_WITH_AS(
      read_cluener(p, o),
      doctest::Contains((p.string() + ": ReadOptions::labels: label 2 of 3 ('') is empty").c_str()),
      Error);
  o.labels = {"name", "company", "name"};
  CHECK_THROWS_WITH_AS(read_cluener(p, o),
                       doctest::Contains("'name' is listed twice (labels 1 and 3)"), Error);
  o.labels = {"name,company"};
  CHECK_THROWS_WITH_AS(read_cluener(p, o), doctest::Contains("holds ','"), Error);
  const auto conll = data_fixture("conll_fixture.txt");
  o.labels = {""};
  CHECK_THROWS_WITH_AS(
      read_conll(conll, o),
      doctest::Contains((conll.string() + ": ReadOptions::labels: label 1 of 1").c_str()), Error);
}

TEST_CASE("parse_label_list: a comma-separated list, refused where it names no label") {
  CHECK(parse_label_list("name,company", "--labels") ==
        std::vector<std::string>{"name", "company"});
  CHECK(parse_label_list(" name , company ", "--labels") ==
        std::vector<std::string>{"name", "company"});
  CHECK(parse_label_list("体育", "--labels") == std::vector<std::string>{"体育"});
  CHECK_THROWS_WITH_AS(parse_label_list(",", "--labels"),
                       doctest::Contains("--labels: label 1 of ',' is empty"), Error);
  CHECK_THROWS_WITH_AS(parse_label_list("name,,company", "--labels"),
                       doctest::Contains("--labels: label 2 of 'name,,company' is empty"), Error);
  CHECK_THROWS_WITH_AS(parse_label_list("name,company,", "--labels"),
                       doctest::Contains("label 3 of 'name,company,' is empty"), Error);
  CHECK_THROWS_WITH_AS(parse_label_list("", "--labels"),
                       doctest::Contains("--labels: label 1 of '' is empty"), Error);
  CHECK_THROWS_WITH_AS(parse_label_list(" , ", "--labels"), doctest::Contains("is empty"), Error);
  CHECK_THROWS_WITH_AS(parse_label_list("name,name", "--labels"),
                       doctest::Contains("--labels 'name,name': 'name' is listed twice"), Error);
  CHECK_THROWS_WITH_AS(parse_label_list("a: b", "--labels"), doctest::Contains("holds ': '"),
                       Error);
}

TEST_CASE("bad CoNLL sentences are skipped, counted and described") {
  TempDir dir;
  struct Case {
    const char* sentence;
    const char* reason;
    const char* says;
  };
  const std::vector<Case> cases{
      {"王 B-name\n芳 I-name extra\n", "bad_line", "line 5 has 3 fields"},
      {"王\n芳 I-name\n", "bad_line", "line 4 has 1 fields"},
      {"王 S-name\n", "bad_tag", "tag 'S-name' is not O, B-<label> or I-<label>"},
      {"王 B-\n", "bad_tag", "tag 'B-' is not"},
      {"王 O\n芳 I-name\n", "bad_tag", "continues no name mention"},
      {"王 B-name\n芳 I-address\n", "bad_tag", "continues no address mention"},
      {"王 B-weather\n", "unknown_label", "label 'weather' is not one of"},
      {"一 O\n二 O\n三 O\n四 O\n五 O\n六 O\n", "too_long", "6 characters; the limit is 5"},
      {"\xE4\xBD O\n", "invalid_utf8", "not valid UTF-8"},
  };
  ReadOptions o;
  o.labels = {"name", "address"};
  o.max_chars = 5;
  const std::string good = "李 B-name\n四 I-name\n\n";
  for (const auto& c : cases) {
    CAPTURE(c.sentence);
    const auto p = dir.write("c.txt", good + c.sentence + "\n" + good);
    const NerDataset d = read_conll(p, o);
    CHECK(d.records.size() == 2);
    CHECK(d.report.skipped == 1);
    CHECK(d.report.skipped_by_reason.at(c.reason) == 1);
    REQUIRE(d.report.problems.size() == 1);
    CHECK(d.report.problems[0].find(p.string() + ":4: record 2: ") == 0);
    CHECK(d.report.problems[0].find(c.says) != std::string::npos);
    ReadOptions strict = o;
    strict.on_bad = OnBadRecord::fail;
    CHECK_THROWS_WITH_AS(read_conll(p, strict), doctest::Contains(c.says), Error);
  }
}

TEST_CASE("CoNLL: tabs, CRLF line ends, -DOCSTART- and extra blank lines are fine") {
  TempDir dir;
  const auto p =
      dir.write("f.txt",
                "-DOCSTART- O\r\n\r\n\r\n王\tB-name\r\n芳\tI-name\r\n在\tO\r\n\r\n\r\n上 "
                "B-address\n海 I-address");
  const NerDataset d = read_conll(p);
  REQUIRE(d.records.size() == 2);
  CHECK(d.records[0].text == "王芳在");
  CHECK(d.records[0].spans == std::vector<NerSpan>{{"name", 0, 1, "王芳"}});
  CHECK(d.records[1].spans == std::vector<NerSpan>{{"address", 0, 1, "上海"}});
}

TEST_CASE("files that are not CoNLL BIO text are refused with an Error that names them") {
  TempDir dir;
  const auto json = data_fixture("cluener_fixture.json");
  CHECK_THROWS_WITH_AS(read_conll(json), doctest::Contains("looks like JSON"), Error);
  CHECK_THROWS_WITH_AS(read_conll(dir.write("bin.txt", std::string("ab\0cd", 5))),
                       doctest::Contains("binary file"), Error);
  CHECK_THROWS_WITH_AS(read_conll(dir.write("e.txt", "\n\n")),
                       doctest::Contains("holds no records"), Error);
  CHECK_THROWS_WITH_AS(
      read_conll(dir.write("prose.txt", "This is a plain sentence.\nAnd another one.\n")),
      doctest::Contains("no record could be read"), Error);
  CHECK_THROWS_WITH_AS(read_conll(dir.path / "nope.txt"), doctest::Contains("no such file"), Error);
}

TEST_CASE("concatenated JSON: an object left open costs itself, not the records after it") {
  TempDir dir;
  const std::string good =
      "{\n  \"text\": \"王芳在上海\",\n  \"label\": {\"name\": {\"王芳\": [[0, 1]]}}\n}\n";
  // Record 2 loses its closing braces, record 4 a closing quote: each costs only itself.
  const std::string open_object =
      "{\n  \"text\": \"李四\",\n  \"label\": {\"name\": {\"李四\": [[0, 1]]}\n";
  const std::string open_string = "{\n  \"text\": \"张三,\n  \"label\": {}\n}\n";
  const auto p = dir.write("u.json", good + open_object + good + open_string + good + good);
  ReadOptions o;
  o.keep_problems = 10;
  const NerDataset d = read_cluener(p, o);
  CHECK(d.records.size() == 4);
  CHECK(d.report.skipped == 2);
  CHECK(d.report.skipped_by_reason.at("malformed_json") == 2);
  REQUIRE(d.report.problems.size() == 2);
  CHECK(d.report.problems[0].find(
            ":5: record 2 starts here but is not closed before the next record at line 8") !=
        std::string::npos);
  CHECK(d.report.problems[1].find(":12: record 4: not valid JSON") != std::string::npos);
  CHECK(d.records[1].line == 8);
  CHECK(d.records[3].line == 20);
}

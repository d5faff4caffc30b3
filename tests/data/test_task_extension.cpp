// A task the library does not know, defined here alone: SentimentTask, with its own record,
// prediction, score and JSON shape. It satisfies NluTask, so the library's example building,
// batching, training, prediction, scoring, prediction files and run-time choice (AnyTask,
// TaskMenu) take it as they take NerTask: adding a task is one header, no edit elsewhere.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data_test_util.hpp"
#include "seqpar/backend/cpu/ops.hpp"
#include "seqpar/data/any_task.hpp"
#include "seqpar/data/batching.hpp"
#include "seqpar/data/json_reader.hpp"
#include "seqpar/data/json_records.hpp"
#include "seqpar/data/predictions.hpp"
#include "seqpar/data/task.hpp"
#include "seqpar/data/task_json.hpp"
#include "seqpar/data/tasks.hpp"
#include "seqpar/nn/generate.hpp"
#include "seqpar/train/trainer.hpp"

using namespace seqpar;
using seqpar::test::data_fixture;
using seqpar::test::TempDir;

namespace sentiment {

/// A review and its mood ("good" or "bad"; empty without annotation).
struct SentimentRecord : TextRecord {
  std::string mood;
};

inline std::vector<std::string> record_labels(const SentimentRecord& r) {
  return r.mood.empty() ? std::vector<std::string>{} : std::vector<std::string>{r.mood};
}

/// {"text": ..., "mood": "good"}: a field no library task has.
inline constexpr JsonShape sentiment_json_shape{
    "sentiment",         "mood",
    JsonValue::string,   "its \"mood\" is a string",
    "a mood (a string)", "sentiment records ({\"text\": ..., \"mood\": \"good\" | \"bad\"})"};

/// Sentiment of short English reviews: one prompt naming the moods, the answer one mood.
class SentimentTask {
 public:
  using Record = SentimentRecord;

  struct Prediction : PredictionBase {
    std::string mood;  // empty: the answer named no mood of the task
  };

  struct Score : ScoreBase {
    std::int64_t correct = 0;

    double accuracy() const {
      return records == 0 ? 0.0 : static_cast<double>(correct) / static_cast<double>(records);
    }
    std::string summary() const {
      char s[64];
      std::snprintf(s, sizeof s, "accuracy %.4f", accuracy());
      return "sentiment: " + std::string(s) + "; " + counts();
    }
    std::string headline() const { return summary(); }
    std::string details() const {
      return "  correct " + std::to_string(correct) + " of " + std::to_string(records) + "\n";
    }
    std::string json() const {
      nlohmann::ordered_json j = detail::score_head(name, *this);
      j["accuracy"] = accuracy();
      j["correct"] = correct;
      return j.dump();
    }
  };

  static constexpr std::string_view name = "sentiment";

  explicit SentimentTask(std::vector<std::string> moods) : moods_(std::move(moods)) {
    check_label_list(moods_, "SentimentTask: moods");
  }

  static Dataset<SentimentRecord> read(const std::filesystem::path& path,
                                       const ReadOptions& options) {
    std::array<JsonShape, 4> known{sentiment_json_shape};
    std::copy(builtin_json_shapes.begin(), builtin_json_shapes.end(), known.begin() + 1);
    const auto parse = [](const nlohmann::json& v, SentimentRecord& r,
                          const std::vector<std::size_t>&, std::string& problem) {
      r.mood = v.get<std::string>();
      if (r.mood.empty()) return problem = "\"mood\" is empty", std::string("bad_label");
      return std::string();
    };
    return read_json_as<SentimentRecord>(path, sentiment_json_shape, known, parse, options);
  }

  static SentimentTask of(const Dataset<SentimentRecord>& train, std::vector<std::string> moods) {
    return SentimentTask(training_labels(train, std::move(moods), "no mood to train"));
  }

  const std::vector<std::string>& labels() const { return moods_; }
  std::string describe() const {
    std::string s = "task=sentiment;moods=";
    for (std::size_t i = 0; i < moods_.size(); ++i) s += (i ? "," : "") + moods_[i];
    return s;
  }
  std::string overview() const { return "  task sentiment\n"; }
  std::vector<std::string> prompt_words() const { return moods_; }
  std::int64_t max_prompts() const { return 1; }

  std::string prompt(std::string_view text) const {
    std::string s = "review: " + std::string(text) + "\nmood (";
    for (std::size_t i = 0; i < moods_.size(); ++i) s += (i ? "/" : "") + moods_[i];
    return s + ")? ";
  }

  std::vector<TaskPrompt> prompts(const SentimentRecord& r) const {
    detail::require_annotation(r);
    return {{prompt(r.text), r.mood, 0}};
  }

  std::vector<Prediction> predict(std::span<const TextRecord> records,
                                  const AnswerFn& answer) const {
    std::vector<std::string> prompts;
    for (const auto& r : records) prompts.push_back(prompt(r.text));
    const std::vector<std::string> answers = detail::ask(answer, prompts);
    const auto base = detail::unanswered(records);
    std::vector<Prediction> out;
    for (std::size_t i = 0; i < records.size(); ++i) {
      Prediction p;
      static_cast<PredictionBase&>(p) = base[i];
      p.answers = {answers[i]};
      if (std::find(moods_.begin(), moods_.end(), answers[i]) != moods_.end())
        p.mood = answers[i];
      else if (answers[i].empty())
        ++p.errors.empty;
      else
        ++p.errors.unknown_label;
      out.push_back(std::move(p));
    }
    return out;
  }

  Score score(std::span<const SentimentRecord> gold,
              std::span<const Prediction> predictions) const {
    detail::check_scored_sizes(gold.size(), predictions.size());
    Score s;
    for (std::size_t i = 0; i < gold.size(); ++i) {
      detail::count_scored(s, gold[i], predictions[i], i, moods_);
      s.correct += predictions[i].mood == gold[i].mood;
    }
    return s;
  }

  std::string prediction_json(const Prediction& p) const {
    nlohmann::ordered_json j = detail::prediction_head(name, p);
    j["mood"] = p.mood.empty() ? nlohmann::json() : nlohmann::json(p.mood);
    return detail::prediction_line(std::move(j), p);
  }

 private:
  std::vector<std::string> moods_;
};

static_assert(NluTask<SentimentTask>);

// One id per ASCII byte (4 + byte), eos 2, pad 3; decodes back.
struct ByteCodec {
  std::vector<std::int32_t> encode(std::string_view s) const {
    std::vector<std::int32_t> out;
    for (const char c : s) out.push_back(4 + static_cast<unsigned char>(c));
    return out;
  }
  std::string decode(std::span<const std::int32_t> ids, bool skip_special = false) const {
    std::string s;
    for (const auto id : ids)
      if (id >= 4)
        s += static_cast<char>(id - 4);
      else if (!skip_special)
        s += '?';
    return s;
  }
  std::int32_t eos_id() const { return 2; }
  std::int32_t pad_id() const { return 3; }
};

using TinyModel = Bloom<BloomConfig{.vocab_size = 160, .hidden = 32, .layers = 2, .heads = 4}>;

const char* const reviews =
    R"({"id": 1, "text": "great film", "mood": "good"}
{"id": 2, "text": "awful plot", "mood": "bad"}
{"id": 3, "text": "loved it", "mood": "good"}
{"id": 4, "text": "boring", "mood": "bad"}
{"id": 5, "text": "superb cast", "mood": "good"}
{"id": 6, "text": "waste of time", "mood": "bad"}
{"id": 7, "text": "a joy", "mood": "good"}
{"id": 8, "text": "dull and slow", "mood": "bad"}
)";

// A model that answers the i-th prompt with answers[i].
AnswerFn answers_in_order(std::vector<std::string> answers) {
  return [answers = std::move(answers)](std::span<const std::string> prompts) {
    REQUIRE(prompts.size() == answers.size());
    return answers;
  };
}

std::vector<std::string> file_lines(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace sentiment

using sentiment::answers_in_order;
using sentiment::file_lines;
using sentiment::SentimentTask;

TEST_CASE("a task defined outside the library reads its own JSON shape, and only it") {
  TempDir dir;
  const auto file = dir.write("reviews.jsonl", sentiment::reviews);
  const auto d = SentimentTask::read(file, {});
  REQUIRE(d.records.size() == 8);
  CHECK(d.task() == "sentiment");
  CHECK(d.records[1].text == "awful plot");
  CHECK(d.records[1].mood == "bad");
  CHECK(d.records[1].id.number == 2);
  CHECK(d.labels() == std::vector<std::string>{"bad", "good"});
  // The library's shapes are known to it: a classification file is refused as such.
  CHECK_THROWS_WITH_AS(SentimentTask::read(data_fixture("classification_fixture.jsonl"), {}),
                       doctest::Contains("is a classification record (its \"label\" is a string); "
                                         "the task sentiment reads sentiment records"),
                       Error);
  // The reader's checks apply to its records: the allowed labels, bad values.
  ReadOptions only_good;
  only_good.labels = {"good"};
  const auto g = SentimentTask::read(file, only_good);
  CHECK(g.records.size() == 4);
  CHECK(g.report.skipped_by_reason.at("unknown_label") == 4);
  const auto bad = SentimentTask::read(dir.write("bad.jsonl", R"({"text": "x", "mood": ""})"
                                                              "\n"
                                                              R"({"text": "y", "mood": "good"})"
                                                              "\n"),
                                       {});
  CHECK(bad.records.size() == 1);
  CHECK(bad.report.skipped_by_reason.at("bad_label") == 1);
}

TEST_CASE("a task defined outside the library trains a model through the library's batching") {
  TempDir dir;
  const auto d = SentimentTask::read(dir.write("reviews.jsonl", sentiment::reviews), {});
  const SentimentTask task = SentimentTask::of(d, {});
  CHECK(task.describe() == "task=sentiment;moods=bad,good");
  const sentiment::ByteCodec tok;
  ExampleReport rep;
  const ExampleSet ex =
      make_examples(task, d.records, ExampleOptions{64, TooLong::skip}, tok, &rep);
  REQUIRE(ex.size() == 8);
  CHECK(rep.skipped_too_long == 0);
  CHECK(tok.decode(ex.prompt(1)) == "review: awful plot\nmood (bad/good)? ");
  CHECK(tok.decode(ex.answer(1)) == "bad?");  // the answer, then eos
  // The token cache keys the examples by the task's describe().
  CacheStatus st;
  const auto cache = dir.path / "sentiment.tokens.safetensors";
  cached_examples(cache, "src", task, d.records, ExampleOptions{64, TooLong::skip}, tok, "bytes",
                  &st);
  CHECK_FALSE(st.hit);
  const ExampleSet hit = cached_examples(cache, "src", task, d.records,
                                         ExampleOptions{64, TooLong::skip}, tok, "bytes", &st);
  CHECK(st.hit);
  CHECK(std::ranges::equal(hit.columns().tokens, ex.columns().tokens));

  // Batches as the trainer gets them; the loss falls over a few epochs.
  BatchStream stream(ex, BatchingOptions{.rows = 4, .seed = 7, .window = 2}, tok.pad_id());
  TrainOptions o;
  o.schedule.peak = 1e-2;
  o.schedule.warmup = 2;
  o.schedule.total = 120;
  o.seed = 3;
  Trainer<sentiment::TinyModel, Replicated<1>> t(o);
  std::vector<double> losses;
  for (int s = 0; s < 120; ++s) {
    const Batch b = stream.next();
    CHECK(b.rows == 4);
    losses.push_back(t.step(b.view()).loss);
  }
  const double first = (losses[0] + losses[1]) / 2;
  const double last = (losses[118] + losses[119]) / 2;
  CAPTURE(first);
  CAPTURE(last);
  CHECK(std::isfinite(last));
  CHECK(last < 0.5 * first);

  // Prediction with the trained model through the library's decoding: one prediction a
  // record, answers read back, scored and written by the task.
  GenerateOptions g;
  g.max_new_tokens = 6;
  g.eos_id = tok.eos_id();
  const AnswerFn answer = batched_answers(
      tok, [&](const Batch& b) { return greedy_generate(t.model(), b.view(), g).tokens; }, 4, 0);
  const auto preds = task.predict(texts_of(d.records), answer);
  REQUIRE(preds.size() == 8);
  const auto s = task.score(d.records, preds);
  CHECK(s.records == 8);
  CHECK(s.prompts == 8);
  // The model has learnt the task: every answer names a mood, most of them right (chance: 4).
  CHECK(s.errors.total() == 0);
  CHECK(s.correct >= 6);
  for (std::size_t i = 0; i < preds.size(); ++i) {
    CAPTURE(i);
    CHECK(preds[i].id == d.records[i].id);
    REQUIRE(preds[i].answers.size() == 1);
    CHECK((preds[i].mood.empty() || preds[i].mood == preds[i].answers[0]));
  }
  write_predictions(dir.path / "pred.jsonl", task, preds);
  const auto lines = file_lines(dir.path / "pred.jsonl");
  REQUIRE(lines.size() == 8);
  for (std::size_t i = 0; i < lines.size(); ++i) CHECK(lines[i] == task.prediction_json(preds[i]));
}

TEST_CASE("a task defined outside the library scores and writes predictions as it says") {
  TempDir dir;
  const auto d = SentimentTask::read(dir.write("reviews.jsonl", sentiment::reviews), {});
  const SentimentTask task = SentimentTask::of(d, {});
  // Right: 1, 2, 4, 8; wrong mood: 3, 5; not a mood: 6 ("meh"); empty: 7.
  const auto preds =
      task.predict(texts_of(d.records),
                   answers_in_order({"good", "bad", "bad", "bad", "bad", "meh", "", "bad"}));
  const auto s = task.score(d.records, preds);
  CHECK(s.correct == 4);
  CHECK(s.accuracy() == 0.5);
  CHECK(s.records == 8);
  CHECK(s.prompts == 8);
  CHECK(s.errors == AnswerErrors{.empty = 1, .unknown_label = 1});
  CHECK(s.summary() ==
        "sentiment: accuracy 0.5000; 8 records, 8 prompts, garbled answers 2 (empty 1, "
        "unknown_label 1)");
  CHECK(s.json() == R"({"task":"sentiment","records":8,"prompts":8,"unknown_gold":0,"garbled":2,)"
                    R"("errors":{"empty":1,"unknown_label":1},"accuracy":0.5,"correct":4})");
  // Gold the task cannot know (a mood its training set lacks) is still scored, and counted.
  auto gold = d.records;
  gold[0].mood = "angry";
  const auto unknown = task.score(gold, preds);
  CHECK(unknown.records == 8);
  CHECK(unknown.unknown_gold == 1);
  CHECK(unknown.correct == 3);
  CHECK(
      unknown.summary().find("8 records (1 with gold labels the task lacks, counted as missed)") !=
      std::string::npos);
  write_predictions(dir.path / "pred.jsonl", task, preds);
  const auto lines = file_lines(dir.path / "pred.jsonl");
  REQUIRE(lines.size() == 8);
  CHECK(lines[0] ==
        R"({"id":1,"task":"sentiment","text":"great film","answer":"good","mood":"good",)"
        R"("errors":{}})");
  CHECK(lines[5] ==
        R"({"id":6,"task":"sentiment","text":"waste of time","answer":"meh","mood":null,)"
        R"("errors":{"unknown_label":1}})");
  CHECK(lines[6] == R"({"id":7,"task":"sentiment","text":"a joy","answer":"","mood":null,)"
                    R"("errors":{"empty":1}})");
  // Scoring refuses predictions of other records.
  CHECK_THROWS_WITH_AS(task.score(std::span(d.records).first(7), preds),
                       doctest::Contains("8 predictions for 7 records"), Error);
}

TEST_CASE("a task defined outside the library is chosen at run time beside the library's") {
  using Menu = TaskMenu<NerTask, ClassificationTask, RelationTask, SentimentTask>;
  CHECK(Menu::names() == "ner, classification, relation or sentiment");
  TempDir dir;
  const auto file = dir.write("reviews.jsonl", sentiment::reviews);
  auto [task, records] = Menu::train("sentiment", file, {}, {});
  CHECK(task.name() == "sentiment");
  CHECK(task.labels() == std::vector<std::string>{"bad", "good"});
  CHECK(task.max_prompts() == 1);
  CHECK_FALSE(task.has_submission());
  CHECK(records.size() == 8);
  CHECK(records.as<sentiment::SentimentRecord>()[3].mood == "bad");
  CHECK_THROWS_WITH_AS(records.as<NerRecord>(), doctest::Contains("its records are sentiment's"),
                       Error);
  // Evaluation through the erased task: the task's own score, predictions and answers.
  const AnyEvaluation e = task.evaluate(
      records, 4, answers_in_order({"good", "good", "good", "meh"}));  // the first 4 records
  CHECK(e.records == 4);
  CHECK(e.prompts == 4);
  CHECK(e.garbled == 1);
  CHECK(e.summary ==
        "sentiment: accuracy 0.5000; 4 records, 4 prompts, garbled answers 1 (unknown_label 1)");
  CHECK(nlohmann::json::parse(e.json).at("correct") == 2);
  REQUIRE(e.predictions.lines.size() == 4);
  CHECK(e.predictions.lines[1] ==
        R"({"id":2,"task":"sentiment","text":"awful plot","answer":"good","mood":"good",)"
        R"("errors":{}})");
  CHECK(e.answers[3] == std::vector<std::string>{"meh"});
  CHECK_THROWS_WITH_AS(task.write_submission(dir.path / "s.json", e.predictions),
                       doctest::Contains("the task sentiment has no submission format"), Error);
  // The erased task's examples are the typed task's.
  const sentiment::ByteCodec tok;
  const ExampleSet a = task.cached_examples(dir.path / "a.tokens.safetensors", "src", records,
                                            ExampleOptions{64, TooLong::skip}, tok, "bytes");
  const ExampleSet b =
      make_examples(SentimentTask::of(SentimentTask::read(file, {}), {}),
                    SentimentTask::read(file, {}).records, ExampleOptions{64, TooLong::skip}, tok);
  CHECK(std::ranges::equal(a.columns().tokens, b.columns().tokens));
  // The library's names still mean the library's tasks; an unknown name lists them all.
  CHECK(Menu::train("classification", data_fixture("classification_fixture.jsonl"), {}, {})
            .first.name() == "classification");
  // NER keeps its submission file (CLUENER's) through the erasure.
  const auto [ner, ner_records] = Menu::train("ner", data_fixture("cluener_fixture.jsonl"), {}, {});
  CHECK(ner.has_submission());
  CHECK_FALSE(Menu::train("relation", data_fixture("relation_fixture.jsonl"), {}, {})
                  .first.has_submission());
  const auto no_ids = ner.predict(
      ner_records.texts(), answers_in_order(std::vector<std::string>(ner_records.size() * 2, "")));
  CHECK_THROWS_WITH_AS(ner.write_submission(dir.path / "sub.json", no_ids),
                       doctest::Contains("has no \"id\" from its file"), Error);
  const TextDataset test = read_texts(data_fixture("texts_fixture.json"));
  ner.write_submission(dir.path / "sub.json",
                       ner.predict(test.records, answers_in_order(std::vector<std::string>(
                                                     test.records.size() * 2, ""))));
  CHECK(file_lines(dir.path / "sub.json") == std::vector<std::string>{R"({"id":0,"label":{}})",
                                                                      R"({"id":1,"label":{}})",
                                                                      R"({"id":2,"label":{}})"});
  CHECK_THROWS_WITH_AS(Menu::train("mood", file, {}, {}),
                       doctest::Contains("'mood' is not a task; expected ner, classification, "
                                         "relation or sentiment"),
                       Error);
}

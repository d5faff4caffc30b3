// Tokenized examples, label masking and left padding, the token cache, the seeded data
// order and the data position a checkpoint keeps; the character-level tokenizer.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "data_test_util.hpp"
#include "seqpar/data/batching.hpp"
#include "seqpar/data/char_tokenizer.hpp"
#include "seqpar/data/cluener.hpp"
#include "seqpar/data/examples.hpp"
#include "seqpar/data/token_cache.hpp"
#if defined(SEQPAR_WITH_ONIGURUMA)
#include "seqpar/io/tokenizer.hpp"
#endif

using namespace seqpar;
using seqpar::test::data_fixture;
using seqpar::test::TempDir;

namespace {

// One id per code point (4 + cp mod 5000), eos 2, pad 3; counts its calls.
struct ToyEncoder {
  std::shared_ptr<int> calls = std::make_shared<int>(0);
  std::vector<std::int32_t> encode(std::string_view s) const {
    ++*calls;
    std::vector<std::int32_t> out;
    for (std::size_t i = 0; i < s.size();)
      out.push_back(static_cast<std::int32_t>(4 + detail::utf8_next(s, i) % 5000));
    return out;
  }
  std::int32_t eos_id() const { return 2; }
  std::int32_t pad_id() const { return 3; }
};

const std::vector<std::string> fixture_labels{"address", "book",         "company", "game",
                                              "name",    "organization", "position"};

NerExampleOptions fixture_options() {
  NerExampleOptions o;
  o.labels = fixture_labels;
  return o;
}

std::vector<std::int32_t> cat(std::vector<std::int32_t> a, const std::vector<std::int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

bool same_columns(const ExampleSet& a, const ExampleSet& b) {
  const auto& x = a.columns();
  const auto& y = b.columns();
  return std::ranges::equal(x.tokens, y.tokens) && std::ranges::equal(x.offsets, y.offsets) &&
         std::ranges::equal(x.prompt_lengths, y.prompt_lengths) &&
         std::ranges::equal(x.records, y.records) && std::ranges::equal(x.chunks, y.chunks);
}

}  // namespace

TEST_CASE("fixture: one example per record and label chunk: prompt tokens, answer tokens, eos") {
  const NerDataset d = read_cluener(data_fixture("cluener_fixture.jsonl"));
  const ToyEncoder tok;
  NerExampleOptions o = fixture_options();
  o.labels_per_prompt = 4;  // 7 labels: chunks of 4 and 3
  ExampleReport rep;
  const ExampleSet ex = make_ner_examples(d.records, o, tok, &rep);
  REQUIRE(ex.size() == 10);
  CHECK(rep.examples == 10);
  CHECK(rep.skipped_too_long == 0);
  const auto chunks = chunk_labels(o.labels, 4);
  for (std::size_t i = 0; i < ex.size(); ++i) {
    CAPTURE(i);
    CHECK(ex.record(i) == static_cast<std::int32_t>(i / 2));
    CHECK(ex.chunk(i) == static_cast<std::int32_t>(i % 2));
    const auto& r = d.records[i / 2];
    const auto& chunk = chunks[i % 2];
    const auto prompt = tok.encode(seqgpt_prompt(r.text, Instruction::extraction, chunk));
    const auto answer = cat(tok.encode(ner_answer(r, chunk)), {2});
    CHECK(std::ranges::equal(ex.prompt(i), prompt));
    CHECK(std::ranges::equal(ex.answer(i), answer));
    CHECK(ex.length(i) == static_cast<std::int64_t>(prompt.size() + answer.size()));
  }
  std::vector<std::int64_t> lengths;
  for (std::size_t i = 0; i < ex.size(); ++i) lengths.push_back(ex.length(i));
  std::sort(lengths.begin(), lengths.end());
  REQUIRE(lengths.front() < lengths.back());
  o.max_tokens = lengths[lengths.size() / 2 - 1];  // about half the examples fit
  const ExampleSet shorter = make_ner_examples(d.records, o, tok, &rep);
  CHECK(rep.skipped_too_long > 0);
  CHECK(shorter.size() > 0);
  CHECK(shorter.size() == ex.size() - static_cast<std::size_t>(rep.skipped_too_long));
  for (std::size_t i = 0; i < shorter.size(); ++i) CHECK(shorter.length(i) <= o.max_tokens);
}

TEST_CASE(
    "an example over max_tokens keeps its answer and loses the start of its prompt (cut_prompt)") {
  const NerDataset d = read_cluener(data_fixture("cluener_fixture.jsonl"));
  const ToyEncoder tok;
  NerExampleOptions o = fixture_options();
  o.labels_per_prompt = 4;
  const ExampleSet whole = make_ner_examples(d.records, o, tok);
  std::int64_t longest_answer = 0;
  for (std::size_t i = 0; i < whole.size(); ++i)
    longest_answer =
        std::max<std::int64_t>(longest_answer, static_cast<std::int64_t>(whole.answer(i).size()));
  std::vector<std::int64_t> lengths;
  for (std::size_t i = 0; i < whole.size(); ++i) lengths.push_back(whole.length(i));
  std::sort(lengths.begin(), lengths.end());
  // Every answer fits, about half the examples do.
  o.max_tokens = std::max(longest_answer + 5, lengths[lengths.size() / 2 - 1]);
  o.too_long = TooLong::cut_prompt;
  ExampleReport rep;
  const ExampleSet cut = make_ner_examples(d.records, o, tok, &rep);
  REQUIRE(cut.size() == whole.size());  // nothing skipped: every answer fits
  CHECK(rep.skipped_too_long == 0);
  CHECK(rep.truncated > 0);
  std::int64_t truncated = 0;
  for (std::size_t i = 0; i < cut.size(); ++i) {
    CAPTURE(i);
    CHECK(cut.length(i) <= o.max_tokens);
    CHECK(std::ranges::equal(cut.answer(i), whole.answer(i)));
    const auto full = whole.prompt(i);
    const auto kept = cut.prompt(i);
    // The kept prompt is the full one's tail (its end, [GEN] and all, is what the answer follows).
    REQUIRE(kept.size() <= full.size());
    CHECK(std::ranges::equal(kept, full.last(kept.size())));
    if (kept.size() < full.size()) {
      ++truncated;
      CHECK(cut.length(i) == o.max_tokens);  // cut to exactly the limit, not further
    }
  }
  CHECK(truncated == rep.truncated);
  // The cache keys the two behaviours apart; skip keeps its old key.
  NerExampleOptions skip = o;
  skip.too_long = TooLong::skip;
  CHECK(skip.describe().find("too_long") == std::string::npos);
  CHECK(o.describe() != skip.describe());
  const ExampleSet skipped = make_ner_examples(d.records, skip, tok, &rep);
  CHECK(rep.skipped_too_long == truncated);
  CHECK(skipped.size() == whole.size() - static_cast<std::size_t>(truncated));
  // A cut that would leave a prompt none of its text (its label list alone fills the room
  // its answer leaves) is refused, naming the limits that would fit; an answer that alone
  // fills max_tokens leaves no room for a prompt: skipped, also when cutting; a limit that
  // leaves no example at all is refused, naming it and what it needs.
  o.max_tokens = longest_answer;
  CHECK_THROWS_WITH(make_ner_examples(d.records, o, tok, &rep),
                    doctest::Contains(("cannot hold their text and label list in "
                                       "ExampleOptions::max_tokens " +
                                       std::to_string(longest_answer))
                                          .c_str()));
  std::int64_t shortest_answer = longest_answer;
  for (std::size_t i = 0; i < whole.size(); ++i)
    shortest_answer =
        std::min<std::int64_t>(shortest_answer, static_cast<std::int64_t>(whole.answer(i).size()));
  o.max_tokens = shortest_answer;
  CHECK_THROWS_WITH(
      make_ner_examples(d.records, o, tok, &rep),
      doctest::Contains(("make_examples: max_tokens " + std::to_string(shortest_answer) +
                         " leaves none of the " + std::to_string(whole.size()) +
                         " examples of 5 records "
                         "(the shortest needs " +
                         std::to_string(shortest_answer + 1) + " tokens")
                            .c_str()));
  skip.max_tokens = 20;
  CHECK_THROWS_WITH(make_ner_examples(d.records, skip, tok, &rep),
                    doctest::Contains("make_examples: max_tokens 20 leaves none of the"));
  for (const std::int64_t m : {1, 0, -5}) {
    o.max_tokens = m;
    CHECK_THROWS_WITH(make_ner_examples(d.records, o, tok, &rep),
                      doctest::Contains(("make_examples: max_tokens is " + std::to_string(m) +
                                         "; expected at least 2")
                                            .c_str()));
  }
  // No records: no examples, and nothing to refuse.
  o.max_tokens = 1024;
  CHECK(make_ner_examples(std::span<const NerRecord>{}, o, tok, &rep).size() == 0);
}

TEST_CASE("batches are left-padded; the loss sees the answer and eos only") {
  const ToyEncoder tok;
  ExampleSetBuilder b;
  b.add(std::vector<std::int32_t>{10, 11, 12}, std::vector<std::int32_t>{20, 2}, 0, 0);  // length 5
  b.add(std::vector<std::int32_t>{13}, std::vector<std::int32_t>{21, 22, 23, 2}, 1, 0);  // length 5
  b.add(std::vector<std::int32_t>{14, 15}, std::vector<std::int32_t>{2}, 2, 0);          // length 3
  const ExampleSet ex = b.finish();
  const std::vector<std::int32_t> idx{2, 0, 1};
  const Batch batch = collate(ex, idx, tok.pad_id());
  CHECK(batch.rows == 3);
  CHECK(batch.seq == 5);
  const std::int32_t X = ignore_index;
  CHECK(batch.input_ids ==
        std::vector<std::int32_t>{3, 3, 14, 15, 2, /**/ 10, 11, 12, 20, 2, /**/ 13, 21, 22, 23, 2});
  CHECK(batch.attention_mask ==
        std::vector<std::int32_t>{0, 0, 1, 1, 1, /**/ 1, 1, 1, 1, 1, /**/ 1, 1, 1, 1, 1});
  CHECK(batch.labels ==
        std::vector<std::int32_t>{X, X, X, X, 2, /**/ X, X, X, 20, 2, /**/ X, 21, 22, 23, 2});
  // The loss's denominator counts exactly the answer tokens and eos.
  CHECK(batch.view().target_count() == 1 + 2 + 4);
  batch.view().validate(100);
  // Prompts only, for generation.
  const Batch prompts = collate(ex, idx, tok.pad_id(), true);
  CHECK(prompts.seq == 3);
  CHECK(prompts.input_ids == std::vector<std::int32_t>{3, 14, 15, 10, 11, 12, 3, 3, 13});
  CHECK(prompts.attention_mask == std::vector<std::int32_t>{0, 1, 1, 1, 1, 1, 0, 0, 1});
  CHECK_THROWS_AS(collate(ex, std::vector<std::int32_t>{3}, 3), Error);
  CHECK_THROWS_AS(collate(ex, std::vector<std::int32_t>{0}, -1), Error);
  const std::vector<std::vector<std::int32_t>> rows{{5, 6}, {7}};
  const Batch lp = left_pad(rows, 3);
  CHECK(lp.input_ids == std::vector<std::int32_t>{5, 6, 3, 7});
  CHECK(lp.attention_mask == std::vector<std::int32_t>{1, 1, 0, 1});
  CHECK(lp.labels == std::vector<std::int32_t>{X, X, X, X});
}

TEST_CASE(
    "fixture: the token cache round-trips, is memory-mapped, and skips tokenization on a hit") {
  TempDir dir;
  const auto src = data_fixture("cluener_fixture.json");
  const NerDataset d = read_cluener(src);
  const ToyEncoder tok;
  const auto cache = dir.path / "sub" / "fixture.tokens.safetensors";
  const std::string source = file_hash(src);
  CacheStatus st;
  ExampleReport built_report, hit_report;
  const ExampleSet built = cached_ner_examples(cache, source, d.records, fixture_options(), tok,
                                               "toy", &st, &built_report);
  CHECK_FALSE(st.hit);
  CHECK(st.reason == "no file");
  CHECK(built.mapped());
  const int calls = *tok.calls;
  CHECK(calls == 20);  // 5 records x 2 chunks (7 labels: 6 + 1) x (prompt, answer)
  const ExampleSet hit = cached_ner_examples(cache, source, d.records, fixture_options(), tok,
                                             "toy", &st, &hit_report);
  CHECK(st.hit);
  CHECK(*tok.calls == calls);
  CHECK(hit.mapped());
  CHECK(same_columns(hit, built));
  CHECK(same_columns(hit, make_ner_examples(d.records, fixture_options(), tok)));
  CHECK(hit_report.examples == built_report.examples);
  CHECK(hit_report.tokens == built_report.tokens);
  CHECK(hit_report.max_answer_tokens == built_report.max_answer_tokens);
  // The key sits in the metadata.
  std::map<std::string, std::string> meta;
  load_examples(cache, &meta);
  CHECK(meta.at("key") == example_cache_key(source, "toy", fixture_options()));
}

TEST_CASE(
    "the token cache is rebuilt when the source, the tokenizer or the settings change, or it is "
    "damaged") {
  TempDir dir;
  const auto src = data_fixture("cluener_fixture.jsonl");
  const NerDataset d = read_cluener(src);
  const ToyEncoder tok;
  const auto cache = dir.path / "c.safetensors";
  const std::string source = file_hash(src);
  CacheStatus st;
  cached_ner_examples(cache, source, d.records, fixture_options(), tok, "toy", &st);
  CHECK_FALSE(st.hit);

  SUBCASE("another source file") {
    CHECK(file_hash(data_fixture("cluener_fixture.json")) != source);
    cached_ner_examples(cache, file_hash(data_fixture("cluener_fixture.json")), d.records,
                        fixture_options(), tok, "toy", &st);
    CHECK_FALSE(st.hit);
    CHECK(st.reason == "key differs");
  }
  SUBCASE("another tokenizer") {
    cached_ner_examples(cache, source, d.records, fixture_options(), tok, "toy2", &st);
    CHECK_FALSE(st.hit);
    CHECK(st.reason == "key differs");
  }
  SUBCASE("other settings") {
    NerExampleOptions o = fixture_options();
    o.labels_per_prompt = 3;
    const ExampleSet ex = cached_ner_examples(cache, source, d.records, o, tok, "toy", &st);
    CHECK_FALSE(st.hit);
    CHECK(st.reason == "key differs");
    CHECK(ex.size() == 15);
    cached_ner_examples(cache, source, d.records, o, tok, "toy", &st);
    CHECK(st.hit);
  }
  SUBCASE("a damaged file") {
    dir.write("c.safetensors", "this is not a safetensors file");
    const ExampleSet ex =
        cached_ner_examples(cache, source, d.records, fixture_options(), tok, "toy", &st);
    CHECK_FALSE(st.hit);
    CHECK(st.reason.starts_with("unreadable: "));
    CHECK(ex.size() == 10);
    cached_ner_examples(cache, source, d.records, fixture_options(), tok, "toy", &st);
    CHECK(st.hit);
  }
  SUBCASE("the same inputs") {
    cached_ner_examples(cache, source, d.records, fixture_options(), tok, "toy", &st);
    CHECK(st.hit);
  }
}

TEST_CASE("content hashes tell inputs apart") {
  CHECK(content_hash("abc") == content_hash("abc"));
  CHECK(content_hash("abc") != content_hash("abd"));
  CHECK(content_hash("") != content_hash(std::string(1, '\0')));
  CHECK_THROWS_AS(file_hash("/nonexistent/file"), Error);
}

TEST_CASE(
    "the order of an epoch depends only on (seed, epoch); every batch is full; nothing repeats") {
  std::vector<std::int64_t> lengths;
  for (int i = 0; i < 103; ++i) lengths.push_back(5 + (i * 37) % 50);
  BatchingOptions o;
  o.rows = 8;
  o.seed = 7;
  o.window = 4;
  const auto e0 = epoch_batches(lengths, o, 0);
  CHECK(e0 == epoch_batches(lengths, o, 0));
  CHECK(e0 != epoch_batches(lengths, o, 1));
  BatchingOptions other = o;
  other.seed = 8;
  CHECK(e0 != epoch_batches(lengths, other, 0));
  CHECK(e0.size() == 12);  // 103 / 8, the 7 left over sit out
  std::set<std::int32_t> seen;
  for (const auto& b : e0) {
    CHECK(b.size() == 8);
    for (auto i : b) CHECK(seen.insert(i).second);
  }
  CHECK(seen.size() == 96);
  // Over a few epochs every example gets its turn.
  std::set<std::int32_t> all;
  for (int e = 0; e < 6; ++e)
    for (const auto& b : epoch_batches(lengths, o, e)) all.insert(b.begin(), b.end());
  CHECK(all.size() == 103);
}

TEST_CASE("length grouping pads less than a plain shuffle") {
  std::vector<std::int64_t> lengths;
  for (int i = 0; i < 512; ++i) lengths.push_back(10 + (i * 7919) % 90);
  const auto padding = [&](std::int64_t window) {
    BatchingOptions o;
    o.rows = 16;
    o.window = window;
    std::int64_t pad = 0;
    for (const auto& b : epoch_batches(lengths, o, 0)) {
      std::int64_t mx = 0;
      for (auto i : b) mx = std::max(mx, lengths[static_cast<std::size_t>(i)]);
      for (auto i : b) pad += mx - lengths[static_cast<std::size_t>(i)];
    }
    return pad;
  };
  CHECK(padding(32) * 4 < padding(1));
}

TEST_CASE("a batch stream sought to a saved position continues exactly as the uninterrupted one") {
  ExampleSetBuilder b;
  for (int i = 0; i < 23; ++i) {
    std::vector<std::int32_t> prompt(static_cast<std::size_t>(1 + i % 5), 10 + i), answer{20, 2};
    b.add(prompt, answer, i, 0);
  }
  const ExampleSet ex = b.finish();
  BatchingOptions o;
  o.rows = 4;
  o.seed = 3;
  BatchStream a(ex, o, 3);
  CHECK(a.batches_per_epoch() == 5);
  std::vector<Batch> straight;
  std::vector<DataPosition> positions;
  for (int i = 0; i < 13; ++i) {
    positions.push_back(a.position());
    straight.push_back(a.next());
  }
  CHECK(positions[5] == DataPosition{1, 0});
  CHECK(positions[12] == DataPosition{2, 2});
  for (int k : {0, 3, 5, 9}) {
    std::map<std::string, std::string> meta;
    positions[static_cast<std::size_t>(k)].to_metadata(meta, o);
    BatchStream resumed(ex, o, 3);
    resumed.seek(DataPosition::from_metadata(meta, o, "ckpt"));
    for (int i = k; i < 13; ++i) {
      const Batch got = resumed.next();
      CHECK(got.input_ids == straight[static_cast<std::size_t>(i)].input_ids);
      CHECK(got.labels == straight[static_cast<std::size_t>(i)].labels);
    }
  }
  CHECK_THROWS_AS(a.seek({0, 5}), Error);
}

TEST_CASE("a data position refuses metadata written for another seed or batch size") {
  BatchingOptions o;
  o.rows = 4;
  o.seed = 3;
  std::map<std::string, std::string> meta;
  DataPosition{2, 1}.to_metadata(meta, o);
  CHECK(DataPosition::from_metadata(meta, o, "ckpt") == DataPosition{2, 1});
  BatchingOptions seed = o;
  seed.seed = 4;
  CHECK_THROWS_WITH_AS(DataPosition::from_metadata(meta, seed, "ckpt"),
                       doctest::Contains("seeded with 3"), Error);
  BatchingOptions rows = o;
  rows.rows = 8;
  CHECK_THROWS_WITH_AS(DataPosition::from_metadata(meta, rows, "ckpt"),
                       doctest::Contains("batches had 4 rows"), Error);
  meta.erase("data.batch");
  CHECK_THROWS_WITH_AS(DataPosition::from_metadata(meta, o, "ckpt"),
                       doctest::Contains("no 'data.batch'"), Error);
  meta["data.batch"] = "x";
  CHECK_THROWS_WITH_AS(DataPosition::from_metadata(meta, o, "ckpt"),
                       doctest::Contains("expected an integer"), Error);
}

#if defined(SEQPAR_WITH_ONIGURUMA)
TEST_CASE(
    "fixture: a character-level tokenizer.json gives one token per character and whole words") {
  TempDir dir;
  const NerDataset d = read_cluener(data_fixture("cluener_fixture.json"));
  std::vector<std::string> texts;
  for (const auto& r : d.records) texts.push_back(r.text);
  CharTokenizerOptions o;
  o.words = seqgpt_prompt_words();
  o.words.insert(o.words.end(), fixture_labels.begin(), fixture_labels.end());
  write_char_tokenizer(dir.path / "tokenizer.json", texts, o);
  const Tokenizer tok = Tokenizer::from_file(dir.path / "tokenizer.json");
  CHECK(tok.pad_id() == 3);
  CHECK(tok.eos_id() == 2);
  CHECK(tok.unk_id() == 0);
  for (const auto& t : texts) {
    CAPTURE(t);
    const auto ids = tok.encode(t);
    CHECK(static_cast<std::int64_t>(ids.size()) == detail::code_point_count(t));
    CHECK(tok.decode(ids) == t);
  }
  for (const std::string w : {"[GEN]", "抽取", "输入", "输出", "None", "organization", "address"})
    CHECK(tok.encode(w).size() == 1);
  // A prompt: each prompt word, label and character one token.
  const std::vector<std::string> labels{"name", "address"};
  const std::string p = seqgpt_prompt("张伟在武汉", Instruction::extraction, labels);
  // 输入 ": " 张伟在武汉 \n 抽取 ": " name ， address \n 输出 ": " [GEN]
  CHECK(tok.encode(p).size() == 1 + 2 + 5 + 1 + 1 + 2 + 1 + 1 + 1 + 1 + 1 + 2 + 1);
  CHECK(tok.decode(tok.encode(p)) == p);
  // A character outside the corpus falls back to its three bytes and still round-trips.
  CHECK(tok.encode("龘").size() == 3);
  CHECK(tok.decode(tok.encode("龘张伟")) == "龘张伟");
  // The vocabulary cap leaves the rarest characters to bytes.
  CharTokenizerOptions small = o;
  small.max_vocab = 4 + 256 + 40 + static_cast<std::int64_t>(o.words.size());
  write_char_tokenizer(dir.path / "small.json", texts, small);
  const Tokenizer st = Tokenizer::from_file(dir.path / "small.json");
  CHECK(static_cast<std::int64_t>(st.vocab_size()) <= small.max_vocab);
  const std::string all = texts[0] + texts[1] + texts[2];
  CHECK(st.encode(all).size() > tok.encode(all).size());
  CHECK(st.decode(st.encode(all)) == all);
  CharTokenizerOptions tiny;
  tiny.max_vocab = 100;
  CHECK_THROWS_AS(write_char_tokenizer(dir.path / "x.json", texts, tiny), Error);
}

TEST_CASE(
    "fixture: examples through the real tokenizer equal encoding the prompt and answer texts") {
  TempDir dir;
  const NerDataset d = read_cluener(data_fixture("cluener_fixture.jsonl"));
  std::vector<std::string> texts;
  for (const auto& r : d.records) texts.push_back(r.text);
  write_char_tokenizer(dir.path / "tokenizer.json", texts, {});
  const Tokenizer tok = Tokenizer::from_file(dir.path / "tokenizer.json");
  const ExampleSet ex = make_ner_examples(d.records, fixture_options(), tok);
  REQUIRE(ex.size() == 10);
  const auto chunks = chunk_labels(fixture_labels);
  for (std::size_t i = 0; i < ex.size(); ++i) {
    const auto& r = d.records[static_cast<std::size_t>(ex.record(i))];
    const auto& chunk = chunks[static_cast<std::size_t>(ex.chunk(i))];
    CHECK(tok.decode(ex.prompt(i)) == seqgpt_prompt(r.text, Instruction::extraction, chunk));
    const auto answer = ex.answer(i);
    CHECK(answer.back() == tok.eos_id());
    CHECK(tok.decode(answer.first(answer.size() - 1)) == ner_answer(r, chunk));
  }
}
#endif

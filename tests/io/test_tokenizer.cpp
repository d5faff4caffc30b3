#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "../support/files.hpp"
#include "seqpar/io/tokenizer.hpp"

using namespace seqpar;
namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

Json read_json(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open ", p.string());
  return Json::parse(in);
}

std::string from_hex(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  return out;
}

const Json& expected() {
  static const Json j = read_json(test::fixture_dir("tokenizer") / "expected.json");
  return j;
}

const Json& expected_fuzz() {
  static const Json j = read_json(test::fixture_dir("tokenizer") / "expected_fuzz.json");
  return j;
}

const Tokenizer& fixture_tokenizer(const std::string& name) {
  static std::map<std::string, Tokenizer> loaded;
  static std::mutex m;
  std::lock_guard lock(m);
  auto it = loaded.find(name);
  if (it == loaded.end())
    it = loaded
             .emplace(name, Tokenizer::from_file(test::fixture_dir("tokenizer") / (name + ".json")))
             .first;
  return it->second;
}

std::vector<std::string> fixture_names() {
  std::vector<std::string> names;
  for (const auto& [name, info] : expected()["tokenizers"].items()) names.push_back(name);
  return names;
}

void check_cases(const Json& cases) {
  for (const auto& c : cases) {
    const std::string text = from_hex(c["hex"].get<std::string>());
    for (const auto& [tname, ids] : c["ids"].items()) {
      INFO("case ", c["name"].get<std::string>(), ", tokenizer ", tname);
      const Tokenizer& tok = fixture_tokenizer(tname);
      CHECK(tok.encode(text) == ids.get<std::vector<std::int32_t>>());
    }
  }
}

// A temporary tokenizer.json, removed at scope exit.
struct TempJson {
  fs::path path;
  explicit TempJson(const Json& j, const std::string& raw = {}) {
    static std::atomic<int> counter{0};
    path = fs::temp_directory_path() / ("seqpar_tokenizer_test_" + std::to_string(::getpid()) +
                                        "_" + std::to_string(counter++) + ".json");
    std::ofstream out(path, std::ios::binary);
    out << (raw.empty() ? j.dump() : raw);
  }
  ~TempJson() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};

// Loads `j` from a file and returns the seqpar::Error message ("" when it loads).
std::string load_error(const Json& j, std::string* file = nullptr) {
  TempJson t(j);
  if (file) *file = t.path.string();
  try {
    (void)Tokenizer::from_file(t.path);
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

// GPT-2's byte -> character table written out from its definition, for the
// reference merge loop below.
std::string byte_level_spelling(std::string_view bytes) {
  std::string out;
  for (unsigned char b : bytes) {
    unsigned cp;
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE)) {
      cp = b;
    } else {
      unsigned n = 0;
      for (unsigned x = 0; x < b; ++x)
        if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE))) ++n;
      cp = 0x100 + n;
    }
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  return out;
}

// Splits a byte-level string into its characters (each 1 or 2 UTF-8 bytes).
std::vector<std::string> characters(const std::string& s) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = static_cast<unsigned char>(s[i]) < 0x80 ? 1 : 2;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace

TEST_CASE("tokenizer: ids equal Hugging Face tokenizers' on the named texts (fixture)") {
  check_cases(expected()["cases"]);
}

TEST_CASE(
    "tokenizer: ids equal Hugging Face tokenizers' on seeded random texts and bytes (fixture)") {
  check_cases(expected_fuzz()["cases"]);
}

TEST_CASE(
    "tokenizer: decode equals Hugging Face tokenizers' decode, with and without special tokens "
    "(fixture)") {
  for (const Json* cases : {&expected()["cases"], &expected_fuzz()["cases"]}) {
    for (const auto& c : *cases) {
      for (const auto& [tname, ids] : c["ids"].items()) {
        INFO("case ", c["name"].get<std::string>(), ", tokenizer ", tname);
        const Tokenizer& tok = fixture_tokenizer(tname);
        const auto v = ids.get<std::vector<std::int32_t>>();
        CHECK(tok.decode(v) == c["decoded"][tname].get<std::string>());
        CHECK(tok.decode(v, true) == c["decoded_skip_special"][tname].get<std::string>());
      }
    }
  }
  // Ids that name no token are skipped.
  for (const auto& d : expected()["extra_decodes"]) {
    const Tokenizer& tok = fixture_tokenizer(d["tokenizer"].get<std::string>());
    const auto v = d["ids"].get<std::vector<std::int32_t>>();
    CHECK(tok.decode(v) == d["decoded"].get<std::string>());
    CHECK(tok.decode(v, true) == d["decoded_skip_special"].get<std::string>());
  }
}

TEST_CASE(
    "tokenizer: decode(encode(s)) gives back s; invalid UTF-8 comes back with U+FFFD (fixture)") {
  for (const Json* cases : {&expected()["cases"], &expected_fuzz()["cases"]}) {
    for (const auto& c : *cases) {
      const std::string raw = from_hex(c["hex"].get<std::string>());
      const std::string text =
          c["text"].get<std::string>();  // Python's raw.decode('utf-8', 'replace')
      CHECK(detail::utf8_lossy(raw) == text);
      CHECK(detail::utf8_valid(raw) == c["valid_utf8"].get<bool>());
      for (const char* tname : {"bpe500", "bpe3000", "bpe500_added"}) {
        INFO("case ", c["name"].get<std::string>(), ", tokenizer ", tname);
        const Tokenizer& tok = fixture_tokenizer(tname);
        CHECK(tok.decode(tok.encode(raw)) == text);
        if (c["valid_utf8"].get<bool>()) CHECK(tok.decode(tok.encode(raw)) == raw);
      }
    }
  }
}

TEST_CASE("tokenizer: pre-tokenized pieces equal Hugging Face's pre_tokenize_str (fixture)") {
  for (const auto& c : expected()["cases"]) {
    const std::string raw = from_hex(c["hex"].get<std::string>());
    for (const auto& [tname, pieces] : c["pieces"].items()) {
      INFO("case ", c["name"].get<std::string>(), ", tokenizer ", tname);
      // pre_tokenize_str knows nothing of added tokens; compare texts without them.
      const std::string text = c["text"].get<std::string>();
      if (text.find('<') != std::string::npos) continue;
      CHECK(fixture_tokenizer(tname).pre_tokenize(raw) == pieces.get<std::vector<std::string>>());
    }
  }
}

TEST_CASE("tokenizer: vocabulary lookups agree with the file, parsed independently (fixture)") {
  for (const std::string& name : fixture_names()) {
    INFO("tokenizer ", name);
    const Tokenizer& tok = fixture_tokenizer(name);
    const Json doc = read_json(test::fixture_dir("tokenizer") / (name + ".json"));
    const Json& info = expected()["tokenizers"][name];
    CHECK(tok.vocab_size() == info["vocab_size"].get<std::size_t>());
    for (const auto& [token, id] : doc["model"]["vocab"].items()) {
      CHECK(tok.token_to_id(token) == id.get<std::int32_t>());
      CHECK(tok.id_to_token(id.get<std::int32_t>()) == token);
    }
    for (const auto& a : doc["added_tokens"]) {
      CHECK(tok.token_to_id(a["content"].get<std::string>()) == a["id"].get<std::int32_t>());
      CHECK(tok.id_to_token(a["id"].get<std::int32_t>()) == a["content"].get<std::string>());
    }
    CHECK(tok.unk_id() == info["special_ids"]["<unk>"].get<std::int32_t>());
    CHECK(tok.bos_id() == info["special_ids"]["<s>"].get<std::int32_t>());
    CHECK(tok.eos_id() == info["special_ids"]["</s>"].get<std::int32_t>());
    CHECK(tok.pad_id() == info["special_ids"]["<pad>"].get<std::int32_t>());
    CHECK(tok.token_to_id("no such token") == -1);
    CHECK(tok.id_to_token(-1).empty());
    CHECK(tok.id_to_token(static_cast<std::int32_t>(tok.vocab_size())).empty());
  }
  // BLOOM's layout: <unk> <s> </s> <pad> are ids 0..3.
  const Tokenizer& bloom_like = fixture_tokenizer("bpe3000");
  CHECK(bloom_like.unk_id() == 0);
  CHECK(bloom_like.bos_id() == 1);
  CHECK(bloom_like.eos_id() == 2);
  CHECK(bloom_like.pad_id() == 3);
}

TEST_CASE(
    "tokenizer: merges follow rank order, as a rescan-for-the-best-pair loop does (fixture)") {
  // Reference: the textbook loop, O(n^2): merge the leftmost occurrence of the
  // lowest-ranked adjacent pair until no pair has a rule.
  const Json doc = read_json(test::fixture_dir("tokenizer") / "bpe3000.json");
  std::map<std::pair<std::string, std::string>, std::size_t> rank;
  const auto& merges = doc["model"]["merges"];
  for (std::size_t r = 0; r < merges.size(); ++r)
    rank.emplace(std::make_pair(merges[r][0].get<std::string>(), merges[r][1].get<std::string>()),
                 r);
  const auto reference = [&](const std::string& word) {
    std::vector<std::string> sym = characters(byte_level_spelling(word));
    while (sym.size() > 1) {
      std::size_t best = sym.size();
      std::size_t best_rank = SIZE_MAX;
      for (std::size_t i = 0; i + 1 < sym.size(); ++i) {
        const auto it = rank.find({sym[i], sym[i + 1]});
        if (it != rank.end() && it->second < best_rank) {
          best_rank = it->second;
          best = i;
        }
      }
      if (best == sym.size()) break;
      sym[best] += sym[best + 1];
      sym.erase(sym.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    }
    std::vector<std::int32_t> ids;
    for (const auto& s : sym) ids.push_back(doc["model"]["vocab"][s].get<std::int32_t>());
    return ids;
  };
  // Words the pre-tokenizer leaves whole: no whitespace, no punctuation of the Split regex.
  const std::vector<std::string> alphabet = {"a",  "b",  "c",  "e",  "t", "h", "n", "s", "o", "中",
                                             "国", "你", "好", "的", "é", "0", "1", "😀", "-", "#"};
  std::mt19937 rng(42);
  for (int n = 0; n < 2000; ++n) {
    std::string word = rng() % 4 == 0 ? " " : "";
    const int len = 1 + static_cast<int>(rng() % 24);
    for (int k = 0; k < len; ++k) word += alphabet[rng() % alphabet.size()];
    INFO("word '", word, "'");
    CHECK(fixture_tokenizer("bpe3000").encode(word) == reference(word));
  }
}

TEST_CASE(
    "tokenizer: invalid UTF-8 becomes U+FFFD per maximal subpart, as Python's 'replace' "
    "(fixture)") {
  const std::string fffd = "\xEF\xBF\xBD";
  CHECK(detail::utf8_lossy("ok") == "ok");
  CHECK(detail::utf8_lossy("\x80") == fffd);
  CHECK(detail::utf8_lossy("\xE4\xBD") == fffd);  // truncated 3-byte form: one
  CHECK(detail::utf8_lossy("\xE4\xBD"
                           "A") == fffd + "A");
  CHECK(detail::utf8_lossy("\xC0\xAF") == fffd + fffd);  // C0 never starts a sequence
  CHECK(detail::utf8_lossy("\xE0\x80\xAF") ==
        fffd + fffd + fffd);  // overlong: E0 needs A0..BF next
  CHECK(detail::utf8_lossy("\xED\xA0\x80") == fffd + fffd + fffd);             // surrogate
  CHECK(detail::utf8_lossy("\xF4\x90\x80\x80") == fffd + fffd + fffd + fffd);  // above U+10FFFF
  CHECK(detail::utf8_lossy("\xF0\x9F\x98") == fffd);                           // truncated emoji
  CHECK(detail::utf8_lossy("\xF0\x9F\x98\x80") == "\xF0\x9F\x98\x80");
  CHECK(detail::utf8_lossy(std::string("a\0b", 3)) == std::string("a\0b", 3));

  const Tokenizer& tok = fixture_tokenizer("bpe3000");
  CHECK(tok.encode("a\xFF"
                   "b") == tok.encode("a\xEF\xBF\xBD"
                                      "b"));
  CHECK(tok.decode(tok.encode("\xE4\xBD")) == fffd);
  // A token sequence that ends inside a character decodes to U+FFFD, not to raw bytes.
  const auto ids = tok.encode("你");
  REQUIRE(ids.size() >= 1);
  std::vector<std::int32_t> first_byte = {tok.token_to_id(detail::byte_level_encode("\xE4"))};
  CHECK(tok.decode(first_byte) == fffd);
}

TEST_CASE("tokenizer: encode is thread-safe and copies share the loaded model (fixture)") {
  // bpe3000 splits with the hand-written BLOOM splitter, gpt2_style with Oniguruma.
  for (const char* name : {"bpe3000", "gpt2_style"}) {
    INFO("tokenizer ", name);
    const Tokenizer tok =
        Tokenizer::from_file(test::fixture_dir("tokenizer") / (std::string(name) + ".json"));
    std::vector<std::string> texts;
    std::vector<std::vector<std::int32_t>> want;
    for (const auto& c : expected_fuzz()["cases"]) {
      texts.push_back(from_hex(c["hex"].get<std::string>()));
      want.push_back(c["ids"][name].get<std::vector<std::int32_t>>());
    }
    std::atomic<int> mismatches{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t, copy = tok] {
        for (int rep = 0; rep < 20; ++rep)
          for (std::size_t i = 0; i < texts.size(); ++i) {
            const std::size_t k = (i * 7 + static_cast<std::size_t>(t + rep)) % texts.size();
            if (copy.encode(texts[k]) != want[k]) ++mismatches;
          }
      });
    }
    for (auto& th : threads) th.join();
    CHECK(mismatches.load() == 0);
  }
}

TEST_CASE("tokenizer: the whole benchmark corpus as one text round-trips (fixture)") {
  const Tokenizer& tok = fixture_tokenizer("bpe3000");
  const Json corpus = read_json(test::fixture_dir("tokenizer") / "bench_corpus.json");
  std::string all;
  for (const auto& t : corpus) all += t.get<std::string>() + "\n";
  const auto ids = tok.encode(all);
  CHECK(ids.size() > all.size() / 8);
  CHECK(tok.decode(ids) == all);
}

TEST_CASE(
    "tokenizer: unsupported or broken files throw seqpar::Error naming the file and the field "
    "(fixture)") {
  const Json good = read_json(test::fixture_dir("tokenizer") / "bpe500.json");
  CHECK(load_error(good).empty());

  const auto expect = [&](Json j, const std::string& field) {
    std::string file;
    const std::string msg = load_error(j, &file);
    INFO("message: ", msg);
    CHECK(msg.find(file) != std::string::npos);
    CHECK(msg.find(field) != std::string::npos);
  };

  {
    Json j = good;
    j["model"]["type"] = "WordPiece";
    expect(j, "model.type");
  }
  {
    Json j = good;
    j["normalizer"] = {{"type", "NFC"}};
    expect(j, "normalizer");
  }
  {
    Json j = good;
    j["decoder"] = {{"type", "WordPiece"}, {"prefix", "##"}};
    expect(j, "decoder.type");
  }
  {
    Json j = good;
    j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
    expect(j, "pre_tokenizer.pretokenizers[0].behavior");
  }
  {
    Json j = good;
    j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "([unclosed";
    expect(j, "pre_tokenizer.pretokenizers[0].pattern.Regex");
  }
  {
    Json j = good;
    j["pre_tokenizer"]["pretokenizers"][0]["type"] = "Whitespace";
    expect(j, "pre_tokenizer.pretokenizers[0].type");
  }
  {
    Json j = good;
    j["pre_tokenizer"] = j["pre_tokenizer"]["pretokenizers"][0];
    expect(j, "ByteLevel");
  }
  {
    Json j = good;
    j["model"]["dropout"] = 0.1;
    expect(j, "model.dropout");
  }
  {
    Json j = good;
    j["model"]["byte_fallback"] = true;
    expect(j, "model.byte_fallback");
  }
  {
    Json j = good;
    j["model"]["continuing_subword_prefix"] = "##";
    expect(j, "model.continuing_subword_prefix");
  }
  {
    Json j = good;
    j["model"]["merges"][0] = "Ġ notatoken";
    expect(j, "model.merges[0]");
  }
  {
    Json j = good;
    j["model"]["merges"][1] = "a b c";
    expect(j, "model.merges[1]");
  }
  {
    Json j = good;
    j["model"]["vocab"]["Ġ"] = "12";
    expect(j, "model.vocab");
  }
  {
    Json j = good;
    j["model"].erase("merges");
    expect(j, "model.merges");
  }
  {
    Json j = good;
    j["model"]["unk_token"] = "<nope>";
    expect(j, "model.unk_token");
  }
  {
    Json j = good;
    j["added_tokens"][1]["lstrip"] = true;
    expect(j, "added_tokens[1].lstrip");
  }
  {
    Json j = good;
    j["added_tokens"][1]["id"] = 0;
    expect(j, "added_tokens");
  }
  {
    TempJson t(Json{}, "{\"model\": {\"vocab\": {\"a\": 0,}}}");
    try {
      (void)Tokenizer::from_file(t.path);
      FAIL("expected an error");
    } catch (const Error& e) {
      const std::string msg = e.what();
      CHECK(msg.find(t.path.string()) != std::string::npos);
      CHECK(msg.find("JSON") != std::string::npos);
    }
  }
  {
    const fs::path missing = fs::temp_directory_path() / "seqpar_no_such_tokenizer.json";
    try {
      (void)Tokenizer::from_file(missing);
      FAIL("expected an error");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find(missing.string()) != std::string::npos);
    }
  }
}

TEST_CASE(
    "tokenizer: model.unk_token stands for bytes without a token, fused when fuse_unk is set "
    "(fixture)") {
  // Drop the token of byte 'z' (and every merge that uses it) from the small model.
  Json j = read_json(test::fixture_dir("tokenizer") / "bpe500.json");
  Json merges = Json::array();
  for (const auto& m : j["model"]["merges"]) {
    const std::string s = m.get<std::string>();
    if (s.find('z') == std::string::npos) merges.push_back(s);
  }
  Json vocab = Json::object();
  for (const auto& [t, id] : j["model"]["vocab"].items())
    if (t.find('z') == std::string::npos) vocab[t] = id;
  j["model"]["merges"] = merges;
  j["model"]["vocab"] = vocab;
  {
    TempJson t(j);
    const Tokenizer tok = Tokenizer::from_file(t.path);
    // Without unk_token the byte is dropped and its neighbours may merge, as in
    // Hugging Face tokenizers (which gives [] and [id of "ab"] here).
    CHECK(tok.encode("zz") == std::vector<std::int32_t>{});
    CHECK(tok.encode("azb") == std::vector<std::int32_t>{tok.token_to_id("ab")});
  }
  j["model"]["unk_token"] = "<unk>";
  {
    TempJson t(j);
    const Tokenizer tok = Tokenizer::from_file(t.path);
    CHECK(tok.encode("azzb") ==
          std::vector<std::int32_t>{tok.token_to_id("a"), 0, 0, tok.token_to_id("b")});
  }
  j["model"]["fuse_unk"] = true;
  {
    TempJson t(j);
    const Tokenizer tok = Tokenizer::from_file(t.path);
    CHECK(tok.encode("azzb") ==
          std::vector<std::int32_t>{tok.token_to_id("a"), 0, tok.token_to_id("b")});
  }
}

TEST_CASE(
    "tokenizer: ids far above the entry count are refused before any table is sized (fixture)") {
  const Json good = read_json(test::fixture_dir("tokenizer") / "bpe500.json");
  std::size_t entries = good["model"]["vocab"].size() + good["added_tokens"].size();
  {
    // A few kilobytes asking for two billion ids: once it allocated for all of them.
    Json j = good;
    j["model"]["vocab"]["zzzz"] = 1999999999;
    std::string file;
    const std::string msg = load_error(j, &file);
    INFO("message: ", msg);
    CHECK(msg.find(file + ": the largest token id is 1999999999 but the file has only " +
                   std::to_string(entries + 1) + " entries") != std::string::npos);
  }
  {
    Json j = good;
    j["added_tokens"].push_back({{"id", 2000000000}, {"content", "<big>"}, {"special", true}});
    const std::string msg = load_error(j);
    INFO("message: ", msg);
    CHECK(msg.find("the largest token id is 2000000000") != std::string::npos);
    CHECK(msg.find("added_tokens") != std::string::npos);
  }
  {
    // Gaps within the bound still load (ids need not be dense).
    Json j = good;
    j["added_tokens"].push_back({{"id", entries + 1000}, {"content", "<far>"}, {"special", true}});
    CHECK(load_error(j).empty());
  }
}

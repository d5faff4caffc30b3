#include <doctest/doctest.h>

#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "seqpar/io/detail/tokenizer_regex.hpp"
#include "seqpar/io/detail/tokenizer_split.hpp"
#include "seqpar/io/detail/utf8.hpp"

using namespace seqpar;

namespace {

using Pieces = std::vector<std::tuple<std::size_t, std::size_t, bool>>;

Pieces onig_pieces(const detail::OnigPattern& p, std::string_view s) {
  detail::OnigMatchRegion region;
  Pieces out;
  p.split(s, region, [&](std::size_t b, std::size_t e, bool m) { out.emplace_back(b, e, m); });
  return out;
}

Pieces hand_pieces(std::string_view s) {
  Pieces out;
  detail::bloom_split(s, [&](std::size_t b, std::size_t e, bool m) { out.emplace_back(b, e, m); });
  return out;
}

std::string utf8(char32_t cp) {
  std::string s;
  detail::utf8_append(cp, s);
  return s;
}

}  // namespace

TEST_CASE("bloom_split: the word class equals Oniguruma's for every code point") {
  const detail::OnigPattern cls("[^(\\s|[.,!?…。，、।۔،])]", "test");
  std::size_t excluded = 0;
  for (char32_t cp = 0; cp < 0x110000; ++cp) {
    if (cp >= 0xD800 && cp < 0xE000) continue;  // surrogates are not scalar values
    const std::string s = utf8(cp);
    const Pieces p = onig_pieces(cls, s);
    const bool onig_word = p.size() == 1 && std::get<2>(p[0]);
    if (onig_word != detail::bloom_word_char(cp)) {
      FAIL_CHECK("code point U+", std::hex, static_cast<unsigned>(cp), ": Oniguruma says ",
                 onig_word);
    }
    excluded += !onig_word;
  }
  // 25 White_Space code points and ( ) | . , ! ? … 。 ， 、 । ۔ ،.
  CHECK(excluded == 25 + 14);
}

TEST_CASE("bloom_split: pieces equal Oniguruma's for BLOOM's Split regex") {
  const detail::OnigPattern bloom(detail::bloom_split_pattern, "test");
  const std::vector<std::string> fixed = {
      "",         " ",   "  ",  "a",   " a",  "  a",          "a ",    "a  b", "\u3000a",
      " \u3000a", "(a)", "a|b", "...", " .a", "你好，世界。", "x\n y", "\t a", "a\xC2\x85 b"};
  for (const auto& s : fixed) {
    INFO("text '", s, "'");
    CHECK(hand_pieces(s) == onig_pieces(bloom, s));
  }
  const std::vector<std::string> pool = {
      " ",      " ",      "  ",     "a",      "Z",      "9",      "_",      "-",      "(",
      ")",      "|",      ".",      ",",      "!",      "?",      "[",      "]",      "\t",
      "\n",     "\r",     "\v",     "\f",     "…",      "。",     "，",     "、",     "।",
      "۔",      "،",      "中",     "é",      "😀",      "\u00a0", "\u0085", "\u3000", "\u2003",
      "\u200b", "\u2028", "\u202f", "\u205f", "\u1680", "\ufeff", "'"};
  std::mt19937 rng(7);
  for (int n = 0; n < 20000; ++n) {
    std::string s;
    const int len = static_cast<int>(rng() % 16);
    for (int k = 0; k < len; ++k) s += pool[rng() % pool.size()];
    INFO("text '", s, "'");
    CHECK(hand_pieces(s) == onig_pieces(bloom, s));
  }
}

TEST_CASE("OnigPattern: empty matches separate gaps and do not repeat where a match ended") {
  // x* matches empty everywhere: every other character becomes a gap of its
  // own (as Hugging Face tokenizers' Split gives for the same pattern).
  const detail::OnigPattern star("x*", "test");
  CHECK(onig_pieces(star, "ab") == Pieces{{0, 1, false}, {1, 2, false}});
  CHECK(onig_pieces(star, "xxa") == Pieces{{0, 2, true}, {2, 3, false}});
  CHECK(onig_pieces(star, "axb") == Pieces{{0, 1, false}, {1, 2, true}, {2, 3, false}});
  CHECK(onig_pieces(star, "") == Pieces{});
}

TEST_CASE("OnigPattern: a literal pattern matches only itself") {
  const detail::OnigPattern dot("a.b(", "test", true);
  CHECK(onig_pieces(dot, "axb(a.b(") == Pieces{{0, 4, false}, {4, 8, true}});
}

TEST_CASE("OnigPattern: a pattern that does not compile names the context") {
  try {
    detail::OnigPattern bad("([a", "some.json: pre_tokenizer.pattern.Regex");
    FAIL("expected an error");
  } catch (const Error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("some.json: pre_tokenizer.pattern.Regex") != std::string::npos);
    CHECK(msg.find("([a") != std::string::npos);
  }
}

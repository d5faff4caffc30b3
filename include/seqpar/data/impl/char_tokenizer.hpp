#pragma once
// The definitions of data/char_tokenizer.hpp: in its headers' units, or compiled once
// (core/separate_compilation.hpp).

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/data/char_tokenizer.hpp"
#include "seqpar/data/ner_record.hpp"
#include "seqpar/io/detail/tokenizer_byte_level.hpp"
#include "seqpar/io/detail/utf8.hpp"

namespace seqpar::inline v0 {

SEQPAR_DECL std::vector<std::string> seqgpt_prompt_words() {
  return {"输入", "输出", "抽取", "分类", "[GEN]", "None"};
}

SEQPAR_DECL nlohmann::ordered_json char_tokenizer_json(std::span<const std::string> texts,
                                                       const CharTokenizerOptions& o) {
  std::map<std::string, std::int64_t> counts;
  for (const auto& t : texts) {
    SEQPAR_CHECK(detail::utf8_valid(t), "char_tokenizer_json: a text is not valid UTF-8");
    for (std::size_t i = 0; i < t.size();) {
      const std::size_t b = i;
      detail::utf8_next(t, i);
      if (i - b > 1) ++counts[t.substr(b, i - b)];
    }
  }
  std::vector<std::pair<std::string, std::int64_t>> chars(counts.begin(), counts.end());
  std::stable_sort(chars.begin(), chars.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });

  const std::vector<std::string> specials{"<unk>", "<s>", "</s>", "<pad>"};
  std::set<std::string> words;
  for (const auto& w : o.words) {
    SEQPAR_CHECK(
        !w.empty() && detail::utf8_valid(w) && w.find_first_of(" \t\r\n") == std::string::npos,
        "char_tokenizer_json: word '", w, "' is empty, not UTF-8 or holds white space");
    if (std::find(specials.begin(), specials.end(), w) == specials.end()) words.insert(w);
  }
  const auto budget = o.max_vocab - static_cast<std::int64_t>(words.size());
  SEQPAR_CHECK(budget >= 4 + 256, "char_tokenizer_json: max_vocab ", o.max_vocab,
               " leaves no room for the ", "4 special tokens, 256 bytes and ", words.size(),
               " words");

  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  nlohmann::json merges = nlohmann::json::array();
  std::set<std::string> have;  // ordered_json looks keys up linearly
  std::int64_t next = 0;
  const auto put = [&](const std::string& tok) {
    vocab[tok] = next++;
    have.insert(tok);
  };
  for (const auto& s : specials) put(s);
  for (unsigned b = 0; b < 256; ++b)
    put(detail::byte_level_encode(std::string(1, static_cast<char>(b))));
  for (const auto& [ch, count] : chars) {
    if (count < o.min_count) break;
    std::int64_t cost = 0;
    for (std::size_t k = 2; k <= ch.size(); ++k)
      cost += !have.contains(detail::byte_level_encode(ch.substr(0, k)));
    if (next + cost > budget) break;
    for (std::size_t k = 2; k <= ch.size(); ++k) {
      const std::string tok = detail::byte_level_encode(ch.substr(0, k));
      if (have.contains(tok)) continue;
      put(tok);
      merges.push_back(detail::byte_level_encode(ch.substr(0, k - 1)) + " " +
                       detail::byte_level_encode(ch.substr(k - 1, 1)));
    }
  }
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  const auto add = [&](const std::string& content, std::int64_t id, bool special) {
    added.push_back({{"id", id},
                     {"content", content},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", special}});
  };
  for (std::size_t i = 0; i < specials.size(); ++i)
    add(specials[i], static_cast<std::int64_t>(i), true);
  for (const auto& w : words) add(w, next++, false);

  nlohmann::ordered_json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = added;
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Split"},
                           {"pattern", {{"Regex", " ?[^(\\s|[.,!?…。，、।۔،])]+"}}},
                           {"behavior", "Isolated"},
                           {"invert", false}},
                          {{"type", "ByteLevel"},
                           {"add_prefix_space", false},
                           {"trim_offsets", true},
                           {"use_regex", false}}}}};
  j["post_processor"] = nullptr;
  j["decoder"] = {{"type", "ByteLevel"},
                  {"add_prefix_space", true},
                  {"trim_offsets", true},
                  {"use_regex", true}};
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", false},
                {"vocab", vocab},
                {"merges", merges}};
  return j;
}

SEQPAR_DECL void write_char_tokenizer(const std::filesystem::path& path,
                                      std::span<const std::string> texts,
                                      const CharTokenizerOptions& o) {
  detail::write_file_atomic(path, char_tokenizer_json(texts, o).dump(1) + "\n");
}

}  // namespace seqpar::inline v0

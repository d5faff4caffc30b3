#pragma once
// Reading tokenizer.json in one pass. BLOOM's file is 14.5 MB, almost all of it
// model.vocab (250k entries) and model.merges (250k rules): a DOM of that costs a
// quarter of a million small allocations and most of a second. This SAX handler
// streams those two fields into flat buffers and builds an ordinary
// nlohmann::json for everything else (a few kilobytes of settings).

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/core/error.hpp"

namespace seqpar::inline v0::detail {

/// One model.vocab entry: the token is text[begin, begin + length).
struct RawVocabEntry {
  std::uint32_t begin;
  std::uint32_t length;
  std::int32_t id;
};

/// One model.merges rule: left is text[begin, begin + left_length), right
/// follows it directly (a "left right" string has its space dropped).
struct RawMerge {
  std::uint32_t begin;
  std::uint32_t left_length;
  std::uint32_t right_length;
};

/// tokenizer.json split into the streamed fields and the rest.
struct RawTokenizerJson {
  nlohmann::json rest;  // the document without model.vocab and model.merges
  bool has_vocab = false;
  bool has_merges = false;
  std::string vocab_text;
  std::vector<RawVocabEntry> vocab;
  std::string merge_text;
  std::vector<RawMerge> merges;
};

class TokenizerJsonReader final : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit TokenizerJsonReader(RawTokenizerJson& out) : out_(out) {}

  const std::string& error() const { return error_; }

  bool null() override { return value(nullptr); }
  bool boolean(bool v) override { return value(v); }
  bool number_integer(number_integer_t v) override { return value(v); }
  bool number_unsigned(number_unsigned_t v) override {
    if (mode() == Mode::vocab) {
      if (v > static_cast<number_unsigned_t>(INT32_MAX - 1))
        return fail("model.vocab: token '", key_, "' has id ", v,
                    ", above the largest supported id");
      out_.vocab.push_back(RawVocabEntry{token_begin_, static_cast<std::uint32_t>(key_.size()),
                                         static_cast<std::int32_t>(v)});
      return true;
    }
    return value(v);
  }
  bool number_float(number_float_t v, const string_t&) override { return value(v); }
  bool string(string_t& s) override {
    switch (mode()) {
      case Mode::merges: {
        const auto space = s.find(' ');
        if (space == string_t::npos || s.find(' ', space + 1) != string_t::npos)
          return fail("model.merges[", out_.merges.size(), "]: '", s,
                      "' is not two tokens separated by one space");
        return add_merge(std::string_view(s).substr(0, space),
                         std::string_view(s).substr(space + 1));
      }
      case Mode::merge_pair:
        if (pair_.size() == 2)
          return fail("model.merges[", out_.merges.size(), "]: a pair has more than two tokens");
        pair_.push_back(s);
        return true;
      case Mode::vocab:
        return fail("model.vocab: token '", key_, "' has a string id; expected an integer");
      default: return value(std::move(s));
    }
  }
  bool binary(binary_t& v) override { return value(std::move(v)); }

  bool start_object(std::size_t) override {
    if (mode() == Mode::dom && frames_.size() == 2 && key_ == "vocab" && frames_[1].is_model) {
      out_.has_vocab = true;
      frames_.push_back(Frame{Mode::vocab, nullptr, false});
      return true;
    }
    if (mode() != Mode::dom) return fail(where(), ": unexpected object");
    const bool is_model = frames_.size() == 1 && key_ == "model";
    nlohmann::json* node = place(nlohmann::json::object());
    frames_.push_back(Frame{Mode::dom, node, is_model});
    return true;
  }
  bool key(string_t& k) override {
    if (mode() == Mode::vocab) {
      token_begin_ = static_cast<std::uint32_t>(out_.vocab_text.size());
      out_.vocab_text.append(k);
    }
    key_ = k;
    return true;
  }
  bool end_object() override {
    frames_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    if (mode() == Mode::dom && frames_.size() == 2 && key_ == "merges" && frames_[1].is_model) {
      out_.has_merges = true;
      frames_.push_back(Frame{Mode::merges, nullptr, false});
      return true;
    }
    if (mode() == Mode::merges) {
      pair_.clear();
      frames_.push_back(Frame{Mode::merge_pair, nullptr, false});
      return true;
    }
    if (mode() != Mode::dom) return fail(where(), ": unexpected array");
    nlohmann::json* node = place(nlohmann::json::array());
    frames_.push_back(Frame{Mode::dom, node, false});
    return true;
  }
  bool end_array() override {
    const Mode m = mode();
    frames_.pop_back();
    if (m == Mode::merge_pair) {
      if (pair_.size() != 2)
        return fail("model.merges[", out_.merges.size(), "]: a pair needs two tokens");
      return add_merge(pair_[0], pair_[1]);
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    return fail("not valid JSON (", e.what(), ")");
  }

 private:
  enum class Mode { dom, vocab, merges, merge_pair };
  struct Frame {
    Mode mode;
    nlohmann::json* node;
    bool is_model;  // the top-level "model" object
  };

  Mode mode() const { return frames_.empty() ? Mode::dom : frames_.back().mode; }

  std::string where() const {
    switch (mode()) {
      case Mode::vocab: return "model.vocab";
      case Mode::merges:
      case Mode::merge_pair: return "model.merges";
      default: return "the document";
    }
  }

  template <class... Parts>
  bool fail(Parts&&... parts) {
    std::ostringstream os;
    (os << ... << std::forward<Parts>(parts));
    error_ = os.str();
    return false;
  }

  bool add_merge(std::string_view left, std::string_view right) {
    const auto begin = static_cast<std::uint32_t>(out_.merge_text.size());
    out_.merge_text.append(left);
    out_.merge_text.append(right);
    out_.merges.push_back(RawMerge{begin, static_cast<std::uint32_t>(left.size()),
                                   static_cast<std::uint32_t>(right.size())});
    return true;
  }

  // Stores a scalar or a new container where the parser stands; returns it.
  nlohmann::json* place(nlohmann::json&& v) {
    if (frames_.empty()) {
      out_.rest = std::move(v);
      return &out_.rest;
    }
    nlohmann::json* top = frames_.back().node;
    if (top->is_array()) {
      top->push_back(std::move(v));
      return &top->back();
    }
    nlohmann::json& slot = (*top)[key_];
    slot = std::move(v);
    return &slot;
  }

  template <class T>
  bool value(T&& v) {
    if (mode() == Mode::vocab)
      return fail("model.vocab: token '", key_,
                  "' has a non-integer id; expected an integer from 0");
    if (mode() != Mode::dom) return fail(where(), ": unexpected value; expected strings");
    place(nlohmann::json(std::forward<T>(v)));
    return true;
  }

  RawTokenizerJson& out_;
  std::vector<Frame> frames_;
  std::string key_;
  std::uint32_t token_begin_ = 0;
  std::vector<std::string> pair_;
  std::string error_;
};

/// The parts of a tokenizer.json's text; `file` names it in messages.
inline RawTokenizerJson parse_tokenizer_json(std::string_view bytes, const std::string& file) {
  RawTokenizerJson out;
  out.vocab_text.reserve(bytes.size() / 4);
  out.merge_text.reserve(bytes.size() / 4);
  TokenizerJsonReader reader(out);
  const bool ok = nlohmann::json::sax_parse(bytes.data(), bytes.data() + bytes.size(), &reader);
  SEQPAR_CHECK(ok, file, ": ",
               reader.error().empty() ? std::string("not valid JSON") : reader.error());
  SEQPAR_CHECK(out.rest.is_object(), file, ": the top level is not a JSON object");
  return out;
}

/// Reads and parses `path`; throws seqpar::Error naming the file on failure.
inline RawTokenizerJson read_tokenizer_json(const std::filesystem::path& path) {
  const std::string file = path.string();
  std::error_code missing;
  if (!std::filesystem::exists(path, missing)) fail_missing(file, ": no such tokenizer file");
  std::ifstream in(path, std::ios::binary);
  SEQPAR_CHECK(in.good(), file, ": cannot open the tokenizer file");
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  SEQPAR_CHECK(!ec, file, ": cannot read the tokenizer file size (", ec.message(), ")");
  SEQPAR_CHECK(size < (std::uint64_t{1} << 32), file, ": the tokenizer file is larger than 4 GiB");
  std::string bytes(static_cast<std::size_t>(size), '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(size));
  SEQPAR_CHECK(in.gcount() == static_cast<std::streamsize>(size), file,
               ": short read of the tokenizer file");
  return parse_tokenizer_json(bytes, file);
}

}  // namespace seqpar::inline v0::detail

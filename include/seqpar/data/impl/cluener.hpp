#pragma once
// The definitions of data/cluener.hpp: in its headers' units, or compiled once
// (core/separate_compilation.hpp).

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/data/cluener.hpp"
#include "seqpar/data/ner_record.hpp"
#include "seqpar/io/detail/json_kind.hpp"
#include "seqpar/io/detail/utf8.hpp"

namespace seqpar::inline v0 {

namespace detail {

/// A record parsed from one JSON value, or the reason and problem that make it bad.
struct CluenerParse {
  std::optional<NerRecord> record;
  std::string reason, problem;
};

inline CluenerParse cluener_bad(std::string reason, std::string problem) {
  return {std::nullopt, std::move(reason), std::move(problem)};
}

/// Checks one CLUENER record and turns it into a NerRecord.
inline CluenerParse parse_cluener_record(const nlohmann::json& v, const ReadOptions& o) {
  if (!v.is_object())
    return cluener_bad("not_an_object", std::string("is ") + json_kind(v) + "; expected an object");
  const auto text_it = v.find("text");
  if (text_it == v.end()) return cluener_bad("missing_text", "has no \"text\" field");
  if (!text_it->is_string())
    return cluener_bad("missing_text",
                       std::string("\"text\" is ") + json_kind(*text_it) + "; expected a string");
  NerRecord r;
  r.text = text_it->get<std::string>();
  const auto offsets = code_point_offsets(r.text);
  const auto n = static_cast<std::int64_t>(offsets.size()) - 1;
  if (o.max_chars > 0 && n > o.max_chars)
    return cluener_bad("too_long", "text has " + std::to_string(n) + " characters; the limit is " +
                                       std::to_string(o.max_chars) + " (ReadOptions::max_chars)");
  const auto label_it = v.find("label");
  r.labelled = label_it != v.end() && !label_it->is_null();
  if (r.labelled) {
    if (!label_it->is_object())
      return cluener_bad("bad_label_field", std::string("\"label\" is ") + json_kind(*label_it) +
                                                "; expected {type: {entity: [[start, end], ...]}}");
    for (const auto& [type, entities] : label_it->items()) {
      if (!entities.is_object())
        return cluener_bad("bad_label_field", "label '" + type + "' maps to " +
                                                  json_kind(entities) +
                                                  "; expected {entity: [[start, end], ...]}");
      for (const auto& [entity, spans] : entities.items()) {
        const std::string where = "label '" + type + "', entity '" + entity + "'";
        if (!spans.is_array() || spans.empty())
          return cluener_bad("bad_span", where + ": spans are " + json_kind(spans) +
                                             (spans.is_array() ? " (empty)" : "") +
                                             "; expected [[start, end], ...]");
        for (const auto& s : spans) {
          if (!s.is_array() || s.size() != 2 || !s[0].is_number_integer() ||
              !s[1].is_number_integer())
            return cluener_bad("bad_span", where + ": span " + s.dump() +
                                               " is not [start, end] with two integers");
          const auto b = s[0].get<std::int64_t>(), e = s[1].get<std::int64_t>();
          if (b < 0 || e < b || e >= n)
            return cluener_bad("span_outside_text",
                               where + ": span [" + std::to_string(b) + ", " + std::to_string(e) +
                                   "] is outside the text of " + std::to_string(n) +
                                   " characters (end is inclusive)");
          const auto first = offsets[static_cast<std::size_t>(b)],
                     last = offsets[static_cast<std::size_t>(e + 1)];
          const std::string_view got = std::string_view(r.text).substr(first, last - first);
          if (got != entity)
            return cluener_bad("span_mismatch", where + ": span [" + std::to_string(b) + ", " +
                                                    std::to_string(e) + "] reads '" +
                                                    std::string(got) + "' in the text");
          r.spans.push_back({type, b, e, entity});
        }
      }
    }
  }
  sort_spans(r.spans);
  std::string problem;
  if (std::string reason = check_record(r, o, problem); !reason.empty())
    return cluener_bad(reason, problem);
  return {std::move(r), {}, {}};
}

/// Collects records and problems while a file is read.
class CluenerReader {
 public:
  CluenerReader(const std::string& file, const ReadOptions& o)
      : options_(o), bad_(options_, data_.report) {
    data_.report.file = file;
  }

  /// Parses and checks the text of record number `record` that starts at `line`.
  void add_text(std::string_view text, std::int64_t line) {
    ++record_;
    nlohmann::json v;
    try {
      v = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      bad_.add("malformed_json", where(line) + ": not valid JSON: " + e.what());
      return;
    }
    add_value(v, line);
  }

  /// Checks the value of the record counted last (count_record or add_text).
  void add_value(const nlohmann::json& v, std::int64_t line) {
    CluenerParse p = parse_cluener_record(v, options_);
    if (!p.record) {
      bad_.add(p.reason, where(line) + ": " + p.problem);
      return;
    }
    p.record->line = line;
    data_.report.mentions += static_cast<std::int64_t>(p.record->spans.size());
    ++data_.report.records;
    data_.records.push_back(std::move(*p.record));
  }

  void add_problem(const std::string& reason, const std::string& message) {
    bad_.add(reason, message);
  }
  std::string where(std::int64_t line) const {
    return record_where(data_.report.file, line, record_);
  }
  void count_record() { ++record_; }
  NerDataset take() { return std::move(data_); }

 private:
  ReadOptions options_;
  NerDataset data_;
  BadRecords bad_;
  std::int64_t record_ = 0;
};

inline void read_cluener_lines(std::string_view s, CluenerReader& reader) {
  std::size_t pos = 0;
  std::int64_t line = 0;
  while (pos < s.size()) {
    const std::size_t nl = s.find('\n', pos);
    const std::size_t end = nl == std::string_view::npos ? s.size() : nl;
    std::string_view text = s.substr(pos, end - pos);
    ++line;
    pos = end + 1;
    while (!text.empty() && (text.back() == '\r' || text.back() == ' ' || text.back() == '\t'))
      text.remove_suffix(1);
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    if (!text.empty()) reader.add_text(text, line);
  }
}

// Objects one after another: a brace matcher that respects strings cuts them apart, so
// that one malformed object costs only itself; a '{' at the start of a line always begins
// a record, so an object left open costs itself, not the records after it.
inline void read_cluener_concatenated(std::string_view s, const std::string& file,
                                      CluenerReader& reader) {
  std::size_t i = 0;
  std::int64_t line = 1;
  const auto skip_separators = [&] {
    while (i < s.size() &&
           (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n' || s[i] == ',')) {
      line += s[i] == '\n';
      ++i;
    }
  };
  for (skip_separators(); i < s.size(); skip_separators()) {
    if (s[i] != '{') {
      const std::size_t next = s.find('{', i);
      const std::size_t stop = next == std::string_view::npos ? s.size() : next;
      std::string shown(s.substr(i, std::min<std::size_t>(stop - i, 40)));
      for (char& c : shown)
        if (c == '\n' || c == '\r') c = ' ';
      reader.add_problem("stray_text", file + ":" + std::to_string(line) + ": unexpected text '" +
                                           shown + "' between records; expected '{'");
      line += std::count(s.begin() + static_cast<std::ptrdiff_t>(i),
                         s.begin() + static_cast<std::ptrdiff_t>(stop), '\n');
      i = stop;
      continue;
    }
    const std::size_t start = i;
    const std::int64_t start_line = line;
    int depth = 0;
    bool in_string = false, escaped = false, closed = false, cut = false;
    for (; i < s.size(); ++i) {
      const char c = s[i];
      if (c == '\n') {
        ++line;
        // A raw newline ends no valid JSON string, and a '{' at the start of a line opens
        // the next record (CLUENER's pretty-printed records indent what they nest): an
        // unclosed object or string stops there and costs only its own record.
        in_string = escaped = false;
        if (i + 1 < s.size() && s[i + 1] == '{') {
          ++i;
          cut = true;
          break;
        }
        continue;
      }
      if (in_string) {
        if (escaped)
          escaped = false;
        else if (c == '\\')
          escaped = true;
        else if (c == '"')
          in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{') {
        ++depth;
      } else if (c == '}' && --depth == 0) {
        ++i;
        closed = true;
        break;
      }
    }
    if (!closed) {
      reader.count_record();
      reader.add_problem("malformed_json",
                         reader.where(start_line) + " starts here but is not closed before " +
                             (cut ? "the next record at line " + std::to_string(line)
                                  : std::string("the end of the file")));
      if (cut) continue;
      return;
    }
    reader.add_text(s.substr(start, i - start), start_line);
  }
}

}  // namespace detail

SEQPAR_DECL NerDataset read_cluener(const std::filesystem::path& path, const ReadOptions& options,
                                    JsonLayout layout) {
  constexpr const char* kind =
      "CLUENER JSON ({\"text\": ..., \"label\": {type: {entity: [[start, end]]}}} records)";
  const std::string file = path.string();
  const std::string s = detail::read_text_file(path, kind);
  const std::size_t first = s.find_first_not_of(" \t\r\n");
  SEQPAR_CHECK(first != std::string::npos, file, ": holds no records; expected ", kind);
  SEQPAR_CHECK(s[first] == '{' || s[first] == '[', file, ":", detail::line_of(s, first),
               ": starts with '",
               s.substr(first, std::min<std::size_t>(20, s.find('\n', first) - first)),
               "'; expected ", kind, " beginning with '{' or '['");
  detail::CluenerReader reader(file, options);
  if (layout == JsonLayout::automatic)
    layout = path.extension() == ".jsonl" ? JsonLayout::lines : JsonLayout::concatenated;
  if (s[first] == '[' && layout == JsonLayout::concatenated) {
    nlohmann::json all;
    try {
      all = nlohmann::json::parse(s);
    } catch (const nlohmann::json::exception& e) {
      detail::fail(file, ": starts with '[' but is not a valid JSON array of records: ", e.what());
    }
    for (const auto& v : all) {
      reader.count_record();
      reader.add_value(v, 0);
    }
  } else if (layout == JsonLayout::lines) {
    detail::read_cluener_lines(s, reader);
  } else {
    detail::read_cluener_concatenated(s, file, reader);
  }
  NerDataset d = reader.take();
  detail::require_records(d, kind);
  return d;
}

}  // namespace seqpar::inline v0

#pragma once
// The JSON record reader every task's JSON format goes through: records one per line (.jsonl)
// or concatenated, possibly pretty-printed objects (.json), or a top-level array; each record
// {"text": ..., "id": ... (optional), <the task's field>: ...}. A task says how its records
// look (JsonShape: the field and the kind of value that tell its records apart) and how to
// read that field into its record; the reader does the rest: JSON syntax, ids unique, the
// length limit and the allowed labels, one task per file (a record of another known shape is
// refused naming file, line and what it contradicts), bad records skipped and counted or,
// with OnBadRecord::fail, thrown.

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <filesystem>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/data/record.hpp"
#include "seqpar/io/detail/json_kind.hpp"
#include "seqpar/io/detail/utf8.hpp"

namespace seqpar::inline v0 {

/// How records are laid out in a JSON file.
enum class JsonLayout : std::uint8_t {
  automatic,     // .jsonl: lines; otherwise by the first character ('[' array, '{' objects)
  lines,         // one object per line
  concatenated,  // objects one after another, any whitespace or commas between them
};

/// The JSON kind of value a JsonShape's field holds.
enum class JsonValue : std::uint8_t { any, object, string };

/// How one task's records look in JSON: the field that holds the annotation and the kind of
/// its value. Two shapes with one field tell their tasks apart by the kind.
struct JsonShape {
  std::string_view task;   // the task's name ("ner")
  std::string_view field;  // "label"
  JsonValue value = JsonValue::any;
  std::string_view why;       // why a record is this task's: "its \"label\" is an object"
  std::string_view expected;  // the field's value, for messages: "a class (a string)"
  std::string_view records;   // the records, for messages: "classification records (...)"
};

namespace detail {

/// The shape of the shapes `known` a record has, and why; none for a record of text only,
/// or (with `unclear` set) for fields that fit no shape.
struct RecordShape {
  const JsonShape* shape = nullptr;
  std::string why;  // "its \"label\" is a string", or what makes the fields unclear
  bool unclear = false;
};

inline RecordShape record_shape(const nlohmann::json& v, std::span<const JsonShape> known) {
  std::vector<std::string_view> fields;  // the known fields the record has, in `known`'s order
  for (const auto& s : known) {
    const auto it = v.find(s.field);
    if (it != v.end() && !it->is_null() &&
        std::find(fields.begin(), fields.end(), s.field) == fields.end())
      fields.push_back(s.field);
  }
  if (fields.empty()) return {};
  if (fields.size() > 1)
    return {nullptr,
            "has both \"" + std::string(fields[0]) + "\" and \"" + std::string(fields[1]) +
                "\"; a record is annotated for one task",
            true};
  const nlohmann::json& value = v.at(fields[0]);
  std::vector<std::string> expected;
  for (const auto& s : known) {
    if (s.field != fields[0]) continue;
    if (s.value == JsonValue::any || (s.value == JsonValue::object && value.is_object()) ||
        (s.value == JsonValue::string && value.is_string()))
      return {&s, std::string(s.why), false};
    expected.emplace_back(s.expected);
  }
  std::sort(expected.begin(), expected.end());
  std::string why = "\"" + std::string(fields[0]) + "\" is " + json_kind(value) + "; expected ";
  for (std::size_t i = 0; i < expected.size(); ++i) why += (i ? " or " : "") + expected[i];
  return {nullptr, why, true};
}

/// Reads `[start, end]` of the entity `entity` in a text of code points at `offsets`; an
/// empty reason when it is one, else the reason (and `problem` says what is wrong).
inline std::string read_span(const nlohmann::json& s, const std::string& text,
                             const std::vector<std::size_t>& offsets, const std::string& entity,
                             const std::string& where, CharSpan& out, std::string& problem) {
  if (!s.is_array() || s.size() != 2 || !s[0].is_number_integer() || !s[1].is_number_integer()) {
    problem = where + ": span " + s.dump() + " is not [start, end] with two integers";
    return "bad_span";
  }
  const auto n = static_cast<std::int64_t>(offsets.size()) - 1;
  const auto b = s[0].get<std::int64_t>(), e = s[1].get<std::int64_t>();
  if (b < 0 || e < b || e >= n) {
    problem = where + ": span [" + std::to_string(b) + ", " + std::to_string(e) +
              "] is outside the text of " + std::to_string(n) + " characters (end is inclusive)";
    return "span_outside_text";
  }
  const auto first = offsets[static_cast<std::size_t>(b)],
             last = offsets[static_cast<std::size_t>(e + 1)];
  const std::string_view got = std::string_view(text).substr(first, last - first);
  if (got != entity) {
    problem = where + ": span [" + std::to_string(b) + ", " + std::to_string(e) + "] reads '" +
              std::string(got) + "' in the text";
    return "span_mismatch";
  }
  out = {b, e};
  return {};
}

/// The id a record's "id" gives, or the reason it is bad.
inline std::string parse_record_id(const nlohmann::json& v, RecordId& id, std::string& problem) {
  const auto it = v.find("id");
  if (it == v.end() || it->is_null()) return {};
  if (it->is_string() && !it->get<std::string>().empty()) {
    id = {0, it->get<std::string>(), true, true};
    return {};
  }
  if (it->is_number_integer() &&
      (!it->is_number_unsigned() ||
       it->get<std::uint64_t>() <= static_cast<std::uint64_t>(INT64_MAX))) {
    id = {it->get<std::int64_t>(), {}, false, true};
    return {};
  }
  problem = std::string("\"id\" is ") + (it->is_string() ? "an empty string" : json_kind(*it)) +
            (it->is_number_unsigned() ? " above 2^63 - 1" : "") +
            "; expected an integer or a string";
  return "bad_id";
}

/// Where `text`, which starts at line `line`, first holds bytes that are not UTF-8 ("line 4,
/// byte 17: 0xff is not UTF-8; expected UTF-8 text"), or an empty string when it is UTF-8.
inline std::string not_utf8(std::string_view text, std::int64_t line) {
  if (utf8_valid(text)) return {};
  std::size_t i = 0, bad = 0;
  while (i < text.size()) {
    const std::size_t n = utf8_sequence_at(text, i, bad);
    if (n == 0) break;
    i += n;
  }
  const std::size_t line_start = text.rfind('\n', i == 0 ? 0 : i - 1);
  const std::size_t column =
      line_start == std::string_view::npos || i == 0 ? i + 1 : i - line_start;
  std::ostringstream os;
  os << "line "
     << line + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(i), '\n')
     << ", byte " << column << ":";
  for (std::size_t k = i; k < i + bad && k < text.size(); ++k)
    os << " 0x" << std::hex << std::setw(2) << std::setfill('0')
       << static_cast<unsigned>(static_cast<unsigned char>(text[k])) << std::dec;
  os << (bad > 1 ? " are" : " is") << " not UTF-8; expected UTF-8 text";
  return os.str();
}

/// Reads a record's annotation (the value of its shape's field) into the record; returns
/// an empty reason when it is good, else the reason (and sets the problem).
template <class F, class R>
concept JsonAnnotationReader = std::invocable < const F&,
        const nlohmann::json&, R&, const std::vector<std::size_t>
&, std::string& > ;

/// Collects records of type R and problems while a file is read, and holds the file to one
/// task: `mine` (named) or the first annotated record's shape (none named).
template <std::derived_from<TextRecord> R, class Parse>
class JsonRecordReader {
 public:
  JsonRecordReader(const std::string& file, const ReadOptions& o, const JsonShape* mine,
                   std::span<const JsonShape> known, Parse parse)
      : options_(o), bad_(options_, data_.report), mine_(mine), parse_(std::move(parse)) {
    data_.report.file = file;
    if (mine) {
      data_.report.task = std::string(mine->task);
      shapes_.push_back(*mine);
    }
    for (const auto& s : known)
      if (!mine || s.task != mine->task) shapes_.push_back(s);
  }

  /// Parses and checks the text of record number `record` that starts at `line`.
  void add_text(std::string_view text, std::int64_t line) {
    ++record_;
    if (const std::string bad = not_utf8(text, line); !bad.empty()) {
      bad_.add("invalid_utf8", where(line) + ": " + bad);
      return;
    }
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
    if (!v.is_object()) {
      bad_.add("not_an_object", where(line) + ": is " + json_kind(v) + "; expected an object");
      return;
    }
    const RecordShape shape = record_shape(v, shapes_);
    if (shape.shape) hold_to_one_task(*shape.shape, shape.why, line);
    R r;
    std::string reason, problem;
    if (reason = parse_record(v, shape, r, problem); !reason.empty()) {
      bad_.add(reason, where(line) + ": " + problem);
      return;
    }
    r.line = line;
    if (!r.id.from_file) r.id.number = line > 0 ? line : record_;
    const auto [seen, fresh] = ids_.try_emplace({r.id.is_string, r.id.text()}, where(line));
    if (!fresh) {
      bad_.add("duplicate_id", where(line) + ": id " + r.id.text() + " is also the id of " +
                                   seen->second +
                                   (r.id.from_file ? ""
                                                   : " (a record without \"id\" is known "
                                                     "by its line)"));
      return;
    }
    data_.report.mentions += static_cast<std::int64_t>(record_labels(r).size());
    ++data_.report.records;
    data_.records.push_back(std::move(r));
  }

  void add_problem(const std::string& reason, const std::string& message) {
    bad_.add(reason, message);
  }
  std::string where(std::int64_t line) const {
    return record_where(data_.report.file, line, record_);
  }
  void count_record() { ++record_; }
  Dataset<R> take() { return std::move(data_); }

 private:
  // Checks one record and reads its text, id and (when it is the reader's task) annotation.
  std::string parse_record(const nlohmann::json& v, const RecordShape& shape, R& r,
                           std::string& problem) {
    const auto text_it = v.find("text");
    if (text_it == v.end()) return problem = "has no \"text\" field", "missing_text";
    if (!text_it->is_string())
      return problem = std::string("\"text\" is ") + json_kind(*text_it) + "; expected a string",
             "missing_text";
    r.text = text_it->get<std::string>();
    const auto offsets = code_point_offsets(r.text);
    const auto n = static_cast<std::int64_t>(offsets.size()) - 1;
    if (options_.max_chars > 0 && n > options_.max_chars)
      return problem = "text has " + std::to_string(n) + " characters; the limit is " +
                       std::to_string(options_.max_chars) + " (ReadOptions::max_chars)",
             "too_long";
    if (std::string reason = parse_record_id(v, r.id, problem); !reason.empty()) return reason;
    r.labelled = mine_ && shape.shape;
    if (mine_ && shape.unclear) return problem = shape.why, "bad_label_field";
    if (r.labelled)
      if (std::string reason = parse_(v.at(mine_->field), r, offsets, problem); !reason.empty())
        return reason;
    return check_record(r, options_, problem);
  }

  // A named task takes only its records; otherwise the first annotated record names it.
  void hold_to_one_task(const JsonShape& shape, const std::string& why, std::int64_t line) {
    auto& held = data_.report.task;
    if (held.empty()) {
      held = std::string(shape.task);
      first_ = where(line) + " (" + why + ")";
      return;
    }
    if (held == shape.task) return;
    if (mine_)
      fail(where(line), " is a ", shape.task, " record (", why, "); the task ", held, " reads ",
           mine_->records);
    fail(where(line), " is a ", shape.task, " record (", why, "), but ", first_,
         " made the file's task ", held, "; a file holds the records of one task");
  }

  ReadOptions options_;
  Dataset<R> data_;
  BadRecords bad_;
  const JsonShape* mine_;
  Parse parse_;
  std::vector<JsonShape> shapes_;  // mine first, then the others known
  std::int64_t record_ = 0;
  std::string first_;  // where the record that named the task is, and why
  std::map<std::pair<bool, std::string>, std::string> ids_;  // (is a string, id) -> where
};

template <class Reader>
void read_json_lines(std::string_view s, Reader& reader) {
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
template <class Reader>
void read_json_concatenated(std::string_view s, const std::string& file, Reader& reader) {
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

/// The records of `path` as `mine`'s (read by `parse`), or (mine null) their texts alone,
/// the task the first annotated record's shape of `known` says set in the report.
template <std::derived_from<TextRecord> R, class Parse>
Dataset<R> read_json_records(const std::filesystem::path& path, const JsonShape* mine,
                             std::span<const JsonShape> known, Parse parse,
                             const ReadOptions& options, JsonLayout layout, const char* kind) {
  const std::string file = path.string();
  if (!options.labels.empty()) check_label_list(options.labels, file + ": ReadOptions::labels");
  const std::string s = read_text_file(path, kind);
  const std::size_t first = s.find_first_not_of(" \t\r\n");
  SEQPAR_CHECK(first != std::string::npos, file, ": holds no records; expected ", kind);
  SEQPAR_CHECK(s[first] == '{' || s[first] == '[', file, ":", line_of(s, first), ": starts with '",
               s.substr(first, std::min<std::size_t>(20, s.find('\n', first) - first)),
               "'; expected ", kind, " beginning with '{' or '['");
  JsonRecordReader<R, Parse> reader(file, options, mine, known, std::move(parse));
  if (layout == JsonLayout::automatic)
    layout = path.extension() == ".jsonl" ? JsonLayout::lines : JsonLayout::concatenated;
  if (s[first] == '[' && layout == JsonLayout::concatenated) {
    // An array is parsed whole: a byte that is not UTF-8 stops it, whatever options.on_bad.
    if (const std::string bad = not_utf8(s, 1); !bad.empty())
      fail(file, ": ", bad,
           " (a top-level array is read whole, so it cannot skip one record; "
           "one record per line can)");
    nlohmann::json all;
    try {
      all = nlohmann::json::parse(s);
    } catch (const nlohmann::json::exception& e) {
      fail(file, ": starts with '[' but is not a valid JSON array of records: ", e.what());
    }
    for (const auto& v : all) {
      reader.count_record();
      reader.add_value(v, 0);
    }
  } else if (layout == JsonLayout::lines) {
    read_json_lines(s, reader);
  } else {
    read_json_concatenated(s, file, reader);
  }
  Dataset<R> d = reader.take();
  require_records(d, kind);
  return d;
}

}  // namespace detail

/// Reads the JSON records of a task whose records look like `mine`, each record's
/// annotation (the value of mine.field) read into it by `parse` (it returns an empty string
/// when the value is good, else the reason, and sets the problem). A record of another shape
/// of `known` is refused naming the file, the line and the task it belongs to. Throws for a
/// file that cannot be read or holds no readable record; bad records are skipped and counted
/// in the report (or throw, with OnBadRecord::fail).
template <std::derived_from<TextRecord> R, class Parse>
requires detail::JsonAnnotationReader<Parse, R> Dataset<R> read_json_as(
    const std::filesystem::path& path, const JsonShape& mine, std::span<const JsonShape> known,
    Parse parse, const ReadOptions& options = {}, JsonLayout layout = JsonLayout::automatic,
    std::string_view counted = {}) {
  Dataset<R> d = detail::read_json_records<R>(path, &mine, known, std::move(parse), options, layout,
                                              std::string(mine.records).c_str());
  d.report.counted = std::string(counted);
  return d;
}

/// The name of the task whose shape of `known` the annotated records of `path` have; empty
/// when every record is text only. Throws for a file whose records are of two tasks, naming
/// both records.
inline std::string recognise_json_task(const std::filesystem::path& path,
                                       std::span<const JsonShape> known,
                                       const ReadOptions& options = {},
                                       JsonLayout layout = JsonLayout::automatic) {
  const auto none = [](const nlohmann::json&, TextRecord&, const std::vector<std::size_t>&,
                       std::string&) { return std::string(); };
  return detail::read_json_records<TextRecord>(
             path, nullptr, known, none, options, layout,
             "JSON records ({\"text\": ...} with a \"label\" or \"relations\" or neither)")
      .report.task;
}

}  // namespace seqpar::inline v0

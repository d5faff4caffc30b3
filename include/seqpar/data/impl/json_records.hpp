#pragma once
// The definitions of data/json_records.hpp: in its headers' units, or compiled once
// (core/separate_compilation.hpp).

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/data/json_records.hpp"
#include "seqpar/data/record.hpp"
#include "seqpar/io/detail/json_kind.hpp"
#include "seqpar/io/detail/utf8.hpp"

namespace seqpar::inline v0 {

namespace detail {

/// What a file of `task`'s records holds, for messages.
inline const char* records_of(NluTask task) {
  switch (task) {
    case NluTask::ner:
      return "NER records ({\"text\": ..., \"label\": {type: {entity: [[start, end], ...]}}})";
    case NluTask::classification:
      return "classification records ({\"text\": ..., \"label\": class})";
    default:
      return "relation records ({\"text\": ..., \"relations\": [{\"head\", \"relation\", "
             "\"tail\", ...}, ...]})";
  }
}

/// The task a record's fields say it is annotated for, and which field says so; no task for
/// a record of text only, or (with `unclear` set) for fields that fit no task.
struct RecordShape {
  std::optional<NluTask> task;
  std::string why;  // "\"label\" is a string", or what makes the fields unclear
  bool unclear = false;
};

inline RecordShape record_shape(const nlohmann::json& v) {
  const auto label = v.find("label"), relations = v.find("relations");
  const bool has_label = label != v.end() && !label->is_null();
  const bool has_relations = relations != v.end() && !relations->is_null();
  if (has_label && has_relations)
    return {std::nullopt,
            "has both \"label\" and \"relations\"; a record is annotated for one task", true};
  if (has_relations) return {NluTask::relation, "it has \"relations\"", false};
  if (!has_label) return {};
  if (label->is_object()) return {NluTask::ner, "its \"label\" is an object", false};
  if (label->is_string()) return {NluTask::classification, "its \"label\" is a string", false};
  return {std::nullopt,
          std::string("\"label\" is ") + json_kind(*label) +
              "; expected a class (a string) or {type: {entity: [[start, end], ...]}}",
          true};
}

/// A record parsed from one JSON value, or the reason and problem that make it bad.
struct RecordParse {
  std::optional<TextRecord> record;
  std::string reason, problem;
};

inline RecordParse bad_record(std::string reason, std::string problem) {
  return {std::nullopt, std::move(reason), std::move(problem)};
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

/// The mentions of a CLUENER "label" object.
inline std::string parse_ner_label(const nlohmann::json& label, TextRecord& r,
                                   const std::vector<std::size_t>& offsets, std::string& problem) {
  for (const auto& [type, entities] : label.items()) {
    if (const std::string p = label_problem(type); !p.empty()) {
      problem = "label '" + type + "' " + p;
      return "bad_label";
    }
    if (!entities.is_object()) {
      problem = "label '" + type + "' maps to " + json_kind(entities) +
                "; expected {entity: [[start, end], ...]}";
      return "bad_label_field";
    }
    for (const auto& [entity, spans] : entities.items()) {
      const std::string where = "label '" + type + "', entity '" + entity + "'";
      if (!spans.is_array() || spans.empty()) {
        problem = where + ": spans are " + json_kind(spans) + (spans.is_array() ? " (empty)" : "") +
                  "; expected [[start, end], ...]";
        return "bad_span";
      }
      for (const auto& s : spans) {
        CharSpan c;
        if (std::string reason = read_span(s, r.text, offsets, entity, where, c, problem);
            !reason.empty())
          return reason;
        r.spans.push_back({type, c.start, c.end, entity});
      }
    }
  }
  sort_spans(r.spans);
  return {};
}

/// The class of a classification record.
inline std::string parse_class_label(const nlohmann::json& label, TextRecord& r,
                                     std::string& problem) {
  r.label = label.get<std::string>();
  if (const std::string p = label_problem(r.label); !p.empty()) {
    problem = "label '" + r.label + "' " + p;
    return "bad_label";
  }
  return {};
}

/// The triples of a relation record's "relations".
inline std::string parse_relations(const nlohmann::json& relations, TextRecord& r,
                                   const std::vector<std::size_t>& offsets, std::string& problem) {
  if (!relations.is_array()) {
    problem = std::string("\"relations\" is ") + json_kind(relations) +
              "; expected [{\"head\", \"relation\", \"tail\", ...}, ...]";
    return "bad_relation";
  }
  std::size_t i = 0;
  for (const auto& item : relations) {
    const std::string where = "relation " + std::to_string(++i);
    if (!item.is_object()) {
      problem = where + " is " + json_kind(item) + "; expected an object";
      return "bad_relation";
    }
    RelationTriple t;
    for (const auto& [field, value] :
         {std::pair{"head", &t.head}, std::pair{"relation", &t.relation},
          std::pair{"tail", &t.tail}}) {
      const auto it = item.find(field);
      if (it == item.end() || !it->is_string() || it->get<std::string>().empty()) {
        problem = where + ": \"" + field + "\" is " +
                  (it == item.end()  ? std::string("missing")
                   : it->is_string() ? std::string("empty")
                                     : json_kind(*it)) +
                  "; expected a non-empty string";
        return "bad_relation";
      }
      *value = it->get<std::string>();
    }
    if (const std::string p = label_problem(t.relation); !p.empty()) {
      problem = where + ": relation '" + t.relation + "' " + p;
      return "bad_label";
    }
    for (const auto& [field, entity, span] : {std::tuple{"head_span", &t.head, &t.head_span},
                                              std::tuple{"tail_span", &t.tail, &t.tail_span}}) {
      const auto it = item.find(field);
      if (it != item.end() && !it->is_null()) {
        CharSpan c;
        const std::string at = where + " (" + field + " of '" + *entity + "')";
        if (std::string reason = read_span(*it, r.text, offsets, *entity, at, c, problem);
            !reason.empty())
          return reason;
        *span = c;
      } else if (r.text.find(*entity) == std::string::npos) {
        problem = where + ": '" + *entity + "' does not occur in the text";
        return "entity_not_in_text";
      }
    }
    r.relations.push_back(std::move(t));
  }
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

/// Checks one record (of any shape, or with `texts_only` reading only its text and id) and
/// turns it into a TextRecord.
inline RecordParse parse_json_record(const nlohmann::json& v, const RecordShape& shape,
                                     bool texts_only, const ReadOptions& o) {
  const auto text_it = v.find("text");
  if (text_it == v.end()) return bad_record("missing_text", "has no \"text\" field");
  if (!text_it->is_string())
    return bad_record("missing_text",
                      std::string("\"text\" is ") + json_kind(*text_it) + "; expected a string");
  TextRecord r;
  r.text = text_it->get<std::string>();
  const auto offsets = code_point_offsets(r.text);
  const auto n = static_cast<std::int64_t>(offsets.size()) - 1;
  if (o.max_chars > 0 && n > o.max_chars)
    return bad_record("too_long", "text has " + std::to_string(n) + " characters; the limit is " +
                                      std::to_string(o.max_chars) + " (ReadOptions::max_chars)");
  std::string reason, problem;
  if (reason = parse_record_id(v, r.id, problem); !reason.empty())
    return bad_record(reason, problem);
  r.labelled = !texts_only && shape.task.has_value();
  if (!texts_only && shape.unclear) return bad_record("bad_label_field", shape.why);
  if (r.labelled) {
    switch (*shape.task) {
      case NluTask::ner: reason = parse_ner_label(v.at("label"), r, offsets, problem); break;
      case NluTask::classification: reason = parse_class_label(v.at("label"), r, problem); break;
      case NluTask::relation:
        reason = parse_relations(v.at("relations"), r, offsets, problem);
        break;
    }
    if (!reason.empty()) return bad_record(reason, problem);
  }
  if (reason = check_record(r, o, problem); !reason.empty()) return bad_record(reason, problem);
  return {std::move(r), {}, {}};
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

/// Collects records and problems while a file is read, and holds the file to one task.
class JsonRecordReader {
 public:
  JsonRecordReader(const std::string& file, const ReadOptions& o, std::optional<NluTask> task,
                   bool texts_only)
      : options_(o),
        bad_(options_, data_.report),
        named_(task.has_value()),
        texts_only_(texts_only) {
    data_.report.file = file;
    data_.report.task = task;
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
    const RecordShape shape = texts_only_ ? RecordShape{} : record_shape(v);
    if (shape.task) hold_to_one_task(*shape.task, shape.why, line);
    RecordParse p = parse_json_record(v, shape, texts_only_, options_);
    if (!p.record) {
      bad_.add(p.reason, where(line) + ": " + p.problem);
      return;
    }
    TextRecord& r = *p.record;
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
    data_.report.mentions += static_cast<std::int64_t>(r.spans.size() + r.relations.size());
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
  TextDataset take() { return std::move(data_); }

 private:
  // A named task takes only its records; otherwise the first annotated record names it.
  void hold_to_one_task(NluTask task, const std::string& why, std::int64_t line) {
    auto& held = data_.report.task;
    if (!held) {
      held = task;
      first_ = where(line) + " (" + why + ")";
      return;
    }
    if (*held == task) return;
    if (named_)
      fail(where(line), " is a ", nlu_task_name(task), " record (", why, "); the task ",
           nlu_task_name(*held), " reads ", records_of(*held));
    fail(where(line), " is a ", nlu_task_name(task), " record (", why, "), but ", first_,
         " made the file's task ", nlu_task_name(*held), "; a file holds the records of one task");
  }

  ReadOptions options_;
  TextDataset data_;
  BadRecords bad_;
  bool named_, texts_only_;
  std::int64_t record_ = 0;
  std::string first_;  // where the record that named the task is, and why
  std::map<std::pair<bool, std::string>, std::string> ids_;  // (is a string, id) -> where
};

inline void read_json_lines(std::string_view s, JsonRecordReader& reader) {
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
inline void read_json_concatenated(std::string_view s, const std::string& file,
                                   JsonRecordReader& reader) {
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

/// The records of `path` as `task`'s (none: recognised), or their texts alone.
inline TextDataset read_json_records(const std::filesystem::path& path, std::optional<NluTask> task,
                                     bool texts_only, const ReadOptions& options, JsonLayout layout,
                                     const char* kind) {
  const std::string file = path.string();
  if (!options.labels.empty()) check_label_list(options.labels, file + ": ReadOptions::labels");
  const std::string s = read_text_file(path, kind);
  const std::size_t first = s.find_first_not_of(" \t\r\n");
  SEQPAR_CHECK(first != std::string::npos, file, ": holds no records; expected ", kind);
  SEQPAR_CHECK(s[first] == '{' || s[first] == '[', file, ":", line_of(s, first), ": starts with '",
               s.substr(first, std::min<std::size_t>(20, s.find('\n', first) - first)),
               "'; expected ", kind, " beginning with '{' or '['");
  JsonRecordReader reader(file, options, task, texts_only);
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
  TextDataset d = reader.take();
  require_records(d, kind);
  return d;
}

}  // namespace detail

SEQPAR_DECL TextDataset read_records(const std::filesystem::path& path, std::optional<NluTask> task,
                                     const ReadOptions& options, JsonLayout layout) {
  return detail::read_json_records(
      path, task, false, options, layout,
      task ? detail::records_of(*task)
           : "JSON records ({\"text\": ...} with a \"label\" or \"relations\" or neither)");
}

SEQPAR_DECL TextDataset read_classification(const std::filesystem::path& path,
                                            const ReadOptions& options, JsonLayout layout) {
  return read_records(path, NluTask::classification, options, layout);
}

SEQPAR_DECL TextDataset read_relations(const std::filesystem::path& path,
                                       const ReadOptions& options, JsonLayout layout) {
  return read_records(path, NluTask::relation, options, layout);
}

SEQPAR_DECL TextDataset read_texts(const std::filesystem::path& path, const ReadOptions& options,
                                   JsonLayout layout) {
  return detail::read_json_records(path, std::nullopt, true, options, layout,
                                   "JSON records ({\"id\": ..., \"text\": ...})");
}

}  // namespace seqpar::inline v0

#pragma once
// Records as the readers return them: TextRecord (a text, its id and line), which each task's
// record extends with its annotation (NerRecord, ClassRecord, RelationRecord); Dataset, the
// records of one file; the options every reader takes; ReadReport: what a read kept, what it
// skipped and why.

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/io/atomic_file.hpp"  // write_file_atomic
#include "seqpar/io/detail/utf8.hpp"

namespace seqpar::inline v0 {

/// One labelled mention: code points [start, end] of its record's text (end inclusive,
/// CLUENER's convention; indices count characters, not bytes).
struct NerSpan {
  std::string label;
  std::int64_t start = 0, end = 0;
  std::string text;  // the mention itself: the text's code points start..end
  bool operator==(const NerSpan&) const = default;
};

/// Code points [start, end] of a record's text, end inclusive (CLUENER's convention).
struct CharSpan {
  std::int64_t start = 0, end = 0;
  auto operator<=>(const CharSpan&) const = default;
};

/// One relation as a file lists it: head, relation, tail, and where head and tail are in
/// the text when the file says (FinRE says nothing where the string occurs twice).
struct RelationTriple {
  std::string head, relation, tail;
  std::optional<CharSpan> head_span, tail_span;
  bool operator==(const RelationTriple&) const = default;
};

/// A record's id: the "id" of its JSON object (an integer or a string, written back as
/// read), else the 1-based line where the record starts (for a top-level array, which has
/// no lines, its 1-based place in the array).
struct RecordId {
  std::int64_t number = 0;  // an integer id, or the line
  std::string string;       // a string id
  bool is_string = false;
  bool from_file = false;  // the record's own "id" (else its line)

  /// "17", or the string.
  std::string text() const { return is_string ? string : std::to_string(number); }
  bool operator==(const RecordId&) const = default;
};

/// A record's text, id and place in its file; each task's record extends it with its
/// annotation. A record without annotation (a test split, or read by read_texts) has
/// labelled == false.
struct TextRecord {
  std::string text;
  bool labelled = true;
  std::int64_t line = 0;  // 1-based line of the file where the record starts; 0 when unknown
  RecordId id{};
};

/// A text-only record names no label.
inline std::vector<std::string> record_labels(const TextRecord&) { return {}; }

/// What a reader does with a record that fails a check.
enum class OnBadRecord : std::uint8_t {
  skip,  // count it in ReadReport and go on
  fail,  // throw seqpar::Error naming the file, line, record and problem
};

/// Checks a reader applies to every record.
struct ReadOptions {
  std::vector<std::string> labels;  // the allowed labels (NER, classes, relations); empty: any
  std::int64_t max_chars = 512;     // longer texts (in code points) are bad records; 0: no limit
  bool require_labels = false;      // a record without labels is bad (else: labelled = false)
  OnBadRecord on_bad = OnBadRecord::skip;
  std::size_t keep_problems = 10;  // problem messages kept verbatim in ReadReport
};

/// What a read kept and skipped. Each skipped record is counted under one reason
/// ("malformed_json", "unknown_label", "span_outside_text", "span_mismatch", "too_long",
/// ...), and the first few problems are kept as full messages.
struct ReadReport {
  std::string file;
  std::string task;           // the name of the task the records are annotated for; empty: text
  std::string counted;        // what `mentions` counts ("mentions", "relations"); empty: nothing
  std::int64_t records = 0;   // records kept
  std::int64_t mentions = 0;  // the annotations `counted` names, in the kept records
  std::int64_t skipped = 0;   // records (or stretches of text) skipped
  std::map<std::string, std::int64_t> skipped_by_reason;
  std::vector<std::string> problems;

  /// One line: "<file>: 10748 records, 23971 mentions, 2 skipped (too_long 2)" (relation
  /// files count "relations"; classification and text-only files neither).
  std::string summary() const {
    std::ostringstream os;
    os << file << ": " << records << " records, ";
    if (!counted.empty()) os << mentions << ' ' << counted << ", ";
    os << skipped << " skipped";
    if (!skipped_by_reason.empty()) {
      os << " (";
      bool first = true;
      for (const auto& [reason, n] : skipped_by_reason) {
        os << (first ? "" : ", ") << reason << ' ' << n;
        first = false;
      }
      os << ')';
    }
    return os.str();
  }
};

/// Records read from one file (TextRecord or a task's record) and the report of the read.
template <class R>
struct Dataset {
  std::vector<R> records;
  ReadReport report;

  /// The name of the task the records are annotated for (empty: text only).
  const std::string& task() const { return report.task; }

  /// The distinct labels of the records' annotations (record_labels), sorted.
  std::vector<std::string> labels() const {
    std::set<std::string> s;
    for (const auto& r : records)
      for (auto& l : record_labels(r)) s.insert(std::move(l));
    return {s.begin(), s.end()};
  }
};

/// Records of text only (predict's input).
using TextDataset = Dataset<TextRecord>;

namespace detail {

/// Byte offset of each code point of well-formed UTF-8 `s`, and s.size() at the end.
inline std::vector<std::size_t> code_point_offsets(std::string_view s) {
  std::vector<std::size_t> out;
  out.reserve(s.size() + 1);
  std::size_t i = 0;
  while (i < s.size()) {
    out.push_back(i);
    utf8_next(s, i);
  }
  out.push_back(s.size());
  return out;
}

/// Number of code points of well-formed UTF-8 `s`.
inline std::int64_t code_point_count(std::string_view s) {
  std::int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

/// Columns well-formed UTF-8 `s` takes on a terminal: East Asian wide and fullwidth
/// characters (CJK, kana, hangul, fullwidth forms) two, combining marks none, others one.
inline std::int64_t display_width(std::string_view s) {
  std::int64_t w = 0;
  for (std::size_t i = 0; i < s.size();) {
    const char32_t c = utf8_next(s, i);
    const bool combining = (c >= 0x300 && c <= 0x36F) || (c >= 0x200B && c <= 0x200F);
    const bool wide = (c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0x303E) ||
                      (c >= 0x3041 && c <= 0xA4CF) || (c >= 0xAC00 && c <= 0xD7A3) ||
                      (c >= 0xF900 && c <= 0xFAFF) || (c >= 0xFE30 && c <= 0xFE4F) ||
                      (c >= 0xFF00 && c <= 0xFF60) || (c >= 0xFFE0 && c <= 0xFFE6) ||
                      (c >= 0x20000 && c <= 0x3FFFD);
    w += combining ? 0 : wide ? 2 : 1;
  }
  return w;
}

/// `s` and the spaces that make it `width` columns wide (none when it is wider).
inline std::string padded(std::string_view s, std::int64_t width) {
  return std::string(s) +
         std::string(static_cast<std::size_t>(std::max<std::int64_t>(width - display_width(s), 0)),
                     ' ');
}

/// Where a record is: "file:line: record n" (the line left out when unknown).
inline std::string record_where(const std::string& file, std::int64_t line, std::int64_t record) {
  std::string s = file;
  if (line > 0) s += ":" + std::to_string(line);
  return s + ": record " + std::to_string(record);
}

/// Counts bad records into a ReadReport, or throws in OnBadRecord::fail mode.
class BadRecords {
 public:
  BadRecords(const ReadOptions& options, ReadReport& report) : options_(options), report_(report) {}

  void add(const std::string& reason, const std::string& message) {
    if (options_.on_bad == OnBadRecord::fail) fail(message);
    skip(reason, message);
  }
  /// Counts a record skipped whatever OnBadRecord says (nothing in it to read).
  void skip(const std::string& reason, const std::string& message) {
    ++report_.skipped;
    ++report_.skipped_by_reason[reason];
    if (report_.problems.size() < options_.keep_problems) report_.problems.push_back(message);
  }

 private:
  const ReadOptions& options_;
  ReadReport& report_;
};

/// Checks common to every reader: the length limit and the allowed labels (of the
/// mentions, the class or the relations). Returns the reason and sets `problem`, or returns
/// an empty string when the record is fine.
template <std::derived_from<TextRecord> R>
std::string check_record(const R& r, const ReadOptions& o, std::string& problem) {
  if (o.max_chars > 0) {
    const std::int64_t n = code_point_count(r.text);
    if (n > o.max_chars) {
      problem = "text has " + std::to_string(n) + " characters; the limit is " +
                std::to_string(o.max_chars) + " (ReadOptions::max_chars)";
      return "too_long";
    }
  }
  if (!o.labels.empty())
    for (const auto& label : record_labels(r))
      if (std::find(o.labels.begin(), o.labels.end(), label) == o.labels.end()) {
        problem = "label '" + label + "' is not one of the allowed labels (";
        for (std::size_t i = 0; i < o.labels.size(); ++i) problem += (i ? ", " : "") + o.labels[i];
        problem += ")";
        return "unknown_label";
      }
  if (o.require_labels && !r.labelled) {
    problem = "has no labels (ReadOptions::require_labels)";
    return "missing_label";
  }
  return {};
}

/// Why `label` cannot be listed in a SeqGPT prompt, or an empty string when it can: a
/// prompt joins labels with '，', SeqGPT's inference turns ',' into '，' first, and an
/// answer line is "label: spans".
inline std::string label_problem(std::string_view label) {
  if (label.empty()) return "is empty";
  for (const std::string_view bad : {"，", ",", ": ", "\n"})
    if (label.find(bad) != std::string_view::npos)
      return "holds '" + std::string(bad == "\n" ? "\\n" : bad) +
             "', which a prompt's label list cannot hold";
  return {};
}

inline void sort_spans(std::vector<NerSpan>& spans) {
  std::sort(spans.begin(), spans.end(), [](const NerSpan& a, const NerSpan& b) {
    if (a.start != b.start) return a.start < b.start;
    if (a.end != b.end) return a.end < b.end;
    return a.label < b.label;
  });
}

/// The whole file as bytes; throws naming the file when it cannot be read. `kind` says
/// what was expected ("CLUENER JSON", "CoNLL BIO text").
inline std::string read_text_file(const std::filesystem::path& path, const char* kind) {
  const std::string file = path.string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    detail::fail_missing(file, ": no such file; expected ", kind);
  SEQPAR_CHECK(std::filesystem::is_regular_file(path, ec), file, ": not a regular file; expected ",
               kind);
  std::ifstream in(path, std::ios::binary);
  SEQPAR_CHECK(in.good(), file, ": cannot be opened for reading");
  std::ostringstream os;
  os << in.rdbuf();
  std::string s = os.str();
  SEQPAR_CHECK(!in.bad(), file, ": reading failed");
  const auto nul = s.find('\0');
  SEQPAR_CHECK(nul == std::string::npos, file, ": holds a NUL byte at offset ", nul,
               ", so it is a binary file; expected ", kind, " (UTF-8 text)");
  if (s.starts_with("\xEF\xBB\xBF")) s.erase(0, 3);  // a UTF-8 byte order mark
  return s;
}

/// Line (1-based) of byte offset `at` in `s`.
inline std::int64_t line_of(std::string_view s, std::size_t at) {
  return 1 + std::count(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(std::min(at, s.size())),
                        '\n');
}

/// Throws when a read kept nothing: a file of only bad records is the wrong kind of file.
template <class R>
void require_records(const Dataset<R>& d, const char* kind) {
  if (!d.records.empty()) return;
  const ReadReport& r = d.report;
  SEQPAR_CHECK(r.skipped > 0, r.file, ": holds no records; expected ", kind);
  fail(r.file, ": no record could be read (", r.skipped, " skipped); expected ", kind,
       ". First problem: ", r.problems.empty() ? std::string("?") : r.problems.front());
}

}  // namespace detail

/// Throws seqpar::Error unless `labels` is a list a task can use: at least one label, none
/// empty, none listed twice, each one a prompt can list (no ',', '，', ": " or newline).
/// `what` names the list in the message ("ReadOptions::labels").
inline void check_label_list(std::span<const std::string> labels, std::string_view what) {
  SEQPAR_CHECK(!labels.empty(), what, ": no label; expected at least one");
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const std::string problem = detail::label_problem(labels[i]);
    SEQPAR_CHECK(problem.empty(), what, ": label ", i + 1, " of ", labels.size(), " ('", labels[i],
                 "') ", problem);
    for (std::size_t j = 0; j < i; ++j)
      SEQPAR_CHECK(labels[j] != labels[i], what, ": '", labels[i], "' is listed twice (labels ",
                   j + 1, " and ", i + 1, ")");
  }
}

/// The labels of a comma-separated list, "name,company" (spaces around a name dropped),
/// checked by check_label_list: "", "," and "name,,company" are refused naming the empty
/// label. `what` names where the list came from ("ReadOptions::labels").
inline std::vector<std::string> parse_label_list(std::string_view list, std::string_view what) {
  std::vector<std::string> labels;
  for (std::size_t b = 0;;) {
    const std::size_t e = std::min(list.find(',', b), list.size());
    std::string_view name = list.substr(b, e - b);
    while (!name.empty() && (name.front() == ' ' || name.front() == '\t')) name.remove_prefix(1);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.remove_suffix(1);
    labels.emplace_back(name);
    if (e == list.size()) break;
    b = e + 1;
  }
  for (std::size_t i = 0; i < labels.size(); ++i)
    SEQPAR_CHECK(!labels[i].empty(), what, ": label ", i + 1, " of '", list,
                 "' is empty; expected names separated by ',' (\"name,company\")");
  check_label_list(labels, std::string(what) + " '" + std::string(list) + "'");
  return labels;
}

}  // namespace seqpar::inline v0

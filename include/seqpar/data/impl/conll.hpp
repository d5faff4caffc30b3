#pragma once
// The definitions of data/conll.hpp: in its headers' units, or compiled once
// (core/separate_compilation.hpp).

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/data/conll.hpp"
#include "seqpar/data/ner_record.hpp"
#include "seqpar/io/detail/utf8.hpp"

namespace seqpar::inline v0 {

SEQPAR_DECL std::vector<std::string> bio_tags(const NerRecord& r) {
  const auto n = static_cast<std::size_t>(detail::code_point_count(r.text));
  std::vector<std::string> tags(n, "O");
  for (const auto& sp : r.spans) {
    SEQPAR_CHECK(sp.start >= 0 && sp.end >= sp.start && static_cast<std::size_t>(sp.end) < n,
                 "record '", r.text, "': span [", sp.start, ", ", sp.end, "] is outside the text");
    for (std::int64_t i = sp.start; i <= sp.end; ++i) {
      auto& t = tags[static_cast<std::size_t>(i)];
      SEQPAR_CHECK(t == "O", "record '", r.text, "': mention '", sp.text, "' (", sp.label,
                   ") overlaps another mention; BIO tags cannot hold overlapping mentions");
      t = (i == sp.start ? "B-" : "I-") + sp.label;
    }
  }
  return tags;
}

SEQPAR_DECL void write_conll(const std::filesystem::path& path,
                             std::span<const NerRecord> records) {
  std::string out;
  for (const auto& r : records) {
    const auto tags = bio_tags(r);
    const auto offsets = detail::code_point_offsets(r.text);
    for (std::size_t i = 0; i < tags.size(); ++i) {
      const std::string_view ch =
          std::string_view(r.text).substr(offsets[i], offsets[i + 1] - offsets[i]);
      SEQPAR_CHECK(ch.find_first_of(" \t\r\n") == std::string_view::npos, path.string(),
                   ": record '", r.text,
                   "' has a white-space character, which a 'token tag' line cannot hold");
      out.append(ch).append(" ").append(tags[i]).append("\n");
    }
    out += "\n";
  }
  detail::write_file_atomic(path, out);
}

namespace detail {

/// A sentence being collected: its tokens, tags and first problem.
struct ConllSentence {
  std::int64_t line = 0;
  std::string text;
  std::vector<NerSpan> spans;
  std::int64_t chars = 0;
  std::string reason, problem;  // the first problem; empty when fine
  std::string open_label;       // label of the mention the last token belongs to
  bool empty() const { return line == 0; }
  void bad(std::string r, std::string p) {
    if (reason.empty()) reason = std::move(r), problem = std::move(p);
  }
};

}  // namespace detail

SEQPAR_DECL NerDataset read_conll(const std::filesystem::path& path, const ReadOptions& options) {
  constexpr const char* kind = "CoNLL BIO text ('token tag' lines, a blank line between sentences)";
  const std::string file = path.string();
  if (!options.labels.empty()) check_label_list(options.labels, file + ": ReadOptions::labels");
  const std::string s = detail::read_text_file(path, kind);
  const std::size_t first = s.find_first_not_of(" \t\r\n");
  SEQPAR_CHECK(first != std::string::npos, file, ": holds no records; expected ", kind);
  SEQPAR_CHECK(s[first] != '{' && s[first] != '[', file, ":", detail::line_of(s, first),
               ": starts with '", s[first], "', so it looks like JSON; expected ", kind,
               " (read CLUENER JSON with read_cluener)");
  NerDataset d;
  d.report.file = file;
  d.report.task = "ner";
  d.report.counted = "mentions";
  detail::BadRecords bad(options, d.report);
  detail::ConllSentence cur;
  std::int64_t record = 0;

  const auto finish = [&] {
    if (cur.empty()) return;
    ++record;
    const std::string where = detail::record_where(file, cur.line, record);
    if (!cur.reason.empty()) {
      bad.add(cur.reason, where + ": " + cur.problem);
    } else {
      NerRecord r;
      r.text = std::move(cur.text);
      r.spans = std::move(cur.spans);
      r.line = cur.line;
      r.id.number = cur.line;  // a sentence is known by the line where it starts
      std::string problem;
      if (std::string reason = detail::check_record(r, options, problem); !reason.empty()) {
        bad.add(reason, where + ": " + problem);
      } else {
        d.report.mentions += static_cast<std::int64_t>(r.spans.size());
        ++d.report.records;
        d.records.push_back(std::move(r));
      }
    }
    cur = {};
  };

  std::size_t pos = 0;
  std::int64_t line = 0;
  while (pos < s.size()) {
    const std::size_t nl = s.find('\n', pos);
    const std::size_t end = nl == std::string::npos ? s.size() : nl;
    std::string_view text = std::string_view(s).substr(pos, end - pos);
    pos = end + 1;
    ++line;
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    std::vector<std::string_view> fields;
    for (std::size_t i = 0; i < text.size();) {
      const std::size_t b = text.find_first_not_of(" \t", i);
      if (b == std::string_view::npos) break;
      const std::size_t e = std::min(text.find_first_of(" \t", b), text.size());
      fields.push_back(text.substr(b, e - b));
      i = e;
    }
    if (fields.empty()) {
      finish();
      continue;
    }
    if (fields[0] == "-DOCSTART-") continue;
    if (cur.empty()) cur.line = line;
    const std::string at = "line " + std::to_string(line);
    if (fields.size() != 2) {
      cur.bad("bad_line",
              at + " has " + std::to_string(fields.size()) + " fields; expected 'token tag'");
      continue;
    }
    const std::string_view token = fields[0], tag = fields[1];
    if (!detail::utf8_valid(token)) {
      cur.bad("invalid_utf8", at + ": the token is not valid UTF-8");
      continue;
    }
    const std::int64_t start = cur.chars, len = detail::code_point_count(token);
    cur.text.append(token);
    cur.chars += len;
    if (tag == "O") {
      cur.open_label.clear();
      continue;
    }
    const bool begin = tag.starts_with("B-"), inside = tag.starts_with("I-");
    if ((!begin && !inside) || tag.size() == 2) {
      cur.bad("bad_tag", at + ": tag '" + std::string(tag) + "' is not O, B-<label> or I-<label>");
      continue;
    }
    const std::string label(tag.substr(2));
    if (inside) {
      if (cur.open_label != label || cur.spans.empty()) {
        cur.bad("bad_tag", at + ": tag '" + std::string(tag) + "' continues no " + label +
                               " mention (the previous tag is not B-" + label + " or I-" + label +
                               ")");
        continue;
      }
      cur.spans.back().end = start + len - 1;
      cur.spans.back().text.append(token);
      continue;
    }
    cur.open_label = label;
    cur.spans.push_back({label, start, start + len - 1, std::string(token)});
  }
  finish();
  detail::require_records(d, kind);
  return d;
}

}  // namespace seqpar::inline v0

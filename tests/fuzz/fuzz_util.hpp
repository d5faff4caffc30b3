#pragma once
// Shared by the libFuzzer targets: a per-process scratch file for readers that take a
// path, and the one rule every target checks. Bad input may only end in seqpar::Error;
// any other exception (std::out_of_range, nlohmann::json's, std::bad_alloc from a size
// read out of the input) escapes the target and libFuzzer reports it as a crash, as it
// does for the sanitizers' findings.

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/data/classification.hpp"
#include "seqpar/data/ner_record.hpp"
#include "seqpar/data/record.hpp"
#include "seqpar/data/relation.hpp"
#include "seqpar/io/detail/utf8.hpp"

namespace seqpar::fuzz {

/// Bytes of one input as a string view.
inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// A file under the temporary folder, unique to this process, that holds the current
/// input (`suffix` chooses what readers decide by extension, e.g. ".jsonl").
class ScratchFile {
 public:
  explicit ScratchFile(const std::string& suffix)
      : path_(std::filesystem::temp_directory_path() /
              ("seqpar_fuzz_" + std::to_string(::getpid()) + suffix)) {}
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  ~ScratchFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }

  const std::filesystem::path& write(std::string_view bytes) const {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::perror("seqpar fuzz: cannot write the scratch file");
      std::abort();
    }
    return path_;
  }

 private:
  std::filesystem::path path_;
};

/// Runs `body`; a seqpar::Error is the expected answer to bad input, anything else
/// escapes (a finding).
template <class F>
void expect_clean(F&& body) {
  try {
    body();
  } catch (const seqpar::Error&) {
  }
}

/// Aborts, saying why, when `ok` is false.
inline void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "seqpar fuzz: %s\n", what);
  std::abort();
}

/// Byte offset of each code point of `text`, then its size.
inline std::vector<std::size_t> code_point_starts(const std::string& text) {
  std::vector<std::size_t> starts;
  for (std::size_t i = 0; i < text.size();) {
    starts.push_back(i);
    (void)seqpar::detail::utf8_next(text, i);
  }
  starts.push_back(text.size());
  return starts;
}

/// Aborts unless [start, end] (code points, end inclusive) lies inside `text` and spells
/// `expected`.
inline void check_span(const std::string& text, const std::vector<std::size_t>& starts,
                       std::int64_t start, std::int64_t end, const std::string& expected) {
  const auto chars = static_cast<std::int64_t>(starts.size()) - 1;
  if (start < 0 || end < start || end >= chars) {
    std::fprintf(stderr, "span [%lld, %lld] outside a text of %lld code points\n",
                 static_cast<long long>(start), static_cast<long long>(end),
                 static_cast<long long>(chars));
    std::abort();
  }
  const auto b = starts[static_cast<std::size_t>(start)],
             e = starts[static_cast<std::size_t>(end) + 1];
  if (text.compare(b, e - b, expected) != 0) {
    std::fprintf(stderr, "span text '%s' is not the text's code points %lld..%lld\n",
                 expected.c_str(), static_cast<long long>(start), static_cast<long long>(end));
    std::abort();
  }
}

/// Aborts unless a kept record's annotation holds what its reader promises (one overload a
/// record type): each NER span and each relation's span inside its text and spelling its
/// string, each relation's head and tail in the text, a class named, and no annotation on a
/// record read without one.
inline void check_annotation(const seqpar::TextRecord&) {}
inline void check_annotation(const seqpar::NerRecord& r) {
  const auto starts = code_point_starts(r.text);
  for (const auto& s : r.spans) check_span(r.text, starts, s.start, s.end, s.text);
  require(r.labelled || r.spans.empty(), "an unlabelled record with mentions");
}
inline void check_annotation(const seqpar::ClassRecord& r) {
  require(r.labelled != r.label.empty(), "a labelled record without a class, or the reverse");
}
inline void check_annotation(const seqpar::RelationRecord& r) {
  const auto starts = code_point_starts(r.text);
  for (const auto& t : r.relations) {
    require(!t.head.empty() && !t.tail.empty() && !t.relation.empty(), "an empty relation field");
    require(r.text.find(t.head) != std::string::npos && r.text.find(t.tail) != std::string::npos,
            "a relation's entity is not in its text");
    if (t.head_span) check_span(r.text, starts, t.head_span->start, t.head_span->end, t.head);
    if (t.tail_span) check_span(r.text, starts, t.tail_span->start, t.tail_span->end, t.tail);
  }
  require(r.labelled || r.relations.empty(), "an unlabelled record with relations");
}

/// Aborts unless every kept record holds what the readers promise (check_annotation), a
/// labelled record only in a file of `task` (the reader's; empty for read_texts, which
/// labels none), ids unique, and the report counting exactly the records and annotations
/// kept.
template <class R>
void check_records(const seqpar::Dataset<R>& d, std::string_view task) {
  std::set<std::pair<bool, std::string>> ids;
  std::int64_t annotations = 0;
  for (const auto& r : d.records) {
    check_annotation(r);
    require(!r.labelled || (!task.empty() && d.task() == task),
            "a labelled record in a file of text only or of another task");
    require(ids.emplace(r.id.is_string, r.id.text()).second, "two records share an id");
    annotations += static_cast<std::int64_t>(record_labels(r).size());
  }
  require(static_cast<std::int64_t>(d.records.size()) == d.report.records,
          "the report counts other records than those kept");
  require(annotations == d.report.mentions, "the report counts other annotations than those kept");
}

/// The NER readers' promises (check_records).
inline void check_ner(const seqpar::NerDataset& d) { check_records(d, "ner"); }

}  // namespace seqpar::fuzz

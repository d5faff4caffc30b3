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
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/data/ner_record.hpp"
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

/// Aborts unless every kept record holds what the NER readers promise: each span inside
/// its text (code points, end inclusive) and spelling those code points, and the report
/// counting exactly the records kept.
inline void check_ner(const seqpar::NerDataset& d) {
  for (const auto& r : d.records) {
    std::vector<std::size_t> starts;  // byte offset of each code point, then the end
    for (std::size_t i = 0; i < r.text.size();) {
      starts.push_back(i);
      (void)seqpar::detail::utf8_next(r.text, i);
    }
    starts.push_back(r.text.size());
    const auto chars = static_cast<std::int64_t>(starts.size()) - 1;
    for (const auto& s : r.spans) {
      if (s.start < 0 || s.end < s.start || s.end >= chars) {
        std::fprintf(stderr, "span [%lld, %lld] outside a text of %lld code points\n",
                     static_cast<long long>(s.start), static_cast<long long>(s.end),
                     static_cast<long long>(chars));
        std::abort();
      }
      const auto b = starts[static_cast<std::size_t>(s.start)],
                 e = starts[static_cast<std::size_t>(s.end) + 1];
      if (r.text.compare(b, e - b, s.text) != 0) {
        std::fprintf(stderr, "span text '%s' is not the text's code points %lld..%lld\n",
                     s.text.c_str(), static_cast<long long>(s.start),
                     static_cast<long long>(s.end));
        std::abort();
      }
    }
  }
  if (static_cast<std::int64_t>(d.records.size()) != d.report.records) std::abort();
}

}  // namespace seqpar::fuzz

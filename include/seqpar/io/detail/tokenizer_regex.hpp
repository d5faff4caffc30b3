#pragma once
// A compiled Oniguruma pattern and the "find every match" walk that the Split
// pre-tokenizer of Hugging Face tokenizers performs over a UTF-8 string. The
// options and syntax are the ones tokenizers uses (ONIG_OPTION_NONE, Oniguruma
// syntax, UTF-8), so `\s`, classes and properties mean the same thing here.

#include <oniguruma.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>

#include "seqpar/core/error.hpp"

namespace seqpar::inline v0::detail {

// Oniguruma's pattern compiler touches process-wide tables, so compilations are
// serialised; matching with a compiled pattern is reentrant.
inline std::mutex& onig_compile_mutex() {
  static std::mutex m;
  return m;
}

inline std::string onig_message(int code, OnigErrorInfo* info) {
  OnigUChar buf[ONIG_MAX_ERROR_MESSAGE_LEN];
  const int n = info ? onig_error_code_to_str(buf, code, info) : onig_error_code_to_str(buf, code);
  return std::string(reinterpret_cast<const char*>(buf), n > 0 ? static_cast<std::size_t>(n) : 0);
}

/// One match region, reused across the searches of one call.
class OnigMatchRegion {
 public:
  OnigMatchRegion() : region_(onig_region_new()) {
    SEQPAR_CHECK(region_ != nullptr, "Oniguruma: out of memory allocating a match region");
  }
  ~OnigMatchRegion() { onig_region_free(region_, 1); }
  OnigMatchRegion(const OnigMatchRegion&) = delete;
  OnigMatchRegion& operator=(const OnigMatchRegion&) = delete;
  OnigRegion* get() const { return region_; }

 private:
  OnigRegion* region_;
};

/// A compiled pattern (or, with `literal`, a plain string to find). `context`
/// (file and field) starts every error message.
class OnigPattern {
 public:
  OnigPattern(std::string_view pattern, std::string context, bool literal = false)
      : context_(std::move(context)) {
    std::lock_guard lock(onig_compile_mutex());
    static const int init = [] {
      OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
      return onig_initialize(encodings, 1);
    }();
    SEQPAR_CHECK(init == ONIG_NORMAL, context_, ": Oniguruma failed to initialise (",
                 onig_message(init, nullptr), ")");
    OnigErrorInfo info{};
    OnigRegex reg = nullptr;
    const auto* p = reinterpret_cast<const OnigUChar*>(pattern.data());
    const int rc = onig_new(&reg, p, p + pattern.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                            literal ? ONIG_SYNTAX_ASIS : ONIG_SYNTAX_ONIGURUMA, &info);
    SEQPAR_CHECK(rc == ONIG_NORMAL, context_, ": the regex '", pattern, "' does not compile (",
                 onig_message(rc, &info), ")");
    regex_.reset(reg);
  }

  /// Calls piece(begin, end, is_match) for the matches of the pattern in `s` and
  /// the gaps between them, in order; byte offsets into `s`, which must be
  /// well-formed UTF-8. Empty pieces are not reported, but an empty match still
  /// separates the gaps on either side. Like the onig crate's find_iter, an
  /// empty match right where the previous match ended is skipped.
  template <class F>
  void split(std::string_view s, OnigMatchRegion& region, F&& piece) const {
    const auto* str = reinterpret_cast<const OnigUChar*>(s.data());
    const auto* end = str + s.size();
    std::size_t prev = 0;    // end of the last match
    std::size_t search = 0;  // where the next search starts
    bool matched = false;    // whether a match ended at `prev`
    while (search <= s.size()) {
      const int at =
          onig_search(regex_.get(), str, end, str + search, end, region.get(), ONIG_OPTION_NONE);
      if (at == ONIG_MISMATCH) break;
      SEQPAR_CHECK(at >= 0, context_, ": regex search failed (", onig_message(at, nullptr), ")");
      const auto mb = static_cast<std::size_t>(region.get()->beg[0]);
      const auto me = static_cast<std::size_t>(region.get()->end[0]);
      if (me == mb && matched && me == prev) {
        search += search < s.size() ? utf8_char_len(static_cast<unsigned char>(s[search])) : 1;
        continue;
      }
      if (mb > prev) piece(prev, mb, false);
      if (me > mb) piece(mb, me, true);
      prev = me;
      search = me;
      matched = true;
    }
    if (prev < s.size()) piece(prev, s.size(), false);
  }

 private:
  struct Free {
    void operator()(OnigRegex r) const { onig_free(r); }
  };
  static std::size_t utf8_char_len(unsigned char b) {
    return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  }
  std::unique_ptr<std::remove_pointer_t<OnigRegex>, Free> regex_;
  std::string context_;
};

}  // namespace seqpar::inline v0::detail

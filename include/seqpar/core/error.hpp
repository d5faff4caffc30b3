#pragma once
// seqpar::Error: the one exception type users see. Its message names the file,
// tensor or rank at fault and what was expected.

#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace seqpar::inline v0 {

/// Thrown for every error a user can cause: bad files, bad configs, wrong world sizes.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

/// The Error of a file or folder the user named that does not exist (what Python raises as
/// FileNotFoundError).
class MissingFile : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <class E = Error, class... Parts>
[[noreturn]] void fail_streamed(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw E(os.str());
}

/// Throws Error with the parts streamed in order. A string literal's type holds its length;
/// decayed to pointers, messages of the same shape share one instantiation.
template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  fail_streamed<Error, std::decay_t<const Parts>...>(parts...);
}

/// fail, for a file or folder that does not exist: throws MissingFile.
template <class... Parts>
[[noreturn]] void fail_missing(const Parts&... parts) {
  fail_streamed<MissingFile, std::decay_t<const Parts>...>(parts...);
}
}  // namespace detail

}  // namespace seqpar::inline v0

/// Throws seqpar::Error built from the streamed parts when `cond` is false.
#define SEQPAR_CHECK(cond, ...)                       \
  do {                                                \
    if (!(cond)) ::seqpar::detail::fail(__VA_ARGS__); \
  } while (0)

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

namespace detail {
template <class... Parts>
[[noreturn]] void fail_streamed(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw Error(os.str());
}

/// Throws Error with the parts streamed in order. A string literal's type holds its length;
/// decayed to pointers, messages of the same shape share one instantiation.
template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  fail_streamed<std::decay_t<const Parts>...>(parts...);
}
}  // namespace detail

}  // namespace seqpar::inline v0

/// Throws seqpar::Error built from the streamed parts when `cond` is false.
#define SEQPAR_CHECK(cond, ...)                       \
  do {                                                \
    if (!(cond)) ::seqpar::detail::fail(__VA_ARGS__); \
  } while (0)

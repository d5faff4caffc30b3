// What a refusal says: the message of the seqpar::Error a call throws, which the tests hold
// to the words a user is meant to read.
#pragma once

#include <functional>
#include <string>

#include "seqpar/core/error.hpp"

namespace seqpar::test {

/// The message of the seqpar::Error `f` throws; empty when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace seqpar::test

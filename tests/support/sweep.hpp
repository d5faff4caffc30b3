// How densely the corruption sweeps go through their files. A sweep damages every byte
// position of a fixture (and opens every prefix of it); under AddressSanitizer at -O0 each
// open costs some fifty times more, so CI's ASan stage asks for every k-th position with
// SEQPAR_SWEEP_STRIDE=k (and a k-th of the random trials). Unset: every position.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <string>

#include <doctest/doctest.h>

namespace seqpar::test {

/// SEQPAR_SWEEP_STRIDE (a whole number from 1), or 1 when unset.
inline std::size_t sweep_stride() {
  const char* text = std::getenv("SEQPAR_SWEEP_STRIDE");
  if (text == nullptr || *text == '\0') return 1;
  char* end = nullptr;
  const unsigned long k = std::strtoul(text, &end, 10);
  REQUIRE_MESSAGE((*end == '\0' && k >= 1), "SEQPAR_SWEEP_STRIDE is '", std::string(text),
                  "'; expected a whole number from 1");
  return static_cast<std::size_t>(k);
}

}  // namespace seqpar::test

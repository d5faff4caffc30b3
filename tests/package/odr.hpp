#pragma once
// What each of the two translation units of test_package_odr sees of seqpar. Inline
// functions and types defined in headers must be one entity across the program.

#include <cstdint>
#include <typeinfo>

namespace odr_probe {

struct Observed {
  std::uint16_t (*float_to_bf16)(float) = nullptr;  // address of the inline function
  const std::type_info* error_type = nullptr;
  std::uint16_t bf16_of_pi = 0;
  float f16_roundtrip = 0.0f;
};

Observed observe_from_a();
[[noreturn]] void throw_from_a();

}  // namespace odr_probe

// First translation unit of test_package_odr.
#include <seqpar/seqpar.hpp>

#include "odr.hpp"

namespace odr_probe {

Observed observe_from_a() {
  Observed o;
  o.float_to_bf16 = &seqpar::float_to_bf16;
  o.error_type = &typeid(seqpar::Error);
  o.bf16_of_pi = seqpar::float_to_bf16(3.14159265f);
  o.f16_roundtrip = seqpar::f16_to_float(seqpar::float_to_f16(0.333333333f));
  return o;
}

void throw_from_a() { SEQPAR_CHECK(false, "thrown in ", "odr_a.cpp"); }

}  // namespace odr_probe

// Second translation unit of test_package_odr, with main: both units include the
// umbrella header, so any non-inline definition in it breaks the link, and any
// per-unit copy of an inline function or type shows up as a different address.
#include <seqpar/seqpar.hpp>

#include <cstdio>
#include <string>

#include "odr.hpp"

int main() {
  int failures = 0;
  auto expect = [&](bool ok, const char* what) {
    if (!ok) {
      std::fprintf(stderr, "odr: %s\n", what);
      ++failures;
    }
  };
  const odr_probe::Observed a = odr_probe::observe_from_a();
  expect(a.float_to_bf16 == &seqpar::float_to_bf16,
         "seqpar::float_to_bf16 has one address in both units");
  expect(*a.error_type == typeid(seqpar::Error), "seqpar::Error is one type in both units");
  expect(a.bf16_of_pi == 0x4049 && seqpar::float_to_bf16(3.14159265f) == 0x4049,
         "bf16(pi) == 0x4049 in both units");
  expect(a.f16_roundtrip == seqpar::f16_to_float(seqpar::float_to_f16(0.333333333f)),
         "f16 round trip agrees between the units");

  std::string caught;
  try {
    odr_probe::throw_from_a();
  } catch (const seqpar::Error& e) {
    caught = e.what();
  }
  expect(caught == "thrown in odr_a.cpp",
         "seqpar::Error thrown in one unit is caught in the other");

  std::printf("odr: %s\n", failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}

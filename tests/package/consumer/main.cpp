// A program that uses seqpar as a user's would: exact bf16/f16 conversions, dtype
// tables and seqpar::Error. Returns non-zero on any wrong result. The umbrella header
// builds with every set of components, seqpar::seqpar alone included (then without
// the CPU backend: SEQPAR_CONSUMER_CORE_ONLY).
#include <seqpar/seqpar.hpp>
#ifdef SEQPAR_CONSUMER_CORE_ONLY
#if defined(SEQPAR_WITH_EIGEN)
#error "seqpar::seqpar alone brought the cpu component's SEQPAR_WITH_EIGEN"
#endif
#endif

#include <cstdint>
#include <cstdio>
#include <string>

namespace {

int failures = 0;

void expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "consumer: wrong result: %s\n", what);
    ++failures;
  }
}

}  // namespace

int main() {
  expect(seqpar::float_to_bf16(1.0f) == 0x3f80, "bf16(1.0) == 0x3f80");
  // 1 + 2^-8 lies halfway between bf16 0x3f80 and 0x3f81: ties go to the even 0x3f80.
  expect(seqpar::float_to_bf16(1.00390625f) == 0x3f80, "bf16(1 + 2^-8) == 0x3f80");
  // 1 + 3 * 2^-8 lies halfway between 0x3f81 and 0x3f82: the even one is 0x3f82.
  expect(seqpar::float_to_bf16(1.01171875f) == 0x3f82, "bf16(1 + 3 * 2^-8) == 0x3f82");
  expect(seqpar::bf16_to_float(0x4049) == 3.140625f, "float(bf16 0x4049) == 3.140625");
  expect(seqpar::float_to_f16(65504.0f) == 0x7bff, "f16(65504) == 0x7bff (largest half)");
  expect(seqpar::f16_to_float(0x0001) == 5.9604644775390625e-8f, "float(f16 0x0001) == 2^-24");
  expect(seqpar::dtype_size(seqpar::DType::bf16) == 2, "dtype_size(bf16) == 2");
  expect(seqpar::dtype_name(seqpar::DType::bf16) == "BF16", "dtype_name(bf16) == \"BF16\"");

  std::string message;
  try {
    SEQPAR_CHECK(seqpar::dtype_size(seqpar::DType::f32) == 2, "f32 has ",
                 seqpar::dtype_size(seqpar::DType::f32), " bytes");
  } catch (const seqpar::Error& e) {
    message = e.what();
  }
  expect(message == "f32 has 4 bytes", "SEQPAR_CHECK throws seqpar::Error with its message");

  std::printf("consumer (%s): %s\n", SEQPAR_CONSUMER_MODE, failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}

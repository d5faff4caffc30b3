#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>

#include "seqpar/core/dtype.hpp"

using namespace seqpar;

TEST_CASE("f16 round-trips every finite half exactly") {
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const float f = f16_to_float(bits);
    if (std::isnan(f)) {
      CHECK(std::isnan(f16_to_float(float_to_f16(f))));
      continue;
    }
    CHECK(float_to_f16(f) == bits);
  }
}

TEST_CASE("bf16 round-trips every finite bfloat16 exactly and rounds to nearest even") {
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const float f = bf16_to_float(bits);
    if (std::isnan(f)) continue;
    CHECK(float_to_bf16(f) == bits);
  }
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
  CHECK(bf16_to_float(float_to_bf16(1.0f + 1.0f / 256.0f)) == 1.0f);
  CHECK(bf16_to_float(float_to_bf16(1.0f + 3.0f / 256.0f)) == 1.0f + 4.0f / 256.0f);
}

TEST_CASE("f16 rounding of values between halves and out of range") {
  CHECK(f16_to_float(float_to_f16(1.0f + 1.0f / 2048.0f)) == 1.0f);  // tie to even
  CHECK(f16_to_float(float_to_f16(70000.0f)) == INFINITY);
  CHECK(f16_to_float(float_to_f16(65504.0f)) == 65504.0f);
  CHECK(f16_to_float(float_to_f16(1e-8f)) == 0.0f);
}

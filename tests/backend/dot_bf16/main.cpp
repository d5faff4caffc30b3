// test_backend_dot_bf16: the bf16 dot-product GEMM (VDPBF16PS) against the scalar model of
// the instruction's arithmetic, and the product in double. checks.cpp is compiled for
// AVX512_BF16 and entered only on a CPU that has it; elsewhere this program says so and
// exits with 77, which CTest counts as skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "checks.hpp"

TEST_CASE("bf16 dot-product gemm: the instruction's arithmetic bit for bit, every shape") {
  const std::vector<std::string> failures = seqpar::test::dot_bf16_failures();
  for (const auto& f : failures) MESSAGE(f);
  CHECK(failures.empty());
}

int main(int argc, char** argv) {
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bf16")) {
    std::printf("test_backend_dot_bf16: this CPU has no AVX512_BF16: skipped\n");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}

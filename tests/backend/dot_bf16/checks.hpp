#pragma once
// The checks of test_backend_dot_bf16, compiled for AVX512_BF16 in checks.cpp.

#include <string>
#include <vector>

namespace seqpar::test {

/// Runs the bf16 GEMM of Ops<Cpu> (the dot-product path) on every transposition, beta,
/// edge tile, odd depth and K block boundary, against dot_gemm_model bit for bit and the
/// product in double; returns a line for each mismatch (empty: all passed).
std::vector<std::string> dot_bf16_failures();

}  // namespace seqpar::test

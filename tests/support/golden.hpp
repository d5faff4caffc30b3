#pragma once
// Reading the Hugging Face golden files of tests/golden (made by tools/make_golden.py).

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "seqpar/core/batch.hpp"
#include "seqpar/io/safetensors.hpp"

namespace seqpar::test {

inline std::string golden_path(const std::string& name) {
  return std::string(SEQPAR_TEST_DIR) + "/golden/" + name;
}

inline std::vector<float> floats(const SafetensorsFile& f, const std::string& name) {
  const auto& e = f.at(name);
  std::vector<float> v(static_cast<std::size_t>(e.numel()));
  read_tensor<float>(e, v);
  return v;
}

inline std::vector<std::int32_t> ints(const SafetensorsFile& f, const std::string& name) {
  const auto& e = f.at(name);
  REQUIRE(e.dtype == DType::i64);
  std::vector<std::int32_t> v(static_cast<std::size_t>(e.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::int64_t x;
    std::memcpy(&x, e.bytes.data() + i * 8, 8);
    v[i] = static_cast<std::int32_t>(x);
  }
  return v;
}

inline Batch golden_batch(const SafetensorsFile& f) {
  const auto& e = f.at("input_ids");
  Batch b(e.shape[0], e.shape[1]);
  b.input_ids = ints(f, "input_ids");
  b.labels = ints(f, "labels");
  b.attention_mask = ints(f, "attention_mask");
  return b;
}

/// ||a - b|| / ||b|| over whole tensors.
template <class A, class B>
double rel_norm_err(const A& a, const B& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    num += d * d;
    den += static_cast<double>(b[i]) * static_cast<double>(b[i]);
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace seqpar::test

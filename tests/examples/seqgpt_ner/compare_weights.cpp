// compare_weights A B TOLERANCE: two weights files of seqgpt_ner runs (model.safetensors)
// compared tensor by tensor as the plan tests compare weights: the relative L2 error
// |a - b| / |b| of every tensor at most TOLERANCE, and the same tensors in both. Prints the
// worst tensor; exits 1 when they differ (naming why), 2 on a usage error.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "seqpar/core/dtype.hpp"
#include "seqpar/io/safetensors.hpp"

namespace {

std::vector<double> values(const seqpar::TensorEntry& e) {
  std::vector<double> out(static_cast<std::size_t>(e.numel()));
  SEQPAR_CHECK(e.dtype == seqpar::DType::f32, e.file, ": tensor '", e.name, "' is ",
               seqpar::dtype_name(e.dtype), "; expected F32");
  for (std::size_t i = 0; i < out.size(); ++i) {
    float x;
    std::memcpy(&x, e.bytes.data() + i * sizeof(float), sizeof x);
    out[i] = x;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 4) {
    std::fprintf(stderr, "usage: compare_weights A B TOLERANCE\n");
    return 2;
  }
  const seqpar::SafetensorsFile a(argv[1]), b(argv[2]);
  const double tolerance = std::strtod(argv[3], nullptr);
  SEQPAR_CHECK(a.entries().size() == b.entries().size(), argv[1], " has ", a.entries().size(),
               " tensors, ", argv[2], " ", b.entries().size());
  double worst = 0;
  std::string worst_name;
  for (const auto& e : a.entries()) {
    const seqpar::TensorEntry* f = b.find(e.name);
    SEQPAR_CHECK(f != nullptr, argv[2], " has no tensor '", e.name, "'");
    SEQPAR_CHECK(f->shape == e.shape, "tensor '", e.name, "': shapes differ");
    const auto x = values(e), y = values(*f);
    double num = 0, den = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      num += (x[i] - y[i]) * (x[i] - y[i]);
      den += y[i] * y[i];
    }
    const double err = std::sqrt(num / std::max(den, 1e-300));
    if (!(err <= worst)) worst = err, worst_name = e.name;
  }
  std::printf("%zu tensors; the largest relative L2 error %.3g (%s), tolerance %.3g\n",
              a.entries().size(), worst, worst_name.c_str(), tolerance);
  return worst <= tolerance ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "compare_weights: %s\n", e.what());
  return 1;
}

// Compiled with -mavx512f -mavx512bf16: Ops<Cpu>::gemm takes the dot products for bf16.
#include "checks.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "../../support/dot_bf16_model.hpp"
#include "../../support/random.hpp"
#include "seqpar/backend/cpu/ops.hpp"

#if !SEQPAR_CPU_BF16_DOT
#error "checks.cpp must be compiled for AVX512_BF16 (-mavx512f -mavx512bf16)"
#endif
static_assert(seqpar::detail::bf16dot::KC == seqpar::test::kDotBlock,
              "the model sums K in the kernel's blocks");

namespace seqpar::test {
namespace {

using O = Ops<Cpu>;

template <class Out>
void check(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
           float beta, std::vector<std::string>& failures) {
  std::ostringstream what;
  what << (std::is_same_v<Out, float> ? "float" : "bf16") << " C, ta " << ta << " tb " << tb
       << ", M " << M << " N " << N << " K " << K << ", alpha " << alpha << " beta " << beta;
  const std::int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
  auto A = normal_values<Bf16Bits>(static_cast<std::size_t>((ta ? K : M) * lda), 1, 1.0, "dot");
  const auto B =
      normal_values<Bf16Bits>(static_cast<std::size_t>((tb ? N : K) * ldb), 2, 1.0, "dot");
  const auto c0 = normal_values<float>(static_cast<std::size_t>(M * ldc), 3, 1.0, "dot");
  // DAZ and FTZ made visible: row 0 of op(A) subnormal (2^-133), row 1 tiny (2^-70)
  for (std::int64_t k = 0; k < K && M > 2; ++k) {
    (ta ? A[k * lda] : A[k]) = Bf16Bits::from_bits(0x0001);
    (ta ? A[k * lda + 1] : A[lda + k]) = Bf16Bits(0x1p-70f);
  }
  std::vector<Out> C(c0.size()), want(c0.size());
  for (std::size_t i = 0; i < C.size(); ++i) C[i] = want[i] = Out(c0[i]);
  O::gemm(ta, tb, M, N, K, Bf16Bits(alpha), A.data(), lda, B.data(), ldb, Bf16Bits(beta), C.data(),
          ldc);
  dot_gemm_model(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, want.data(), ldc);
  std::int64_t differ = 0, first = -1;
  for (std::size_t i = 0; i < C.size(); ++i)
    if (std::memcmp(&C[i], &want[i], sizeof(Out)) != 0 && differ++ == 0)
      first = static_cast<std::int64_t>(i);
  if (differ > 0) {
    std::ostringstream f;
    f << what.str() << ": " << differ << " elements differ from the model, the first C["
      << first / ldc << ", " << first % ldc << "] = " << static_cast<float>(C[first]) << ", model "
      << static_cast<float>(want[first]);
    failures.push_back(f.str());
  }
  // the product in double (rows 2 and on: the rows DAZ and FTZ zero are the model's business)
  double worst = 0;
  for (std::int64_t i = 2; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      double ref = 0, mag = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        const double p = double((ta ? A[k * lda + i] : A[i * lda + k]).to_float()) *
                         double((tb ? B[j * ldb + k] : B[k * ldb + j]).to_float());
        ref += p;
        mag += std::fabs(p);
      }
      // C's input as the gemm read it: c0 rounded to Out (bf16 C holds c0 to 8 bits)
      const double c_in = static_cast<float>(Out(c0[i * ldc + j]));
      ref = alpha * ref + (beta == 0.0f ? 0.0 : beta * c_in);
      const double unit = std::is_same_v<Out, float> ? 0 : 0x1p-8;
      const double got = static_cast<float>(C[i * ldc + j]);
      worst = std::max(worst, (std::fabs(got - ref) - unit * std::fabs(ref)) /
                                  (std::fabs(alpha) * mag + std::fabs(ref) + 1e-30));
    }
  if (!(worst < 2e-6))
    failures.push_back(what.str() + ": relative error against double " + std::to_string(worst));
}

}  // namespace

std::vector<std::string> dot_bf16_failures() {
  std::vector<std::string> failures;
  // edge tiles (M % 12, N % 32), odd depths, one and several K blocks (1024), row blocks (96),
  // bands (576 rows), whole slivers transposed as they are packed
  const std::int64_t shapes[][3] = {{1, 1, 1},      {5, 7, 3},      {12, 32, 8},    {13, 33, 255},
                                    {100, 70, 257}, {97, 40, 520},  {8, 4100, 40},  {3, 5, 1031},
                                    {600, 9, 300},  {97, 70, 2100}, {600, 40, 1100}};
  for (const auto& s : shapes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (float beta : {0.0f, 1.0f, 0.5f}) {
          check<Bf16Bits>(ta, tb, s[0], s[1], s[2], 0.75f, beta, failures);
          check<float>(ta, tb, s[0], s[1], s[2], 1.0f, beta, failures);
        }
  return failures;
}

}  // namespace seqpar::test

// Layernorm, GELU, embedding, vector ops, sums of squares and AdamW of Ops<Cuda> against
// Ops<Cpu> (in float on the same values), for float, bf16 and fp16 storage.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "cpu_reference.hpp"
#include "cuda_test_util.hpp"

using namespace seqpar;
using namespace seqpar::test;
using O = Ops<Cuda>;

#define SEQPAR_STORAGE_TYPES float, __nv_bfloat16, __half

TEST_CASE_TEMPLATE("layernorm forward and backward match Ops<Cpu>, statistics in float", T,
                   SEQPAR_STORAGE_TYPES) {
  CudaArena arena;
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{37, 1024}, {129, 96}, {5, 7}};
  for (const auto& [n, d] : shapes) {
    CAPTURE(n);
    CAPTURE(d);
    // An offset mean checks the two-pass variance.
    const auto x = random_values<T>(n * d, 30, 1.5, 3.0);
    const auto w = random_values<T>(d, 31, 0.3, 1.0), b = random_values<T>(d, 32, 0.3);
    const auto dy = random_values<T>(n * d, 33);
    auto d_x = to_device<T>(arena, x), d_w = to_device<T>(arena, w), d_b = to_device<T>(arena, b);
    auto d_dy = to_device<T>(arena, dy);

    std::vector<float> y(n * d), mean(n), rstd(n);
    CpuRef::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n,
                              d, 1e-5);
    DeviceBuffer<T> d_y(arena, n * d, Memory::buffers);
    DeviceBuffer<float> d_mean(arena, n, Memory::buffers), d_rstd(arena, n, Memory::buffers);
    O::layernorm_forward(d_y.data(), d_mean.data(), d_rstd.data(), d_x.data(), d_w.data(),
                         d_b.data(), n, d, 1e-5);
    SEQPAR_CHECK_CLOSE(T, to_host(d_y), y);
    CHECK(rel_err(to_host(d_mean), mean) < 1e-5);
    CHECK(rel_err(to_host(d_rstd), rstd) < 1e-5);

    // Gradients accumulate into what is there.
    auto dx = random_values<T>(n * d, 34), dw = random_values<T>(d, 35),
         db = random_values<T>(d, 36);
    auto d_dx = to_device<T>(arena, dx), d_dw = to_device<T>(arena, dw),
         d_db = to_device<T>(arena, db);
    CpuRef::layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), mean.data(),
                               rstd.data(), w.data(), n, d);
    O::layernorm_backward(d_dx.data(), d_dw.data(), d_db.data(), d_dy.data(), d_x.data(),
                          d_mean.data(), d_rstd.data(), d_w.data(), n, d);
    SEQPAR_CHECK_CLOSE(T, to_host(d_dx), dx);
    SEQPAR_CHECK_CLOSE(T, to_host(d_dw), dw);
    SEQPAR_CHECK_CLOSE(T, to_host(d_db), db);
  }
}

TEST_CASE("layernorm keeps mean and rstd in the storage type as Ops<Cpu> does") {
  CudaArena arena;
  const std::int64_t n = 64, d = 256;
  const auto x = random_values<float>(n * d, 37, 2.0, -1.0);
  const auto w = random_values<float>(d, 38, 0.3, 1.0), b = random_values<float>(d, 39, 0.3);
  std::vector<float> y(n * d), mean(n), rstd(n);
  CpuRef::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, d,
                            1e-5);
  auto d_x = to_device<float>(arena, x), d_w = to_device<float>(arena, w),
       d_b = to_device<float>(arena, b);
  DeviceBuffer<float> d_y(arena, n * d, Memory::buffers), d_mean(arena, n, Memory::buffers),
      d_rstd(arena, n, Memory::buffers);
  O::layernorm_forward(d_y.data(), d_mean.data(), d_rstd.data(), d_x.data(), d_w.data(), d_b.data(),
                       n, d, 1e-5);
  CHECK(rel_err(to_host(d_y), y) < 1e-5);
  CHECK(rel_err(to_host(d_mean), mean) < 1e-5);
  CHECK(rel_err(to_host(d_rstd), rstd) < 1e-5);
}

TEST_CASE_TEMPLATE("gelu forward and backward (in place on dy) match Ops<Cpu>", T,
                   SEQPAR_STORAGE_TYPES) {
  CudaArena arena;
  const std::int64_t n = 100003;
  const auto x = random_values<T>(n, 40, 3.0), dy = random_values<T>(n, 41);
  auto d_x = to_device<T>(arena, x), d_dy = to_device<T>(arena, dy);
  std::vector<float> y(n), dx(n);
  CpuRef::gelu_forward(y.data(), x.data(), n);
  CpuRef::gelu_backward(dx.data(), dy.data(), x.data(), n);
  DeviceBuffer<T> d_y(arena, n, Memory::buffers);
  O::gelu_forward(d_y.data(), d_x.data(), n);
  O::gelu_backward(d_dy.data(), d_dy.data(), d_x.data(), n);
  SEQPAR_CHECK_CLOSE(T, to_host(d_y), y);
  SEQPAR_CHECK_CLOSE(T, to_host(d_dy), dx);
}

namespace {
// Token ids over [0, vocab) with heavy repeats: a run of one id, interleaved repeats and
// ids outside the shard [row0, row0 + rows).
std::vector<std::int32_t> skewed_ids(std::int64_t n, std::int64_t vocab, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t id = rng.below(vocab);
    if (i >= 100 && i < 400) id = 17 % vocab;          // a run (a padding id, say)
    if (i % 7 == 3) id = (vocab / 2 + i % 3) % vocab;  // interleaved repeats
    ids[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(id);
  }
  return ids;
}
}  // namespace

TEST_CASE_TEMPLATE(
    "embedding lookup and backward match Ops<Cpu> on a vocab shard with repeated ids", T,
    SEQPAR_STORAGE_TYPES) {
  CudaArena arena;
  struct Case {
    std::int64_t n, d, vocab, row0, rows;
  };
  // A shard of a small table; a table large enough for several rows per block.
  for (const Case& k : {Case{700, 70, 50, 10, 25}, Case{1000, 64, 3000, 0, 3000}}) {
    CAPTURE(k.n);
    CAPTURE(k.rows);
    const auto ids = skewed_ids(k.n, k.vocab, 50);
    const auto table = random_values<T>(k.rows * k.d, 51), dy = random_values<T>(k.n * k.d, 52);
    auto dtable = random_values<T>(k.rows * k.d, 53);
    auto d_ids = to_device_raw(arena, ids);
    auto d_table = to_device<T>(arena, table), d_dy = to_device<T>(arena, dy),
         d_dtable = to_device<T>(arena, dtable);

    std::vector<float> y(k.n * k.d);
    CpuRef::embedding_forward(y.data(), ids.data(), table.data(), k.n, k.d, k.row0, k.rows);
    DeviceBuffer<T> d_y(arena, k.n * k.d, Memory::buffers);
    O::embedding_forward(d_y.data(), d_ids.data(), d_table.data(), k.n, k.d, k.row0, k.rows);
    CHECK(same_bits(to_host(d_y), y));  // a copy: exact

    CpuRef::embedding_backward(dtable.data(), ids.data(), dy.data(), k.n, k.d, k.row0, k.rows);
    O::embedding_backward(d_dtable.data(), d_ids.data(), d_dy.data(), k.n, k.d, k.row0, k.rows);
    const auto got = to_host(d_dtable);
    SEQPAR_CHECK_CLOSE(T, got, dtable);
    // In float the sums run in token order, as on the CPU: the same bits.
    if constexpr (std::is_same_v<T, float>) CHECK(same_bits(got, dtable));
  }
}

TEST_CASE("embedding takes 64-bit ids and its backward gives the same bits twice") {
  CudaArena arena;
  const std::int64_t n = 2000, d = 96, vocab = 500;
  const auto ids32 = skewed_ids(n, vocab, 54);
  const std::vector<std::int64_t> ids(ids32.begin(), ids32.end());
  const auto dy = random_values<float>(n * d, 55);
  auto d_ids = to_device_raw(arena, ids);
  auto d_dy = to_device<float>(arena, dy);
  std::vector<float> ref(vocab * d, 0.0f);
  CpuRef::embedding_backward(ref.data(), ids32.data(), dy.data(), n, d, 0, vocab);
  std::vector<std::vector<float>> runs;
  for (int run = 0; run < 2; ++run) {
    DeviceBuffer<float> dtable(arena, vocab * d, Memory::buffers);
    O::embedding_backward(dtable.data(), d_ids.data(), d_dy.data(), n, d, 0, vocab);
    runs.push_back(to_host(dtable));
  }
  CHECK(same_bits(runs[0], ref));
  CHECK(same_bits(runs[0], runs[1]));
}

TEST_CASE_TEMPLATE("add, scale, copy, fill and convert match their host meaning", T,
                   SEQPAR_STORAGE_TYPES) {
  CudaArena arena;
  const std::int64_t n = 100003;
  auto y = random_values<T>(n, 60);
  const auto x = random_values<T>(n, 61);
  auto d_y = to_device<T>(arena, y), d_x = to_device<T>(arena, x);
  O::add(d_y.data(), d_x.data(), n);
  CpuRef::add(y.data(), x.data(), n);
  SEQPAR_CHECK_CLOSE(T, to_host(d_y), y);
  O::scale(d_y.data(), T(-0.375f), n);
  CpuRef::scale(y.data(), -0.375f, n);
  SEQPAR_CHECK_CLOSE(T, to_host(d_y), y);
  DeviceBuffer<T> d_c(arena, n, Memory::buffers);
  O::copy(d_c.data(), d_x.data(), n);
  CHECK(same_bits(to_host(d_c), x));
  O::fill(d_c.data(), T(2.5f), n);
  CHECK(same_bits(to_host(d_c), std::vector<float>(n, 2.5f)));
  // float -> T -> float rounds once; T -> float is exact.
  const auto f = random_values<float>(n, 62);
  auto d_f = to_device<float>(arena, f);
  O::convert(d_c.data(), d_f.data(), n);
  DeviceBuffer<float> d_back(arena, n, Memory::buffers);
  O::convert(d_back.data(), d_c.data(), n);
  const auto back = to_host(d_back);
  std::vector<float> rounded(n);
  for (std::int64_t i = 0; i < n; ++i) rounded[i] = detail::to_float(detail::from_float<T>(f[i]));
  CHECK(same_bits(back, rounded));
}

TEST_CASE_TEMPLATE("sum_squares matches Ops<Cpu> in double and gives the same bits twice", T,
                   SEQPAR_STORAGE_TYPES) {
  CudaArena arena;
  for (const std::int64_t n : {std::int64_t{5}, std::int64_t{3000001}}) {
    CAPTURE(n);
    const auto x = random_values<T>(n, 70);
    auto d_x = to_device<T>(arena, x);
    const double ref = CpuRef::sum_squares(x.data(), n);
    const double a = O::sum_squares(d_x.data(), n), b = O::sum_squares(d_x.data(), n);
    CHECK(std::abs(a - ref) <= 1e-12 * ref);
    CHECK(a == b);
  }
  // A NaN or an infinity reaches the result (the trainer's overflow check relies on it).
  std::vector<float> bad(1000, 1.0f);
  bad[517] = INFINITY;
  auto d_bad = to_device<T>(arena, bad);
  CHECK(!std::isfinite(O::sum_squares(d_bad.data(), 1000)));
}

namespace {
// n elements in `count` segments of uneven lengths (one of a single element; the last
// takes the rest), valued a, b, a, ...: with count = the capacity, the most one launch takes.
template <class V>
kernels::Segments<V> alternating(std::int64_t n, int count, V a, V b) {
  kernels::Segments<V> s;
  for (int k = 0; k + 1 < count; ++k) s.append(1 + (k * 37) % 97, k % 2 ? b : a);
  REQUIRE(s.size() < n);
  s.append(n - s.size(), count % 2 ? a : b);
  REQUIRE(s.count == count);
  return s;
}
}  // namespace

TEST_CASE_TEMPLATE("sum_squares_accumulate weights each segment and adds to the device total", T,
                   SEQPAR_STORAGE_TYPES) {
  CudaArena arena;
  const std::int64_t n = 3000001;
  const auto x = random_values<T>(n, 71);
  auto d_x = to_device<T>(arena, x);
  const auto weight = alternating(n, kernels::Segments<double>::capacity, 1.0, 0.25);
  double ref = 7.0;                         // what the total held before
  for (int k = 0; k < weight.count; ++k) {  // segment by segment, each with its weight
    const std::int64_t b = weight.begin(k);
    ref += weight.value[k] * CpuRef::sum_squares(x.data() + b, weight.end[k] - b);
  }
  double cpu = 7.0;
  CpuRef::sum_squares_accumulate(&cpu, x.data(), weight);
  CHECK(std::abs(cpu - ref) <= 1e-12 * ref);
  for (int run = 0; run < 2; ++run) {
    DeviceBuffer<double> d_acc(arena, 1, Memory::buffers);
    const double start = 7.0;
    O::upload(d_acc.data(), &start, 1);
    O::sum_squares_accumulate(d_acc.data(), d_x.data(), weight);
    double got = 0;
    O::download(&got, d_acc.data(), 1);
    CAPTURE(run);
    CHECK(std::abs(got - ref) <= 1e-12 * ref);
  }
}

namespace {
// A weight decay of 20 (lr x decay = 2 % a step) so that a wrong decay flag moves a weight
// past even the fp16 and bf16 tolerances in three steps.
kernels::AdamCoeffs coeffs(std::int64_t t) {
  const double lr = 1e-3, b1 = 0.9, b2 = 0.999;
  return {static_cast<float>(lr),
          static_cast<float>(b1),
          static_cast<float>(b2),
          1e-8f,
          20.0f,
          static_cast<float>(lr / (1.0 - std::pow(b1, static_cast<double>(t)))),
          static_cast<float>(std::sqrt(1.0 - std::pow(b2, static_cast<double>(t))))};
}

// Ops<Cpu>::adamw one segment at a time, each as a range of one flag.
void reference_adamw(std::vector<float>& p, const std::vector<float>& g, std::vector<float>& m,
                     std::vector<float>& v, const kernels::Segments<bool>& decay,
                     const kernels::AdamCoeffs& c) {
  for (int k = 0; k < decay.count; ++k) {
    const std::int64_t b = decay.begin(k);
    CpuRef::adamw(p.data() + b, g.data() + b, m.data() + b, v.data() + b,
                  kernels::Segments<bool>::uniform(decay.end[k] - b, decay.value[k]), c);
  }
}
}  // namespace

TEST_CASE_TEMPLATE(
    "adamw matches Ops<Cpu>::adamw segment by segment over three steps: all decayed, none, and "
    "32 alternating segments in one launch",
    T, SEQPAR_STORAGE_TYPES) {
  CudaArena arena;
  const std::int64_t n = 5003;
  for (const auto& decay :
       {kernels::Segments<bool>::uniform(n, true), kernels::Segments<bool>::uniform(n, false),
        alternating(n, kernels::Segments<bool>::capacity, true, false)}) {
    CAPTURE(decay.count);
    CAPTURE(decay.value[0]);
    auto p = random_values<T>(n, 80), m = std::vector<float>(n, 0.0f),
         v = std::vector<float>(n, 0.0f);
    auto d_p = to_device<T>(arena, p), d_m = to_device<T>(arena, m), d_v = to_device<T>(arena, v);
    for (std::int64_t t = 1; t <= 3; ++t) {
      const auto g = random_values<T>(n, 81 + static_cast<std::uint64_t>(t));
      auto d_g = to_device<T>(arena, g);
      const auto c = coeffs(t);
      reference_adamw(p, g, m, v, decay, c);
      O::adamw(d_p.data(), d_g.data(), d_m.data(), d_v.data(), decay, c);
    }
    SEQPAR_CHECK_CLOSE(T, to_host(d_p), p);
    SEQPAR_CHECK_CLOSE(T, to_host(d_m), m);
    SEQPAR_CHECK_CLOSE(T, to_host(d_v), v);
  }
}

TEST_CASE_TEMPLATE(
    "adamw_mixed updates fp32 master weights from a 16-bit gradient and rounds the copy, 32 "
    "segments of alternating decay in one launch",
    T, SEQPAR_STORAGE_TYPES) {
  CudaArena arena;
  const std::int64_t n = 4099;
  const float grad_factor = 0.5f;  // 1 / loss scale
  const auto decay = alternating(n, kernels::Segments<bool>::capacity, false, true);
  auto master = random_values<float>(n, 90), m = std::vector<float>(n, 0.0f),
       v = std::vector<float>(n, 0.0f);
  auto d_master = to_device<float>(arena, master), d_m = to_device<float>(arena, m),
       d_v = to_device<float>(arena, v);
  DeviceBuffer<T> d_w(arena, n, Memory::buffers);
  for (std::int64_t t = 1; t <= 3; ++t) {
    const auto g = random_values<T>(n, 91 + static_cast<std::uint64_t>(t), 2.0);
    std::vector<float> g_unscaled(g);
    for (auto& e : g_unscaled) e *= grad_factor;
    auto d_g = to_device<T>(arena, g);
    const auto c = coeffs(t);
    reference_adamw(master, g_unscaled, m, v, decay, c);
    O::adamw_mixed(d_master.data(), d_w.data(), d_g.data(), d_m.data(), d_v.data(), decay, c,
                   grad_factor);
  }
  CHECK(rel_err(to_host(d_master), master) < 1e-6);
  CHECK(rel_err(to_host(d_m), m) < 1e-6);
  CHECK(rel_err(to_host(d_v), v) < 1e-6);
  std::vector<float> copy(n);
  for (std::int64_t i = 0; i < n; ++i) copy[i] = detail::to_float(detail::from_float<T>(master[i]));
  SEQPAR_CHECK_CLOSE(T, to_host(d_w), copy);
}

// The host AdamW of offloaded optimizer state: every path this CPU runs (scalar, AVX2,
// AVX-512) and any thread count give the bits of the CPU backend's AdamW, over odd
// lengths, tails shorter than a vector and ranges cut into decay segments.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "seqpar/backend/cpu/ops.hpp"
#include "seqpar/core/rng.hpp"
#include "seqpar/optim/adamw.hpp"
#include "seqpar/optim/host_adamw.hpp"

using namespace seqpar;

namespace {
struct State {
  std::vector<float> p, g, m, v;
};

// n elements of weights, gradients and moments as after some steps (v >= 0), some zero.
State random_state(std::int64_t n, std::uint64_t seed) {
  const CounterRng rng(seed, "host-adamw");
  State s;
  const auto u = [&](std::size_t i, int k) {
    return static_cast<float>(rng.bits(i, k) % 2000001) / 1e6f - 1.0f;
  };
  for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i) {
    s.p.push_back(u(i, 0));
    s.g.push_back(i % 13 == 0 ? 0.0f : 0.05f * u(i, 1));
    s.m.push_back(0.01f * u(i, 2));
    s.v.push_back(i % 7 == 0 ? 0.0f : 1e-4f * std::fabs(u(i, 3)));
  }
  return s;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Decay flags alternating over segments of the given lengths.
kernels::Segments<bool> segments(const std::vector<std::int64_t>& lengths) {
  kernels::Segments<bool> s;
  bool d = true;
  for (const auto n : lengths) {
    s.append(n, d);
    d = !d;
  }
  return s;
}

const kernels::AdamCoeffs kCoeffs = adam_coeffs({0.9, 0.999, 1e-8, 0.1}, 3e-3, 3);
}  // namespace

TEST_CASE(
    "host AdamW: every available path equals the scalar path and the CPU backend, bit for bit") {
  for (const std::vector<std::int64_t>& lengths : {std::vector<std::int64_t>{1},
                                                   {7},
                                                   {8, 9},
                                                   {15, 1, 17},
                                                   {4096 * 3 + 5},
                                                   {33, 4096, 4095, 31, 2}}) {
    const auto decay = segments(lengths);
    const std::int64_t n = decay.size();
    CAPTURE(n);
    const State start = random_state(n, static_cast<std::uint64_t>(n));
    // The CPU backend's AdamW (Ops<Cpu>: eight lanes where the build has AVX2, a scalar tail).
    State backend = start;
    Ops<Cpu>::adamw(backend.p.data(), backend.g.data(), backend.m.data(), backend.v.data(), decay,
                    kCoeffs);
    CHECK_FALSE(same_bits(backend.p, start.p));
    for (const HostIsa isa : {HostIsa::scalar, HostIsa::avx2, HostIsa::avx512}) {
      if (!host_isa_available(isa)) {
        MESSAGE("skipped: this CPU has no ", isa_name(isa));
        continue;
      }
      for (const int threads : {1, 2}) {
        CAPTURE(isa_name(isa));
        CAPTURE(threads);
        State s = start;
        host_adamw(s.p.data(), s.g.data(), s.m.data(), s.v.data(), decay, kCoeffs, 1.0f, isa,
                   threads);
        CHECK(same_bits(s.p, backend.p));
        CHECK(same_bits(s.m, backend.m));
        CHECK(same_bits(s.v, backend.v));
      }
    }
  }
}

TEST_CASE("host AdamW: a gradient factor is the gradients scaled first, on every path") {
  const auto decay = segments({21, 100});
  const State start = random_state(decay.size(), 9);
  State scaled = start;
  for (auto& x : scaled.g) x *= 0.25f;
  host_adamw(scaled.p.data(), scaled.g.data(), scaled.m.data(), scaled.v.data(), decay, kCoeffs,
             1.0f, HostIsa::scalar);
  for (const HostIsa isa : {HostIsa::scalar, HostIsa::avx2, HostIsa::avx512}) {
    if (!host_isa_available(isa)) continue;
    CAPTURE(isa_name(isa));
    State s = start;
    host_adamw(s.p.data(), s.g.data(), s.m.data(), s.v.data(), decay, kCoeffs, 0.25f, isa);
    CHECK(same_bits(s.p, scaled.p));
    CHECK(same_bits(s.v, scaled.v));
  }
}

TEST_CASE("host AdamW in double follows torch.optim.AdamW's formula") {
  std::vector<double> p = {1, -2, 3}, g = {0.1, -0.2, 0.3}, m(3), v(3);
  const auto c = adam_coeffs({0.9, 0.999, 1e-8, 0.5}, 0.01, 1);
  host_adamw(p.data(), g.data(), m.data(), v.data(), kernels::Segments<bool>::uniform(3, true), c);
  // Step 1: m = 0.1 g, v = 0.001 g^2, so the step is lr sign(g) (up to eps and rounding).
  CHECK(p[0] == doctest::Approx(1 * (1 - 0.005) - 0.01).epsilon(1e-6));
  CHECK(p[1] == doctest::Approx(-2 * (1 - 0.005) + 0.01).epsilon(1e-6));
}

TEST_CASE("host AdamW refuses a path this CPU does not have") {
  for (const HostIsa isa : {HostIsa::avx2, HostIsa::avx512}) {
    if (host_isa_available(isa)) continue;
    std::vector<float> x(8);
    CHECK_THROWS_WITH_AS(host_adamw(x.data(), x.data(), x.data(), x.data(),
                                    kernels::Segments<bool>::uniform(8, false), kCoeffs, 1.0f, isa),
                         doctest::Contains("this CPU has no"), Error);
  }
}

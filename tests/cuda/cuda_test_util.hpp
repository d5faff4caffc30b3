#pragma once
// Helpers of the CUDA tests: seeded random inputs rounded through the storage type (so
// the CPU reference sees exactly the values the GPU does), device buffers from a device
// arena, and the relative error ||out - ref|| / ||ref||, infinite when out holds a NaN or
// an infinity.

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "seqpar/backend/cuda/ops.hpp"
#include "seqpar/core/arena.hpp"

namespace seqpar::test {

using CudaArena = DeviceArena<Cuda>;
template <class T>
using DeviceBuffer = Buffer<T, CudaArena>;

template <class T>
const char* type_name() {
  if constexpr (std::is_same_v<T, float>) return "float";
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return "bf16";
  if constexpr (std::is_same_v<T, __half>) return "fp16";
}

/// Largest ||out - ref|| / ||ref|| accepted: fp32 far under 1e-3; 16-bit storage rounds
/// every stored value (bf16: 8 bits of mantissa, fp16: 11).
template <class T>
double tolerance() {
  if constexpr (std::is_same_v<T, float>) return 1e-5;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return 1e-2;
  if constexpr (std::is_same_v<T, __half>) return 5e-3;
}

// splitmix64: the same numbers everywhere, no dependence on the standard library's
// distributions.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double normal() {
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  std::int64_t below(std::int64_t n) {
    return static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(n));
  }

 private:
  std::uint64_t state_;
};

/// n values mean + std * N(0, 1), rounded through T.
template <class T>
std::vector<float> random_values(std::size_t n, std::uint64_t seed, double std_dev = 1.0,
                                 double mean = 0.0) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v)
    x = detail::to_float(detail::from_float<T>(static_cast<float>(mean + std_dev * rng.normal())));
  return v;
}

/// A device buffer holding `host` converted to T.
template <class T>
DeviceBuffer<T> to_device(CudaArena& arena, const std::vector<float>& host) {
  DeviceBuffer<T> b(arena, host.size(), Memory::buffers);
  std::vector<T> converted(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) converted[i] = detail::from_float<T>(host[i]);
  Ops<Cuda>::upload(b.data(), converted.data(), static_cast<std::int64_t>(host.size()));
  return b;
}

/// A device buffer holding exactly `host` (ids, masks).
template <class U>
DeviceBuffer<U> to_device_raw(CudaArena& arena, const std::vector<U>& host) {
  DeviceBuffer<U> b(arena, host.size(), Memory::buffers);
  Ops<Cuda>::upload(b.data(), host.data(), static_cast<std::int64_t>(host.size()));
  return b;
}

/// The device values as floats (waits for the stream).
template <class T>
std::vector<float> to_host(const DeviceBuffer<T>& b) {
  std::vector<T> raw(b.size());
  Ops<Cuda>::download(raw.data(), b.data(), static_cast<std::int64_t>(b.size()));
  std::vector<float> out(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) out[i] = detail::to_float(raw[i]);
  return out;
}

/// ||out - ref|| / ||ref|| in double; +inf when out has a NaN or an infinity, or when the
/// sizes differ. A zero reference gives ||out||.
inline double rel_err(const std::vector<float>& out, const std::vector<float>& ref) {
  if (out.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double num = 0, den = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i]) || !std::isfinite(ref[i]))
      return std::numeric_limits<double>::infinity();
    const double d = static_cast<double>(out[i]) - static_cast<double>(ref[i]);
    num += d * d;
    den += static_cast<double>(ref[i]) * static_cast<double>(ref[i]);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

/// Bitwise equality of two float vectors (NaNs never equal).
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i]) || std::signbit(a[i]) != std::signbit(b[i])) return false;
  return true;
}

}  // namespace seqpar::test

// Checks rel_err(out, ref) against T's tolerance, printing both.
#define SEQPAR_CHECK_CLOSE(T, out, ref)                                                      \
  do {                                                                                       \
    const double seqpar_err_ = ::seqpar::test::rel_err(out, ref);                            \
    INFO(#out " vs " #ref " (", ::seqpar::test::type_name<T>(), "): rel err ", seqpar_err_); \
    CHECK(seqpar_err_ < ::seqpar::test::tolerance<T>());                                     \
  } while (0)

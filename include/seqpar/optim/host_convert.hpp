#pragma once
// host_widen / host_narrow: an offloaded 16-bit model's gradients and weights cross PCIe at
// 2 bytes, converted on the host exactly as the CUDA backend converts (core/dtype.hpp), so the
// device weights are those the device's own AdamW would have written.

#include <bit>
#include <cstdint>
#include <type_traits>

#include "seqpar/core/dtype.hpp"
#include "seqpar/optim/host_adamw.hpp"

namespace seqpar::inline v0 {

namespace detail::host_convert {

template <class H>
inline std::uint16_t bits_of(H x) {
  static_assert(sizeof(H) == 2 && std::is_trivially_copyable_v<H>,
                "host_widen/host_narrow: a 16-bit storage type");
  return std::bit_cast<std::uint16_t>(x);
}

}  // namespace detail::host_convert

/// y[0, n) = x[0, n) widened to float exactly, as the device widens dtype `dt` (bf16 or
/// f16). `threads`: OpenMP threads (0: OpenMP's default).
template <class H>
void host_widen(float* y, const H* x, std::int64_t n, DType dt, int threads = 0) {
  SEQPAR_CHECK(dt == DType::bf16 || dt == DType::f16, "host_widen: dtype ", dtype_name(dt),
               "; expected BF16 or F16");
  using detail::host_convert::bits_of;
  detail::host_adam::for_blocks(n, threads, [&](std::int64_t i0, std::int64_t i1) {
    if (dt == DType::bf16)
      for (std::int64_t i = i0; i < i1; ++i) y[i] = device_bf16_to_float(bits_of(x[i]));
    else
      for (std::int64_t i = i0; i < i1; ++i) y[i] = device_f16_to_float(bits_of(x[i]));
  });
}

/// y[0, n) = x[0, n) narrowed to dtype `dt` (bf16 or f16) as the device rounds.
template <class H>
void host_narrow(H* y, const float* x, std::int64_t n, DType dt, int threads = 0) {
  static_assert(sizeof(H) == 2 && std::is_trivially_copyable_v<H>,
                "host_narrow: a 16-bit storage type");
  SEQPAR_CHECK(dt == DType::bf16 || dt == DType::f16, "host_narrow: dtype ", dtype_name(dt),
               "; expected BF16 or F16");
  detail::host_adam::for_blocks(n, threads, [&](std::int64_t i0, std::int64_t i1) {
    if (dt == DType::bf16)
      for (std::int64_t i = i0; i < i1; ++i) y[i] = std::bit_cast<H>(device_float_to_bf16(x[i]));
    else
      for (std::int64_t i = i0; i < i1; ++i) y[i] = std::bit_cast<H>(device_float_to_f16(x[i]));
  });
}

}  // namespace seqpar::inline v0

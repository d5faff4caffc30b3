// Causal ALiBi attention of Ops<Cuda> against Ops<Cpu> (in float on the same values):
// probabilities, context and the qkv gradient, with left padding, a masked key in the
// middle of a row, a row with no valid key at all, both loop orders of the per-head
// GEMMs, and positions/slopes in the storage type or in float; attention_probs makes the
// forward's probabilities again bit for bit.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "cpu_reference.hpp"
#include "cuda_test_util.hpp"
#include "seqpar/backend/kernels.hpp"

using namespace seqpar;
using namespace seqpar::test;
using O = Ops<Cuda>;

namespace {

struct Shape {
  std::int64_t B, Tn, nh, hd;
};

// Row 0 fully valid; row 1 left-padded by 5 with key 20 masked; row 2 (if any) all padding.
void make_mask(const Shape& s, std::vector<float>& pos, std::vector<std::uint8_t>& valid) {
  pos.assign(static_cast<std::size_t>(s.B * s.Tn), 0.0f);
  valid.assign(static_cast<std::size_t>(s.B * s.Tn), 1);
  for (std::int64_t b = 0; b < s.B; ++b) {
    for (std::int64_t t = 0; t < s.Tn; ++t) {
      const auto i = static_cast<std::size_t>(b * s.Tn + t);
      if (b % 3 == 1 && (t < 5 || t == 20)) valid[i] = 0;
      if (b % 3 == 2) valid[i] = 0;
    }
    std::int64_t seen = 0;
    for (std::int64_t t = 0; t < s.Tn; ++t) {
      const auto i = static_cast<std::size_t>(b * s.Tn + t);
      seen += valid[i];
      pos[i] = valid[i] ? static_cast<float>(seen - 1) : 0.0f;
    }
  }
}

// Runs both backends and compares; S is the type of pos and slopes on the device.
template <class T, class S>
void check_attention(const Shape& s, std::uint64_t seed) {
  CAPTURE(s.B);
  CAPTURE(s.Tn);
  CAPTURE(s.nh);
  CAPTURE(s.hd);
  CudaArena arena;
  const std::int64_t N = s.B * s.Tn, Hl = s.nh * s.hd, TT = s.Tn * s.Tn;
  std::vector<float> pos;
  std::vector<std::uint8_t> valid;
  make_mask(s, pos, valid);
  std::vector<float> slopes(static_cast<std::size_t>(s.nh));
  for (std::int64_t h = 0; h < s.nh; ++h)
    slopes[static_cast<std::size_t>(h)] =
        detail::to_float(detail::from_float<S>(static_cast<float>(kernels::alibi_slope(h, s.nh))));
  for (auto& p : pos) p = detail::to_float(detail::from_float<S>(p));
  const auto qkv = random_values<T>(N * 3 * Hl, seed);
  const auto dctx = random_values<T>(N * Hl, seed + 1);

  std::vector<float> ctx(N * Hl), probs(s.B * s.nh * TT), dqkv(N * 3 * Hl),
      scratch(s.B * s.nh * TT);
  CpuRef::attention_forward(ctx.data(), probs.data(), qkv.data(), pos.data(), valid.data(),
                            slopes.data(), s.B, s.Tn, s.nh, s.hd);
  CpuRef::attention_backward(dqkv.data(), dctx.data(), qkv.data(), probs.data(), valid.data(),
                             scratch.data(), s.B, s.Tn, s.nh, s.hd);

  auto d_qkv = to_device<T>(arena, qkv), d_dctx = to_device<T>(arena, dctx);
  auto d_pos = to_device<S>(arena, pos), d_slopes = to_device<S>(arena, slopes);
  auto d_valid = to_device_raw(arena, valid);
  DeviceBuffer<T> d_ctx(arena, N * Hl, Memory::buffers),
      d_probs(arena, s.B * s.nh * TT, Memory::buffers);
  DeviceBuffer<T> d_dqkv(arena, N * 3 * Hl, Memory::buffers),
      d_scratch(arena, s.B * s.nh * TT, Memory::buffers);
  // dqkv is overwritten whole: start from garbage.
  O::fill(d_dqkv.data(), detail::from_float<T>(123.0f), N * 3 * Hl);
  O::attention_forward(d_ctx.data(), d_probs.data(), d_qkv.data(), d_pos.data(), d_valid.data(),
                       d_slopes.data(), s.B, s.Tn, s.nh, s.hd);
  O::attention_backward(d_dqkv.data(), d_dctx.data(), d_qkv.data(), d_probs.data(), d_valid.data(),
                        d_scratch.data(), s.B, s.Tn, s.nh, s.hd);
  SEQPAR_CHECK_CLOSE(T, to_host(d_probs), probs);
  SEQPAR_CHECK_CLOSE(T, to_host(d_ctx), ctx);
  SEQPAR_CHECK_CLOSE(T, to_host(d_dqkv), dqkv);
  // A backward that recomputes the probabilities relies on the same calls giving the same
  // bits: make them again, into memory that held something else.
  DeviceBuffer<T> d_remade(arena, s.B * s.nh * TT, Memory::buffers);
  O::fill(d_remade.data(), detail::from_float<T>(123.0f), s.B * s.nh * TT);
  O::attention_probs(d_remade.data(), d_qkv.data(), d_pos.data(), d_valid.data(), d_slopes.data(),
                     s.B, s.Tn, s.nh, s.hd);
  CHECK(to_host(d_remade) == to_host(d_probs));
}

}  // namespace

TEST_CASE_TEMPLATE("attention forward and backward match Ops<Cpu>", T, float, __nv_bfloat16,
                   __half) {
  // B <= nh: one batched GEMM per sequence; B > nh: one per head. hd 64 as in BLOOM.
  for (const Shape& s : {Shape{2, 37, 3, 16}, Shape{5, 33, 2, 8}, Shape{3, 128, 4, 64}}) {
    check_attention<T, float>(s, 100);
    check_attention<T, T>(s, 200);
  }
}

TEST_CASE("attention on a SeqGPT-sized head block matches Ops<Cpu> in bf16") {
  check_attention<__nv_bfloat16, float>(Shape{1, 512, 2, 64}, 300);
}

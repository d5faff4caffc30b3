// Fused attention of Ops<Cuda> against Ops<Cpu> on the same random inputs: the context
// against the standard CPU attention, the log-sum-exp against the CPU fused forward, and
// dqkv against the standard CPU backward, in float, bf16 and fp16 storage. Rows are fully
// valid, left-padded past a 32-key tile with a masked key inside, or all padding; T is not
// a multiple of 32; the heads are a tensor rank's share (slopes from head0). Two runs give
// the same bits (no atomics).
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

struct FlashShape {
  std::int64_t B, Tn, nh, hd;
};

// Row b % 3 == 0 fully valid; == 1 left-padded by 40 with key 50 masked; == 2 all padding.
void make_flash_mask(const FlashShape& s, std::vector<float>& pos,
                     std::vector<std::uint8_t>& valid) {
  pos.assign(static_cast<std::size_t>(s.B * s.Tn), 0.0f);
  valid.assign(static_cast<std::size_t>(s.B * s.Tn), 1);
  for (std::int64_t b = 0; b < s.B; ++b) {
    std::int64_t seen = 0;
    for (std::int64_t t = 0; t < s.Tn; ++t) {
      const auto i = static_cast<std::size_t>(b * s.Tn + t);
      if ((b % 3 == 1 && (t < 40 || t == 50)) || b % 3 == 2) valid[i] = 0;
      seen += valid[i];
      pos[i] = valid[i] ? static_cast<float>(seen - 1) : 0.0f;
    }
  }
}

template <class T>
void check_flash(const FlashShape& s, std::int64_t head0, std::uint64_t seed) {
  CAPTURE(s.B);
  CAPTURE(s.Tn);
  CAPTURE(s.nh);
  CAPTURE(s.hd);
  CudaArena arena;
  const std::int64_t N = s.B * s.Tn, Hl = s.nh * s.hd, rows = s.B * s.nh * s.Tn;
  std::vector<float> pos;
  std::vector<std::uint8_t> valid;
  make_flash_mask(s, pos, valid);
  std::vector<float> slopes(static_cast<std::size_t>(s.nh));
  for (std::int64_t h = 0; h < s.nh; ++h)
    slopes[static_cast<std::size_t>(h)] =
        static_cast<float>(kernels::alibi_slope(head0 + h, head0 + s.nh));
  const auto qkv = random_values<T>(N * 3 * Hl, seed);
  const auto dctx = random_values<T>(N * Hl, seed + 1);

  // References: the standard CPU ops (ctx, dqkv) and the CPU fused forward (lse).
  std::vector<float> ctx(N * Hl), probs(s.B * s.nh * s.Tn * s.Tn), dqkv(N * 3 * Hl),
      scratch(probs.size()), ctx_fused(N * Hl), lse(rows);
  CpuRef::attention_forward(ctx.data(), probs.data(), qkv.data(), pos.data(), valid.data(),
                            slopes.data(), s.B, s.Tn, s.nh, s.hd);
  CpuRef::attention_backward(dqkv.data(), dctx.data(), qkv.data(), probs.data(), valid.data(),
                             scratch.data(), s.B, s.Tn, s.nh, s.hd);
  CpuRef::flash_attention_forward(ctx_fused.data(), lse.data(), qkv.data(), pos.data(),
                                  valid.data(), slopes.data(), s.B, s.Tn, s.nh, s.hd);

  auto d_qkv = to_device<T>(arena, qkv), d_dctx = to_device<T>(arena, dctx);
  auto d_pos = to_device<float>(arena, pos), d_slopes = to_device<float>(arena, slopes);
  auto d_valid = to_device_raw(arena, valid);
  DeviceBuffer<T> d_ctx(arena, N * Hl, Memory::buffers), d_dqkv(arena, N * 3 * Hl, Memory::buffers);
  DeviceBuffer<float> d_lse(arena, rows, Memory::buffers), d_delta(arena, rows, Memory::buffers);
  // Every output is written whole: start from garbage.
  O::fill(d_ctx.data(), detail::from_float<T>(123.0f), N * Hl);
  O::fill(d_dqkv.data(), detail::from_float<T>(123.0f), N * 3 * Hl);
  O::fill(d_lse.data(), 123.0f, rows);
  O::flash_attention_forward(d_ctx.data(), d_lse.data(), d_qkv.data(), d_pos.data(), d_valid.data(),
                             d_slopes.data(), s.B, s.Tn, s.nh, s.hd);
  // The backward takes the context the device made (as a block does).
  O::flash_attention_backward(d_dqkv.data(), d_dctx.data(), d_ctx.data(), d_qkv.data(),
                              d_lse.data(), d_pos.data(), d_valid.data(), d_slopes.data(),
                              d_delta.data(), s.B, s.Tn, s.nh, s.hd);
  SEQPAR_CHECK_CLOSE(T, to_host(d_ctx), ctx);
  SEQPAR_CHECK_CLOSE(float, to_host(d_lse), lse);  // float whatever the storage
  SEQPAR_CHECK_CLOSE(T, to_host(d_dqkv), dqkv);
  // The same inputs, the same bits.
  DeviceBuffer<T> d_again(arena, N * 3 * Hl, Memory::buffers);
  O::flash_attention_backward(d_again.data(), d_dctx.data(), d_ctx.data(), d_qkv.data(),
                              d_lse.data(), d_pos.data(), d_valid.data(), d_slopes.data(),
                              d_delta.data(), s.B, s.Tn, s.nh, s.hd);
  CHECK(same_bits(to_host(d_again), to_host(d_dqkv)));
}

}  // namespace

TEST_CASE_TEMPLATE("fused attention forward and backward match Ops<Cpu>", T, float, __nv_bfloat16,
                   __half) {
  for (const FlashShape& s :
       {FlashShape{3, 77, 3, 16}, FlashShape{3, 130, 2, 64}, FlashShape{2, 45, 2, 128}}) {
    check_flash<T>(s, 0, 500);
    check_flash<T>(s, s.nh, 600);  // the second tensor rank's heads
  }
}

TEST_CASE("fused attention on a SeqGPT-sized head block matches Ops<Cpu> in bf16") {
  check_flash<__nv_bfloat16>(FlashShape{2, 512, 2, 64}, 0, 700);
}

TEST_CASE("fused attention refuses a head_dim above 128") {
  CudaArena arena;
  DeviceBuffer<float> buf(arena, 3 * 129, Memory::buffers), lse(arena, 1, Memory::buffers);
  DeviceBuffer<std::uint8_t> valid(arena, 1, Memory::buffers);
  CHECK_THROWS_WITH_AS(O::flash_attention_forward(buf.data(), lse.data(), buf.data(), lse.data(),
                                                  valid.data(), lse.data(), 1, 1, 1, 129),
                       doctest::Contains("head_dim 129"), Error);
}

// Offload on the GPU: the host AdamW (compiled here without -march: its vector paths are
// picked at run time) gives the bits of the CUDA AdamW kernel, and a Trainer<Cuda> with
// its optimizer state (and ZeRO-3 parameters) in pinned host memory gives the bits of the
// same trainer without offload, for fp32, bf16 and fp16 models (16-bit ones crossing PCIe
// at 2 bytes, widened and narrowed on the host), with gradient accumulation, with the
// arena's books showing where the state went; the host's 16-bit conversions are the
// device's convert kernel bit for bit; and the copy stream's events order a download
// after the work before it.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "cpu_reference.hpp"
#include "cuda_test_util.hpp"
#include "seqpar/backend/cuda/ops.hpp"
#include "seqpar/optim/host_adamw.hpp"
#include "seqpar/optim/host_convert.hpp"
#include "seqpar/train/trainer.hpp"
#include "trainer_reference.hpp"

using namespace seqpar;
using namespace seqpar::test;

namespace {

template <class TrainerT>
std::map<std::string, std::vector<float>> offload_weights(TrainerT& t) {
  std::map<std::string, std::vector<float>> w;
  t.for_each_param([&](const ParamSpec& p, auto* v, auto*) {
    auto& out = w[p.name];
    for (std::int64_t i = 0; i < p.numel(); ++i) out.push_back(static_cast<float>(v[i]));
  });
  return w;
}

struct OffloadRun {
  std::vector<double> losses, norms;
  std::map<std::string, std::vector<float>> weights;
  MemoryStats memory;
};

template <class Plan, class Prec>
OffloadRun offload_run(Offload off, std::int64_t micro_batch_rows = 2) {
  auto o = trainer_options();
  o.offload = off;
  o.micro_batch_rows = micro_batch_rows;
  Trainer<TrainTiny, Plan, Cuda, Prec> t(o);
  OffloadRun r;
  for (int s = 0; s < 3; ++s) {
    const auto st = t.step(trainer_batch(s));
    r.losses.push_back(st.loss);
    r.norms.push_back(st.grad_norm);
  }
  r.weights = offload_weights(t);
  r.memory = t.memory();
  return r;
}

template <class Plan, class Prec>
void check_offload_bits(Offload off, std::int64_t micro_batch_rows = 2) {
  const auto dev = offload_run<Plan, Prec>(Offload::none, micro_batch_rows);
  const auto host = offload_run<Plan, Prec>(off, micro_batch_rows);
  CHECK(host.losses == dev.losses);
  CHECK(host.norms == dev.norms);
  CHECK(host.weights == dev.weights);
  CHECK(dev.memory.current_of(Memory::host_optimizer) == 0);
  CHECK(host.memory.current_of(Memory::optimizer) == 0);
  // fp32 master weights, m and v of every element (one rank: the whole padded model).
  CHECK(host.memory.current_of(Memory::host_optimizer) ==
        dev.memory.current_of(Memory::optimizer) * 12 / (std::is_same_v<Prec, Fp32> ? 8 : 12));
  if (off == Offload::optimizer_and_params) {
    CHECK(host.memory.current_of(Memory::parameters) == 0);
    CHECK(host.memory.current_of(Memory::host_parameters) ==
          dev.memory.current_of(Memory::parameters));
  }
}

// Floats whose narrowing exercises every class: each 16-bit pattern's value (both signs),
// the midpoints between neighbours (ties) and the floats beside them, float subnormals,
// infinities, NaNs with payloads, random patterns.
std::vector<float> narrowing_inputs(DType dt) {
  std::vector<float> xs;
  const auto value = [&](std::uint16_t b) {
    return dt == DType::bf16 ? bf16_to_float(b) : f16_to_float(b);
  };
  const std::uint16_t inf = dt == DType::bf16 ? 0x7f80 : 0x7c00;
  for (std::uint32_t b = 0; b + 1 < inf; ++b) {
    const float v = value(static_cast<std::uint16_t>(b)),
                next = value(static_cast<std::uint16_t>(b + 1));
    const auto mid = static_cast<float>((static_cast<double>(v) + next) / 2);
    for (const float x : {v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
      xs.push_back(x);
      xs.push_back(-x);
    }
  }
  for (std::uint32_t b = 1; b < 64; ++b) xs.push_back(std::bit_cast<float>(b));
  for (const std::uint32_t u : {0x7f800000u, 0xff800000u, 0x7f7fffffu, 0x477ff000u, 0x477fefffu,
                                0x7fc00000u, 0xffc12345u, 0x7f800001u})
    xs.push_back(std::bit_cast<float>(u));
  Rng rng(5);
  for (int i = 0; i < 100000; ++i)
    xs.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng.next())));
  return xs;
}

template <class H>
void check_host_conversions() {
  constexpr DType dt = StorageDType<H>::value;
  CAPTURE(dtype_name(dt));
  CudaArena arena;
  // narrowing: host_narrow against Ops<Cuda>::convert (the kernel the device's AdamW and
  // weight copies round with)
  const auto xs = narrowing_inputs(dt);
  const auto n = static_cast<std::int64_t>(xs.size());
  auto dx = to_device_raw(arena, xs);
  DeviceBuffer<H> dn(arena, xs.size(), Memory::buffers);
  Ops<Cuda>::convert(dn.data(), dx.data(), n);
  std::vector<H> want(xs.size()), got(xs.size());
  Ops<Cuda>::download(want.data(), dn.data(), n);
  host_narrow(got.data(), xs.data(), n, dt);
  std::int64_t wrong = 0;
  for (std::size_t i = 0; i < xs.size(); ++i)
    if (std::bit_cast<std::uint16_t>(got[i]) != std::bit_cast<std::uint16_t>(want[i])) ++wrong;
  CHECK(wrong == 0);
  // widening: every pattern
  std::vector<H> all(65536);
  for (std::uint32_t b = 0; b < 65536; ++b)
    all[b] = std::bit_cast<H>(static_cast<std::uint16_t>(b));
  auto da = to_device_raw(arena, all);
  DeviceBuffer<float> dw(arena, all.size(), Memory::buffers);
  Ops<Cuda>::convert(dw.data(), da.data(), 65536);
  std::vector<float> wide_want(65536), wide_got(65536);
  Ops<Cuda>::download(wide_want.data(), dw.data(), 65536);
  host_widen(wide_got.data(), all.data(), 65536, dt);
  wrong = 0;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (std::bit_cast<std::uint32_t>(wide_got[i]) != std::bit_cast<std::uint32_t>(wide_want[i]))
      ++wrong;
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("the host's 16-bit narrowing and widening equal the device's convert kernel") {
  check_host_conversions<__nv_bfloat16>();
  check_host_conversions<__half>();
}

TEST_CASE("a download behind an event sees the work queued before it, not after") {
  // The compute stream fills x with 1, the event marks it, the copy stream downloads while
  // the compute stream goes on writing 2s; the copy must hold the 1s.
  constexpr std::int64_t n = std::int64_t{1} << 24;
  CudaArena arena;
  DeviceBuffer<float> x(arena, static_cast<std::size_t>(n), Memory::buffers);
  PinnedHostAllocator pinned;
  auto* host = static_cast<float*>(pinned.allocate(sizeof(float) * static_cast<std::size_t>(n)));
  Ops<Cuda>::fill(x.data(), 1.0f, n);
  Ops<Cuda>::Event ready, done;
  Ops<Cuda>::record(ready);
  Ops<Cuda>::download_after(host, x.data(), n, ready, done);
  Ops<Cuda>::stream_wait(done);  // the overwrite waits for the copy
  Ops<Cuda>::fill(x.data(), 2.0f, n);
  Ops<Cuda>::wait(done);
  std::int64_t ones = 0;
  for (std::int64_t i = 0; i < n; ++i) ones += host[i] == 1.0f;
  CHECK(ones == n);
  Ops<Cuda>::synchronize();
  pinned.deallocate(host, 0);
}

TEST_CASE("host AdamW (every path this CPU has) equals the CUDA AdamW kernel bit for bit") {
  constexpr std::int64_t n = 3 * 4096 + 77;
  Rng rng(11);
  std::vector<float> p(n), g(n), m(n), v(n);
  for (std::int64_t i = 0; i < n; ++i) {
    p[i] = static_cast<float>(rng.normal());
    g[i] = static_cast<float>(0.05 * rng.normal());
    m[i] = static_cast<float>(0.01 * rng.normal());
    v[i] = static_cast<float>(1e-4 * std::abs(rng.normal()));
  }
  kernels::Segments<bool> decay;
  decay.append(1000, true);
  decay.append(n - 1000, false);
  const auto c = adam_coeffs({0.9, 0.999, 1e-8, 0.1}, 3e-3, 4);
  CudaArena arena;
  auto dp = to_device<float>(arena, p), dg = to_device<float>(arena, g),
       dm = to_device<float>(arena, m), dv = to_device<float>(arena, v);
  Ops<Cuda>::adamw(dp.data(), dg.data(), dm.data(), dv.data(), decay, c);
  const auto want_p = to_host(dp), want_m = to_host(dm), want_v = to_host(dv);
  for (const HostIsa isa : {HostIsa::scalar, HostIsa::avx2, HostIsa::avx512}) {
    if (!host_isa_available(isa)) continue;
    CAPTURE(isa_name(isa));
    auto hp = p, hm = m, hv = v;
    host_adamw(hp.data(), g.data(), hm.data(), hv.data(), decay, c, 1.0f, isa);
    CHECK(same_bits(hp, want_p));
    CHECK(same_bits(hm, want_m));
    CHECK(same_bits(hv, want_v));
  }
}

TEST_CASE(
    "host AdamW with a gradient factor, compiled apart, equals adamw_mixed bit for bit whatever "
    "either compiler contracts") {
  // grad_factor (1 / loss scale, times the clipping coefficient) is no power of two: g times it
  // is inexact, and a compiler that contracted it with the body's g - m into one FMA (nvcc does
  // by default; so does the emulated device's host compiler) would round it differently from
  // one that did not. The host side is compiled in cpu_reference.cpp, apart from the kernels.
  constexpr std::int64_t n = 4096 + 77;
  Rng rng(13);
  std::vector<float> p(n), g(n), m(n), v(n);
  for (std::int64_t i = 0; i < n; ++i) {
    p[i] = static_cast<float>(rng.normal());
    g[i] = static_cast<float>(0.05 * rng.normal());
    m[i] = static_cast<float>(0.01 * rng.normal());
    v[i] = static_cast<float>(1e-4 * std::abs(rng.normal()));
  }
  kernels::Segments<bool> decay;
  decay.append(n, true);
  const auto c = adam_coeffs({0.9, 0.999, 1e-8, 0.1}, 3e-3, 4);
  const float factor = 0.37f;
  CudaArena arena;
  auto dp = to_device<float>(arena, p), dg = to_device<float>(arena, g),
       dm = to_device<float>(arena, m), dv = to_device<float>(arena, v);
  Ops<Cuda>::adamw_mixed(dp.data(), static_cast<float*>(nullptr), dg.data(), dm.data(), dv.data(),
                         decay, c, factor);
  const auto want_p = to_host(dp), want_m = to_host(dm), want_v = to_host(dv);
  for (const HostIsa isa : {HostIsa::scalar, HostIsa::avx2, HostIsa::avx512}) {
    if (!host_isa_available(isa)) continue;
    CAPTURE(isa_name(isa));
    auto hp = p, hm = m, hv = v;
    CpuRef::host_adamw(hp.data(), g.data(), hm.data(), hv.data(), decay, c, factor,
                       static_cast<int>(isa));
    CHECK(same_bits(hp, want_p));
    CHECK(same_bits(hm, want_m));
    CHECK(same_bits(hv, want_v));
  }
}

TEST_CASE("Trainer<Cuda> with the optimizer offloaded to pinned host memory changes no bit") {
  check_offload_bits<Replicated<1>, Fp32>(Offload::optimizer);
  check_offload_bits<Replicated<1>, Bf16Mixed>(Offload::optimizer);
}

TEST_CASE("Trainer<Cuda> under ZeRO-3 with its parameters offloaded too changes no bit") {
  check_offload_bits<Sharded<Zero3, 1>, Bf16Mixed>(Offload::optimizer_and_params);
}

TEST_CASE(
    "Trainer<Cuda> offloaded in 16 bits (bf16 and fp16 gradients down, weights up) changes "
    "no bit, with gradient accumulation") {
  check_offload_bits<Replicated<1>, Fp16Mixed>(Offload::optimizer);
  check_offload_bits<Replicated<1>, Bf16Mixed>(Offload::optimizer, 1);  // 4 micro-batches
  check_offload_bits<Sharded<Zero2, 1>, Bf16Mixed>(Offload::optimizer, 1);
  check_offload_bits<Sharded<Zero3, 1>, Fp16Mixed>(Offload::optimizer_and_params, 1);
  check_offload_bits<Sharded<Zero1, 1>, Fp32>(Offload::optimizer, 1);
}

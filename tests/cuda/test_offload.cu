// Offload on the GPU: the host AdamW (compiled here without -march: its vector paths are
// picked at run time) gives the bits of the CUDA AdamW kernel, and a Trainer<Cuda> with
// its optimizer state (and ZeRO-3 parameters) in pinned host memory gives the bits of the
// same trainer without offload, for fp32 and bf16 models, with the arena's books showing
// where the state went.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda_test_util.hpp"
#include "seqpar/backend/cuda/ops.hpp"
#include "seqpar/optim/host_adamw.hpp"
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
OffloadRun offload_run(Offload off) {
  auto o = trainer_options();
  o.offload = off;
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
void check_offload_bits(Offload off) {
  const auto dev = offload_run<Plan, Prec>(Offload::none);
  const auto host = offload_run<Plan, Prec>(off);
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

}  // namespace

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

TEST_CASE("Trainer<Cuda> with the optimizer offloaded to pinned host memory changes no bit") {
  check_offload_bits<Replicated<1>, Fp32>(Offload::optimizer);
  check_offload_bits<Replicated<1>, Bf16Mixed>(Offload::optimizer);
}

TEST_CASE("Trainer<Cuda> under ZeRO-3 with its parameters offloaded too changes no bit") {
  check_offload_bits<Sharded<Zero3, 1>, Bf16Mixed>(Offload::optimizer_and_params);
}

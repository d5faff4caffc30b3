// AdamW against a scalar transcription of torch.optim.AdamW; LR schedules against
// Hugging Face's get_{linear,cosine}_schedule_with_warmup formulas.
#include <doctest/doctest.h>

#include <cmath>
#include <numbers>

#include "seqpar/backend/cpu/ops.hpp"
#include "seqpar/optim/adamw.hpp"
#include "seqpar/optim/schedule.hpp"

using namespace seqpar;

TEST_CASE("AdamW: decoupled decay and bias-corrected moments, decay only where the table says") {
  UnitTable u;
  detail::add_param(u, "w", 2, 2, false, Split::none, true, 1, 0);
  detail::add_param(u, "b", 2, 1, true, Split::none, false, 1, 0);
  Arena arena;
  AdamState<double, Arena> s{0, 6, Buffer<double, Arena>(arena, 6, Memory::optimizer),
                             Buffer<double, Arena>(arena, 6, Memory::optimizer)};
  std::vector<double> p = {1, -2, 3, 0.5, 0.25, -1}, ref = p, m(6), v(6);
  const AdamWConfig cfg{0.9, 0.95, 1e-8, 0.1};
  for (int t = 1; t <= 3; ++t) {
    const double lr = 0.01 * t;
    std::vector<double> g = {0.1 * t, -0.2, 0.3, -0.05 * t, 0.5, 0.01};
    adamw_update<Cpu>(p.data(), g.data(), s, u, adam_coeffs(cfg, lr, t));
    for (int i = 0; i < 6; ++i) {  // torch.optim.AdamW, single-tensor path
      if (i < 4) ref[i] *= 1 - lr * cfg.weight_decay;
      m[i] += (1 - cfg.beta1) * (g[i] - m[i]);
      v[i] = v[i] * cfg.beta2 + (1 - cfg.beta2) * g[i] * g[i];
      const double bc1 = 1 - std::pow(cfg.beta1, t), bc2 = 1 - std::pow(cfg.beta2, t);
      ref[i] -= lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + cfg.eps);
    }
    for (int i = 0; i < 6; ++i) CHECK(p[i] == doctest::Approx(ref[i]).epsilon(1e-6));
  }
}

TEST_CASE("AdamW on a shard range that cuts through tensors") {
  UnitTable u;
  detail::add_param(u, "w", 2, 2, false, Split::none, true, 1, 0);
  detail::add_param(u, "b", 2, 1, true, Split::none, false, 1, 0);
  Arena arena;
  // Elements [3, 5): the last weight element (decayed) and the first bias (not).
  AdamState<double, Arena> s{3, 5, Buffer<double, Arena>(arena, 2, Memory::optimizer),
                             Buffer<double, Arena>(arena, 2, Memory::optimizer)};
  std::vector<double> p = {1.0, 1.0}, g = {0.0, 0.0};
  adamw_update<Cpu>(p.data(), g.data(), s, u, adam_coeffs({0.9, 0.999, 1e-8, 0.5}, 0.1, 1));
  CHECK(p[0] == doctest::Approx(0.95));  // decayed, zero gradient
  CHECK(p[1] == doctest::Approx(1.0));
}

TEST_CASE("schedules: linear and cosine with warmup") {
  const LrSchedule lin{1.0, 2, 6, LrDecay::linear};
  const double want[] = {0.0, 0.5, 1.0, 0.75, 0.5, 0.25, 0.0, 0.0};
  for (int s = 0; s < 8; ++s) CHECK(lin.at(s) == doctest::Approx(want[s]));
  const LrSchedule cos{2.0, 1, 5, LrDecay::cosine};
  CHECK(cos.at(0) == 0.0);
  CHECK(cos.at(1) == doctest::Approx(2.0));
  CHECK(cos.at(3) == doctest::Approx(1.0));  // halfway: 0.5 (1 + cos(pi/2))
  CHECK(cos.at(5) == doctest::Approx(0.0));
  const LrSchedule flat{3.0, 0, 0, LrDecay::linear};
  CHECK(flat.at(100) == 3.0);
}

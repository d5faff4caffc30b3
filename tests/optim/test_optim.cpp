// AdamW against a scalar transcription of torch.optim.AdamW; LR schedules against
// Hugging Face's get_{linear,cosine}_schedule_with_warmup formulas.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

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

TEST_CASE(
    "for_each_segments: a range cut at its tensors, equal neighbours merged, calls split at the "
    "capacity") {
  // 80 tensors of 1..5 elements whose decay flags run in pairs: 40 segments once merged.
  UnitTable u;
  for (int i = 0; i < 80; ++i)
    detail::add_param(u, "t" + std::to_string(i), 1 + i % 5, 1, true, Split::none, (i / 2) % 2 == 0,
                      1, 0);
  const std::int64_t begin = 2,
                     end = u.numel - 2;  // cuts into the second (of 2) and the last (of 5)
  std::vector<int> seen(static_cast<std::size_t>(u.numel), 0);
  std::int64_t next = 0;
  int calls = 0, segments = 0;
  for_each_segments<bool>(
      u, begin, end, [](const ParamSpec& p) { return p.decay; },
      [&](std::int64_t offset, const kernels::Segments<bool>& decay) {
        ++calls;
        CHECK(offset == next);  // calls follow each other without a gap
        CHECK(decay.count <= kernels::Segments<bool>::capacity);
        for (int k = 0; k < decay.count; ++k) {
          ++segments;
          if (k > 0) CHECK(decay.value[k] != decay.value[k - 1]);  // equal neighbours merged
          for (std::int64_t i = begin + offset + decay.begin(k); i < begin + offset + decay.end[k];
               ++i) {
            ++seen[static_cast<std::size_t>(i)];
            const auto& spec = *std::find_if(
                u.params.begin(), u.params.end(),
                [i](const ParamSpec& p) { return i >= p.offset && i < p.offset + p.numel(); });
            CHECK(decay.value[k] == spec.decay);
          }
        }
        next = offset + decay.size();
      });
  CHECK(next == end - begin);
  CHECK(calls == 2);
  CHECK(segments == 40);
  for (std::int64_t i = 0; i < u.numel; ++i)
    CHECK(seen[static_cast<std::size_t>(i)] == (i >= begin && i < end ? 1 : 0));
}

TEST_CASE(
    "for_each_segments: no call for an empty range or one in the padding; no merge across a gap") {
  UnitTable u;
  detail::add_param(u, "a", 4, 1, true, Split::none, false, 1, 0);
  detail::add_param(u, "b", 4, 1, true, Split::none, false, 1, 0);
  int calls = 0;
  const auto decay_of = [](const ParamSpec& p) { return p.decay; };
  const auto count = [&](std::int64_t, const kernels::Segments<bool>&) { ++calls; };
  for_each_segments<bool>(u, 5, 5, decay_of, count);
  for_each_segments<bool>(u, u.numel, u.numel + 8, decay_of, count);  // a ZeRO shard's padding
  CHECK(calls == 0);
  // Tensors laid out with a hole between them: equal flags, yet two calls.
  u.params[1].offset = 6;
  u.numel = 10;
  std::vector<std::pair<std::int64_t, std::int64_t>> seen;  // (offset, size) of each call
  for_each_segments<bool>(u, 1, 10, decay_of,
                          [&](std::int64_t offset, const kernels::Segments<bool>& s) {
                            seen.emplace_back(offset, s.size());
                          });
  CHECK(seen == std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 3}, {5, 4}});
}

TEST_CASE(
    "AdamW over a range of more segments than one call takes equals the element-wise update") {
  UnitTable u;
  for (int i = 0; i < 70; ++i)
    detail::add_param(u, "t" + std::to_string(i), 2 + i % 3, 1, true, Split::none, i % 2 == 0, 1,
                      0);
  const std::int64_t begin = 1, end = u.numel - 1, n = end - begin;
  Arena arena;
  AdamState<double, Arena> s{
      begin, end, Buffer<double, Arena>(arena, static_cast<std::size_t>(n), Memory::optimizer),
      Buffer<double, Arena>(arena, static_cast<std::size_t>(n), Memory::optimizer)};
  std::vector<double> p(static_cast<std::size_t>(n)), g(p.size()), ref, m(p.size()), v(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) {
    p[i] = 1.0 + 0.01 * static_cast<double>(i);
    g[i] = std::sin(static_cast<double>(i));
  }
  ref = p;
  const AdamWConfig cfg{0.9, 0.99, 1e-8, 0.3};
  const double lr = 0.05;
  adamw_update<Cpu>(p.data(), g.data(), s, u, adam_coeffs(cfg, lr, 1));
  for (std::size_t i = 0; i < p.size(); ++i) {
    const std::int64_t e = begin + static_cast<std::int64_t>(i);
    const bool decay = std::find_if(u.params.begin(), u.params.end(), [e](const ParamSpec& q) {
                         return e >= q.offset && e < q.offset + q.numel();
                       })->decay;
    if (decay) ref[i] *= 1 - lr * cfg.weight_decay;
    m[i] = (1 - cfg.beta1) * g[i];
    v[i] = (1 - cfg.beta2) * g[i] * g[i];
    ref[i] -= lr / (1 - cfg.beta1) * m[i] / (std::sqrt(v[i]) / std::sqrt(1 - cfg.beta2) + cfg.eps);
    CAPTURE(i);
    CHECK(p[i] == doctest::Approx(ref[i]).epsilon(1e-6));  // the coefficients are floats
  }
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

TEST_CASE(
    "schedules: DeepSpeed's WarmupLR (log warmup) and WarmupDecayLR (from and to warmup_min_lr)") {
  // WarmupLR, warmup_type log: min + (max - min) * log(step + 1) / log(warmup), then max.
  const LrSchedule log_warmup{2.0, 4, 0, LrDecay::constant, 0.25, LrWarmup::log};
  for (int s = 0; s < 4; ++s)
    CHECK(log_warmup.at(s) ==
          doctest::Approx(0.5 + 1.5 * std::log(static_cast<double>(s + 1)) / std::log(4.0)));
  CHECK(log_warmup.at(0) == doctest::Approx(0.5));
  CHECK(log_warmup.at(4) == 2.0);
  CHECK(log_warmup.at(1000) == 2.0);
  // WarmupDecayLR, warmup_type linear, min 1, max 3, warmup 2, total 6: gamma = step / 2,
  // then (6 - step) / (6 - 2).
  const LrSchedule decay{3.0, 2, 6, LrDecay::linear, 1.0 / 3.0, LrWarmup::linear};
  const double want[] = {1.0, 2.0, 3.0, 2.5, 2.0, 1.5, 1.0, 1.0};
  for (int s = 0; s < 8; ++s) CHECK(decay.at(s) == doctest::Approx(want[s]));
}

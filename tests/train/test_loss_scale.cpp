// Loss scaling as DeepSpeed configures it: StepGuard replays DeepSpeed's own
// DynamicLossScaler step for step (tests/fixtures/loss_scale/deepspeed.json, written by
// tools/make_loss_scale_golden.py with the deepspeed package), and a Trainer on the CPU,
// its fp32 loss scaled up until the gradients overflow, skips those steps without touching
// a weight, takes the others with the bits of an unscaled run, and resumes from a
// checkpoint with its whole scaler state.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "../support/plans.hpp"
#include "../support/weights.hpp"

using namespace seqpar;
using test::Small;

namespace {

const std::filesystem::path golden_file =
    std::filesystem::path(SEQPAR_TEST_DIR) / "fixtures" / "loss_scale" / "deepspeed.json";

// A DeepSpeed fp16 block as LossScaleOptions: a field it leaves out keeps its default,
// which is DeepSpeed's.
LossScaleOptions from_fp16_block(const nlohmann::json& fp16) {
  LossScaleOptions o;
  o.loss_scale = fp16.value("loss_scale", o.loss_scale);
  o.initial_scale_power = fp16.value("initial_scale_power", o.initial_scale_power);
  o.loss_scale_window = fp16.value("loss_scale_window", o.loss_scale_window);
  o.hysteresis = fp16.value("hysteresis", o.hysteresis);
  o.consecutive_hysteresis = fp16.value("consecutive_hysteresis", o.consecutive_hysteresis);
  o.min_loss_scale = fp16.value("min_loss_scale", o.min_loss_scale);
  return o;
}

bool same_bits(const std::map<std::string, std::vector<float>>& a,
               const std::map<std::string, std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, v] : a) {
    const auto& w = b.at(name);
    if (v.size() != w.size() || std::memcmp(v.data(), w.data(), v.size() * sizeof(float)) != 0)
      return false;
  }
  return true;
}

// fp32 with a dynamic scale of 2^130 (infinite as a float: the first gradients are not
// finite), a window of 2 so that it grows back into overflow, and DeepSpeed's hysteresis.
TrainOptions overflowing_options() {
  TrainOptions o = test::plan_options();
  o.loss_scale.enabled = true;
  o.loss_scale.initial_scale_power = 130;
  o.loss_scale.loss_scale_window = 2;
  o.loss_scale.hysteresis = 2;
  return o;
}

}  // namespace

TEST_CASE("LossScaleOptions' defaults are DeepSpeed's fp16 block's") {
  const LossScaleOptions o;
  CHECK(o.loss_scale == 0);  // dynamic
  CHECK(o.initial_scale_power == 16);
  CHECK(o.loss_scale_window == 1000);
  CHECK(o.hysteresis == 2);
  CHECK_FALSE(o.consecutive_hysteresis);
  CHECK(o.min_loss_scale == 1);
  CHECK(o.initial_scale() == 65536);
  // Fp16Mixed scales by default; Fp32 and Bf16Mixed do not unless asked.
  CHECK(StepGuard<Fp16Mixed>().dynamic());
  CHECK(StepGuard<Fp16Mixed>().value() == 65536);
  CHECK_FALSE(StepGuard<Fp32>().scaled());
  CHECK(StepGuard<Fp32>().value() == 1);
  CHECK(StepGuard<Bf16Mixed>(LossScaleOptions{.enabled = true}).dynamic());
  const StepGuard<Fp32> fixed(LossScaleOptions{.enabled = true, .loss_scale = 8});
  CHECK(fixed.scaled());
  CHECK_FALSE(fixed.dynamic());
  CHECK(fixed.value() == 8);
}

TEST_CASE("a bad LossScaleOptions field is refused, naming it") {
  const auto refuses = [](LossScaleOptions o, const char* what) {
    CAPTURE(what);
    CHECK_THROWS_WITH_AS(StepGuard<Fp16Mixed>{o}, doctest::Contains(what), Error);
  };
  refuses({.loss_scale = -1}, "LossScaleOptions::loss_scale is -1");
  refuses({.loss_scale_window = 0}, "LossScaleOptions::loss_scale_window is 0");
  refuses({.hysteresis = 0}, "LossScaleOptions::hysteresis is 0");
  refuses({.min_loss_scale = 0}, "LossScaleOptions::min_loss_scale is 0");
  refuses({.initial_scale_power = 2, .min_loss_scale = 8},
          "the initial scale 2^2 is below min_loss_scale = 8");
  CHECK_THROWS_WITH_AS(StepGuard<Fp32>(LossScaleOptions{.loss_scale = 128}),
                       doctest::Contains("loss scaling is off for this precision"), Error);
  TrainOptions o = test::plan_options();
  o.loss_scale.hysteresis = -3;
  CHECK_THROWS_WITH_AS((Trainer<Small, Replicated<1>>(o)),
                       doctest::Contains("LossScaleOptions::hysteresis is -3"), Error);
}

TEST_CASE("StepGuard follows DeepSpeed's loss scaler after every step of every sequence") {
  std::ifstream in(golden_file);
  REQUIRE_MESSAGE(in.good(), golden_file.string(), " is missing");
  const auto doc = nlohmann::json::parse(in);
  const auto& cases = doc.at("cases");
  REQUIRE(cases.size() >= 12);
  std::int64_t steps_checked = 0, raised = 0, overflows = 0;
  for (const auto& c : cases) {
    const std::string name = c.at("name");
    CAPTURE(name);
    const LossScaleOptions o = from_fp16_block(c.at("fp16"));
    StepGuard<Fp16Mixed> g(o);
    REQUIRE(g.dynamic() == c.at("dynamic").get<bool>());
    CHECK(g.value() == c.at("initial_scale").get<double>());
    std::set<std::int64_t> over;
    for (const auto& i : c.at("overflow_at")) over.insert(i.get<std::int64_t>());
    const auto& scales = c.at("scale_after");
    const auto& hysteresis = c.at("hysteresis_after");
    const std::int64_t raised_at = c.at("raised_at").is_null() ? -1 : c.at("raised_at").get<int>();
    const std::int64_t steps = c.at("steps");
    for (std::int64_t i = 0; i < steps; ++i) {
      CAPTURE(i);
      const double before = g.value();
      const bool overflow = over.contains(i);
      const StepVerdict v = g.update(1.0, overflow ? INFINITY : 1.0);
      if (i == raised_at) {
        // DeepSpeed stops the run here; StepGuard calls it a fault and changes nothing.
        CHECK(v == StepVerdict::fault);
        CHECK(g.value() == before);
        ++raised;
        break;
      }
      // A static scale has nothing to answer an overflow with: a fault.
      CHECK(v == (!overflow     ? StepVerdict::take
                  : g.dynamic() ? StepVerdict::overflow
                                : StepVerdict::fault));
      overflows += overflow;
      CHECK(g.value() == scales.at(static_cast<std::size_t>(i)).get<double>());
      if (g.dynamic())
        CHECK(g.hysteresis_left() ==
              hysteresis.at(static_cast<std::size_t>(i)).get<std::int64_t>());
      ++steps_checked;
    }
    CHECK((raised_at < 0 || g.skipped_steps() > 0));
  }
  CHECK(raised == 3);
  CHECK(steps_checked > 2000);
  CHECK(overflows > 30);
}

TEST_CASE(
    "an fp32 loss scaled into overflow skips steps without an update, the others take the bits "
    "of an unscaled run, and a resumed run continues bit for bit") {
  const TrainOptions scaled_options = overflowing_options();
  Trainer<Small, Replicated<1>> t(scaled_options);
  // The scaler the trainer must have followed, fed the overflows the trainer saw.
  StepGuard<Fp32> want(scaled_options.loss_scale);
  std::vector<StepStats> taken;
  std::int64_t overflows = 0, kept_hysteresis = 0, grown = 0;
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("seqpar_loss_scale_" + std::to_string(::getpid()) + ".safetensors"))
                               .string();
  std::vector<StepStats> after_save;
  std::map<std::string, std::vector<float>> weights_after;
  bool saved = false;
  constexpr int kCalls = 40;
  int saved_at = -1;
  for (int call = 0; call < kCalls; ++call) {
    CAPTURE(call);
    const auto before = test::weights_by_name(t);
    // A skipped step tries the same batch again: batch k is the k-th step taken.
    const StepStats st = t.step(test::plan_batch(static_cast<int>(t.steps_taken())));
    CHECK(st.loss_scale == want.value());
    const double scale_before = want.value();
    CHECK(want.update(st.loss, st.overflow ? INFINITY : 1.0) ==
          (st.skipped ? StepVerdict::overflow : StepVerdict::take));
    CHECK(st.skipped == st.overflow);  // a finite loss: every skip here is an overflow
    CHECK(std::isfinite(st.loss));
    CHECK(st.skipped_steps == want.skipped_steps());
    CHECK(st.nonfinite_in_a_row == 0);
    if (st.skipped) {
      ++overflows;
      kept_hysteresis += want.value() == scale_before;
      CHECK(same_bits(test::weights_by_name(t), before));  // no update on a skipped step
    } else {
      taken.push_back(st);
      grown += want.value() > scale_before;
    }
    if (saved) after_save.push_back(st);
    // Save just after an overflow that spent hysteresis without halving the scale, so the
    // resume must carry the hysteresis, the clean-step count and the counters.
    if (!saved && st.skipped && want.hysteresis_left() == 1 && want.value() == scale_before &&
        call > 2) {
      t.save_checkpoint(path, {{"data.position", std::to_string(t.steps_taken())}});
      saved = true;
      saved_at = call;
    }
  }
  weights_after = test::weights_by_name(t);
  INFO(overflows, " overflows, ", taken.size(), " steps taken, ", grown, " growths; saved after ",
       saved_at);
  CHECK(overflows >= 6);
  CHECK(kept_hysteresis >= 2);  // hysteresis 2: an overflow that only spends it
  CHECK(grown >= 2);            // the window of 2 doubled the scale back into overflow
  REQUIRE(taken.size() >= 10);
  REQUIRE(saved);

  // The steps taken are an unscaled fp32 run's: a power-of-two scale is exact.
  TrainOptions plain = scaled_options;
  plain.loss_scale = {};
  Trainer<Small, Replicated<1>> ref(plain);
  for (std::size_t k = 0; k < taken.size(); ++k) {
    CAPTURE(k);
    const StepStats r = ref.step(test::plan_batch(static_cast<int>(k)));
    CHECK(r.loss_scale == 1);
    CHECK(r.loss == taken[k].loss);
    CHECK(r.grad_norm == taken[k].grad_norm);
    CHECK(r.lr == taken[k].lr);
    CHECK(r.step == taken[k].step);
  }
  CHECK(same_bits(test::weights_by_name(ref), weights_after));

  // The resumed trainer carries on exactly: scale, verdicts, counters, weights.
  TrainOptions other = scaled_options;
  other.seed = 99;  // overwritten by the load
  Trainer<Small, Replicated<1>> resumed(other);
  const auto meta = resumed.load_checkpoint(path);
  std::filesystem::remove(path);
  CHECK(meta.at("seqpar.loss_scale_hysteresis") == "1");
  CHECK(meta.at("seqpar.loss_scale_clean_steps") == "0");
  CHECK(std::stoll(meta.at("seqpar.skipped_steps")) > 0);
  REQUIRE(after_save.size() == static_cast<std::size_t>(kCalls - 1 - saved_at));
  for (std::size_t i = 0; i < after_save.size(); ++i) {
    CAPTURE(i);
    const StepStats st = resumed.step(test::plan_batch(static_cast<int>(resumed.steps_taken())));
    const StepStats& w = after_save[i];
    CHECK(st.step == w.step);
    CHECK(st.loss == w.loss);
    // (An overflowed step's norm is NaN or infinite in both.)
    CHECK((st.grad_norm == w.grad_norm || (std::isnan(st.grad_norm) && std::isnan(w.grad_norm))));
    CHECK(st.loss_scale == w.loss_scale);
    CHECK(st.skipped == w.skipped);
    CHECK(st.skipped_steps == w.skipped_steps);
  }
  CHECK(same_bits(test::weights_by_name(resumed), weights_after));
}

TEST_CASE("a static fp32 loss scale: every step taken, the bits of an unscaled run") {
  TrainOptions scaled = test::plan_options(), plain = scaled;
  scaled.loss_scale = {.enabled = true, .loss_scale = 0x1p40};
  Trainer<Small, Replicated<1>> a(scaled), b(plain);
  for (int s = 0; s < 3; ++s) {
    const StepStats x = a.step(test::plan_batch(s)), y = b.step(test::plan_batch(s));
    CHECK(x.loss_scale == 0x1p40);
    CHECK_FALSE(x.skipped);
    CHECK(x.loss == y.loss);
    CHECK(x.grad_norm == y.grad_norm);
  }
  CHECK(same_bits(test::weights_by_name(a), test::weights_by_name(b)));
}

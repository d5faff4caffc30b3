// A DeepSpeed configuration mapped onto TrainingArguments (train/deepspeed_config.hpp): our
// users' guide's ds_config.json (SEQPAR_DATA_DIR/deepspeed, skipped where absent); "auto"
// takes the argument's value; keys that would change the training refused by name; the
// ZeRO stage as the layout's; the batch as micro x accumulation x data ranks; DeepSpeed's
// schedules; and the batch and schedule of TrainingArguments themselves.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "seqpar/train/deepspeed_config.hpp"
#include "seqpar/train/training_arguments.hpp"

using namespace seqpar;

namespace deepspeed_test {

using nlohmann::json;

// Arguments with `fields` given on the command line (their values set by the caller).
TrainingArguments given(std::initializer_list<const char*> fields) {
  TrainingArguments a;
  for (const char* f : fields) a.given.insert(f);
  return a;
}

bool has(const std::vector<std::string>& v, const std::string& prefix) {
  for (const auto& s : v)
    if (s.starts_with(prefix)) return true;
  return false;
}

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// The message of the Error that applying `config` throws ("" when none).
std::string refusal(TrainingArguments a, const json& config, std::int64_t world = 2) {
  try {
    apply_deepspeed_config(a, config, "ds.json", world);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const std::filesystem::path guide_config =
    std::filesystem::path(SEQPAR_DATA_DIR) / "deepspeed" / "zero3_offload.json";

TEST_CASE(
    "the users' guide's zero3_offload.json: ZeRO-3 over all ranks, both offloads, auto from the "
    "arguments") {
  if (std::string(SEQPAR_DATA_DIR).empty() || !std::filesystem::exists(guide_config)) {
    MESSAGE("skipped: no SEQPAR_DATA_DIR/deepspeed/zero3_offload.json");
    return;
  }
  // The guide's TrainingArguments: per-device batch 4, accumulation 4, lr 2e-5, warmup 0.1.
  TrainingArguments a = given({"per_device_train_batch_size", "gradient_accumulation_steps",
                               "learning_rate", "warmup_ratio"});
  a.per_device_train_batch_size = 4;
  a.gradient_accumulation_steps = 4;
  a.learning_rate = 2e-5;
  a.warmup_ratio = 0.1;
  a.weight_decay = 0.01;  // a program's default, not given
  const DeepSpeedReport r = apply_deepspeed_file(a, guide_config, 2);
  CHECK(a.plan.layout.zero_stage == 3);
  CHECK(a.plan.layout.data == 0);  // the launch's
  CHECK(a.offload == "optimizer+params");
  CHECK(a.precision == "fp32");  // fp16.enabled "auto" and no --fp16
  CHECK(a.learning_rate == 2e-5);
  CHECK(a.adam_beta1 == 0.9);
  CHECK(a.adam_beta2 == 0.999);
  CHECK(a.adam_epsilon == 1e-8);
  CHECK(a.weight_decay == 0.01);                         // "auto": the default stays
  CHECK(a.max_grad_norm == 1.0);                         // gradient_clipping "auto"
  CHECK(a.lr_scheduler_type == "constant_with_warmup");  // WarmupLR
  CHECK(a.warmup_type == "log");                         // DeepSpeed's default warmup_type
  CHECK(a.warmup_min_lr == 0.0);
  CHECK(a.warmup_steps == -1);  // "auto": warmup_ratio of the run's steps
  CHECK(a.loss_scale.loss_scale == 0.0);
  CHECK(a.loss_scale.loss_scale_window == 1000);
  CHECK(a.loss_scale.hysteresis == 2);
  CHECK(a.loss_scale.min_loss_scale == 1.0);
  CHECK(a.loss_scale.initial_scale_power == 16);
  // The batch: 4 rows x 4 micro-batches x 2 data ranks, as the Trainer computes it.
  const BatchShape b = batch_shape(a, 2, 1);
  CHECK(b.rows == 32);
  CHECK(b.micro_rows == 4);
  CHECK(b.accumulation == 4);
  for (const char* key :
       {"zero_optimization.overlap_comm=true", "zero_optimization.contiguous_gradients=true",
        "zero_optimization.sub_group_size=", "zero_optimization.reduce_bucket_size=\"auto\"",
        "zero_optimization.stage3_prefetch_bucket_size=",
        "zero_optimization.stage3_param_persistence_threshold=",
        "zero_optimization.stage3_max_live_parameters=",
        "zero_optimization.stage3_max_reuse_distance=",
        "zero_optimization.offload_optimizer.pin_memory=true",
        "zero_optimization.offload_param.pin_memory=true", "steps_per_print=10",
        "wall_clock_breakdown=false"}) {
    CAPTURE(key);
    CHECK(has(r.ignored, key));
  }
  CHECK(r.ignored.size() == 12);
  CHECK(has(r.applied, "zero_optimization.stage=3 -> TrainingArguments::zero_stage 3"));
  // Over 8 GPUs, with tensor parallel 2: ZeRO-3 over the 4 data ranks the launch leaves.
  TrainingArguments eight = given({"tensor_parallel"});
  eight.plan.layout.tensor = 2;
  apply_deepspeed_file(eight, guide_config, 8);
  CHECK(eight.plan.layout == PlanDesc{0, 2, 1, 3, false});
}

TEST_CASE(
    "keys that would change the training are refused, each named with its value, in one message") {
  const json config = {
      {"optimizer", {{"type", "Lamb"}, {"params", {{"lr", 1e-3}}}}},
      {"zero_optimization", {{"stage", 2}, {"offload_param", {{"device", "cpu"}}}}},
      {"fp16", {{"enabled", true}, {"auto_cast", true}}},
      {"prescale_gradients", true},
      {"amp", {{"enabled", true}}},
      {"scheduler", {{"type", "OneCycle"}}},
      {"zero_optimisation", {{"stage", 1}}},  // misspelt: not silently dropped
      {"steps_per_print", 100},               // performance only: no refusal
  };
  const std::string m = refusal({}, config);
  CAPTURE(m);
  CHECK(contains(m, "ds.json: 7 key(s) that seqpar does not honour"));
  CHECK(contains(m, "optimizer.type=\"Lamb\""));
  CHECK(contains(m, "zero_optimization.offload_param"));
  CHECK(contains(m, "stage 3 only"));
  CHECK(contains(m, "fp16.auto_cast=true"));
  CHECK(contains(m, "prescale_gradients=true"));
  CHECK(contains(m, "amp={\"enabled\":true}"));
  CHECK(contains(m, "scheduler.type=\"OneCycle\""));
  CHECK(contains(m, "zero_optimisation="));
  CHECK(!contains(m, "steps_per_print"));
  CHECK(contains(refusal({}, {{"zero_optimization", {{"stage", 3}, {"stage4", 1}}}}),
                 "zero_optimization.stage4=1: not a key of zero_optimization"));
  CHECK(contains(refusal({}, {{"gradient_clipping", "one"}}),
                 "gradient_clipping=\"one\": expected a number or \"auto\""));
  CHECK(
      contains(refusal({}, {{"zero_optimization", {{"offload_optimizer", {{"device", "nvme"}}}}}}),
               "offload_optimizer.device=\"nvme\""));
  CHECK(contains(refusal({}, {{"fp16", {{"enabled", true}}}, {"bf16", {{"enabled", true}}}}),
                 "both true"));
  CHECK(contains(refusal({}, json::array()), "a JSON object"));
}

TEST_CASE(
    "an explicit value replaces a default but must agree with the command line; \"auto\" takes "
    "it") {
  const json config = {
      {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 3e-5}, {"betas", {0.8, 0.95}}}}}},
      {"gradient_clipping", 0.5}};
  TrainingArguments a;
  apply_deepspeed_config(a, config, "ds.json", 2);
  CHECK(a.learning_rate == 3e-5);
  CHECK(a.adam_beta1 == 0.8);
  CHECK(a.adam_beta2 == 0.95);
  CHECK(a.max_grad_norm == 0.5);
  CHECK(a.plan.layout.zero_stage == 0);  // no zero_optimization: stage 0
  TrainingArguments cli = given({"learning_rate", "max_grad_norm"});
  cli.learning_rate = 1e-4;
  cli.max_grad_norm = 0.5;
  const std::string m = refusal(cli, config);
  CHECK(contains(
      m, "optimizer.params.lr=3e-05: the arguments give TrainingArguments::learning_rate 0.0001"));
  CHECK(!contains(m, "gradient_clipping"));  // agrees with --max_grad_norm
  TrainingArguments autos = given({"learning_rate"});
  autos.learning_rate = 1e-4;
  apply_deepspeed_config(autos, {{"optimizer", {{"type", "adam"}, {"params", {{"lr", "auto"}}}}}},
                         "ds.json", 2);
  CHECK(autos.learning_rate == 1e-4);
}

TEST_CASE("the ZeRO stage: the layout's, agreeing with the command line's") {
  TrainingArguments plan = given({"zero_stage"});
  plan.plan = {{2, 2, 1, 0, false}, "--plan tp2dp2"};
  CHECK(contains(refusal(plan, {{"zero_optimization", {{"stage", 3}}}}),
                 "zero_optimization.stage=3: the arguments give --plan tp2dp2 (ZeRO stage 0)"));
  TrainingArguments flag = given({"zero_stage"});
  flag.plan.layout.zero_stage = 1;
  CHECK(contains(refusal(flag, {{"zero_optimization", {{"stage", 2}}}}),
                 "the arguments give TrainingArguments::zero_stage 1 (ZeRO stage 1)"));
  TrainingArguments same = given({"zero_stage"});
  same.plan.layout.zero_stage = 2;
  apply_deepspeed_config(same, {{"zero_optimization", {{"stage", 2}}}}, "ds.json", 4);
  CHECK(same.plan.layout.zero_stage == 2);
  // One data rank shards nothing: a one-rank layout keeps its stage.
  TrainingArguments single = given({"zero_stage"});
  single.plan = {{1, 1, 1, 0, false}, "--plan single"};
  apply_deepspeed_config(single, {{"zero_optimization", {{"stage", 3}}}}, "ds.json", 1);
  CHECK(single.plan.layout.zero_stage == 0);
  TrainingArguments off;
  apply_deepspeed_config(
      off, {{"zero_optimization", {{"stage", 1}, {"offload_optimizer", {{"device", "cpu"}}}}}},
      "ds.json", 2);
  CHECK(off.plan.layout.zero_stage == 1);
  CHECK(off.offload == "optimizer");
  CHECK(contains(refusal({}, {{"zero_optimization", {{"stage", "auto"}}}}),
                 "DeepSpeed has no \"auto\" stage"));
}

TEST_CASE("precision: fp16 / bf16 blocks and loss scaling fields") {
  TrainingArguments a;
  apply_deepspeed_config(a,
                         {{"fp16",
                           {{"enabled", true},
                            {"loss_scale", 0},
                            {"initial_scale_power", 12},
                            {"loss_scale_window", 500},
                            {"hysteresis", 3},
                            {"consecutive_hysteresis", true},
                            {"min_loss_scale", 0.5}}}},
                         "ds.json", 2);
  CHECK(a.precision == "fp16");
  CHECK(a.loss_scale.initial_scale_power == 12);
  CHECK(a.loss_scale.loss_scale_window == 500);
  CHECK(a.loss_scale.hysteresis == 3);
  CHECK(a.loss_scale.consecutive_hysteresis);
  CHECK(a.loss_scale.min_loss_scale == 0.5);
  TrainingArguments b;
  apply_deepspeed_config(b, {{"bf16", {{"enabled", "auto"}}}}, "ds.json", 2);
  CHECK(b.precision == "fp32");
  apply_deepspeed_config(b, {{"bf16", {{"enabled", true}}}}, "ds.json", 2);
  CHECK(b.precision == "bf16");
  TrainingArguments bf = given({"precision"});
  bf.precision = "bf16";
  CHECK(contains(refusal(bf, {{"fp16", {{"enabled", true}}}}),
                 "the arguments give TrainingArguments::precision bf16"));
  TrainingArguments h = given({"precision", "hysteresis"});
  h.precision = "fp16";
  h.loss_scale.hysteresis = 3;
  CHECK(contains(refusal(h, {{"fp16", {{"enabled", true}, {"hysteresis", 4}}}}),
                 "the arguments give TrainingArguments::hysteresis 3"));
  // Loss scaling arguments set fp16's scaler: refused for fp32 and bf16, naming them.
  for (const char* precision : {"fp32", "bf16"}) {
    TrainingArguments p = given({"hysteresis"});
    p.precision = precision;
    const std::string want =
        "TrainingArguments::hysteresis sets fp16's loss scaling; this run trains in " +
        std::string(precision);
    CHECK_THROWS_WITH_AS(check_loss_scale_arguments(p), doctest::Contains(want.c_str()), Error);
  }
  TrainingArguments ds = given({"loss_scale"});
  ds.loss_scale.loss_scale = 64;
  apply_deepspeed_config(ds, {{"fp16", {{"enabled", true}}}}, "ds.json", 2);
  CHECK_NOTHROW(check_loss_scale_arguments(ds));
  CHECK(ds.loss_scale.loss_scale == 64);
}

TEST_CASE("batch sizes: two of the three give the third; all three must agree") {
  const auto shape = [](TrainingArguments a, const json& c, std::int64_t world) {
    apply_deepspeed_config(a, c, "ds.json", world);
    return batch_shape(a, world, 1);
  };
  auto b = shape({}, {{"train_batch_size", 32}, {"train_micro_batch_size_per_gpu", 4}}, 2);
  CHECK(b.rows == 32);
  CHECK(b.micro_rows == 4);
  CHECK(b.accumulation == 4);
  b = shape({}, {{"train_micro_batch_size_per_gpu", 2}, {"gradient_accumulation_steps", 3}}, 2);
  CHECK(b.rows == 12);
  b = shape({}, {{"train_batch_size", 8}}, 2);  // alone: no accumulation
  CHECK(b.micro_rows == 4);
  CHECK(b.accumulation == 1);
  TrainingArguments acc = given({"gradient_accumulation_steps"});
  acc.gradient_accumulation_steps = 2;
  b = shape(acc,
            {{"train_batch_size", "auto"},
             {"train_micro_batch_size_per_gpu", 4},
             {"gradient_accumulation_steps", "auto"}},
            2);
  CHECK(b.rows == 16);
  CHECK(contains(refusal({}, {{"train_batch_size", 30},
                              {"train_micro_batch_size_per_gpu", 4},
                              {"gradient_accumulation_steps", 2}}),
                 "train_batch_size 30 is not train_micro_batch_size_per_gpu 4 x "
                 "gradient_accumulation_steps 2 x 2 data-parallel rank(s)"));
  TrainingArguments rows = given({"train_batch_size"});
  rows.train_batch_size = 8;
  CHECK(contains(refusal(rows, {{"train_batch_size", 16}}),
                 "train_batch_size=16: the arguments give TrainingArguments::train_batch_size 8"));
  // The data degree of the batch keys is what the launch leaves over tensor x pipeline.
  TrainingArguments tp = given({"tensor_parallel"});
  tp.plan.layout.tensor = 2;
  apply_deepspeed_config(
      tp, {{"train_micro_batch_size_per_gpu", 2}, {"gradient_accumulation_steps", 1}}, "ds.json",
      8);
  CHECK(tp.train_batch_size == 2 * 1 * 4);
  CHECK(batch_shape(tp, 4, 1).rows == 8);
}

TEST_CASE("the batch of TrainingArguments: global = micro x accumulation x data ranks") {
  TrainingArguments a = given({"gradient_accumulation_steps"});
  a.gradient_accumulation_steps = 4;
  auto b = batch_shape(a, 2, 1);
  CHECK(b.rows == 16);
  CHECK(b.micro_rows == 2);
  CHECK(b.accumulation == 4);
  TrainingArguments m;
  m.per_device_train_batch_size = 3;
  m.gradient_accumulation_steps = 2;
  CHECK(batch_shape(m, 2, 1).rows == 12);
  b = batch_shape(TrainingArguments{}, 1, 2);  // a pipeline: micro-batches of a quarter
  CHECK(b.micro_rows == 4);
  CHECK(b.accumulation == 4);
  a.gradient_accumulation_steps = 3;
  CHECK_THROWS_WITH_AS(
      batch_shape(a, 2, 1),
      doctest::Contains("TrainingArguments::gradient_accumulation_steps 3 does not divide"), Error);
  TrainingArguments all = given({"train_batch_size"});
  all.train_batch_size = 10;
  all.per_device_train_batch_size = 2;
  all.gradient_accumulation_steps = 2;
  CHECK_THROWS_WITH_AS(batch_shape(all, 2, 1),
                       doctest::Contains("TrainingArguments::train_batch_size 10 is not "
                                         "TrainingArguments::per_device_train_batch_size 2 x "
                                         "TrainingArguments::gradient_accumulation_steps 2 x 2"),
                       Error);
  TrainingArguments odd;
  odd.train_batch_size = 16;
  CHECK_THROWS_WITH_AS(
      batch_shape(odd, 3, 1),
      doctest::Contains("TrainingArguments::train_batch_size 16 is not a multiple of the "
                        "data-parallel degree 3"),
      Error);
}

TEST_CASE("DeepSpeed's schedules through the arguments: the rates of their formulas") {
  TrainingArguments a;
  apply_deepspeed_config(a,
                         {{"scheduler",
                           {{"type", "WarmupDecayLR"},
                            {"params",
                             {{"warmup_min_lr", 1e-5},
                              {"warmup_max_lr", 1e-3},
                              {"warmup_num_steps", 10},
                              {"total_num_steps", 50},
                              {"warmup_type", "linear"}}}}}},
                         "ds.json", 2);
  const LrSchedule s = lr_schedule(a, 40);
  for (int step : {0, 3, 9, 10, 25, 49, 50, 60}) {
    CAPTURE(step);
    // DeepSpeed: min + (max - min) * gamma; gamma = step / warmup, then
    // max(0, (total - step) / (total - warmup)).
    const double gamma = step < 10 ? step / 10.0 : std::max(0.0, (50.0 - step) / 40.0);
    CHECK(s.at(step) == doctest::Approx(1e-5 + (1e-3 - 1e-5) * gamma));
  }
  const TrainOptions to = train_options(a, 40, {16, 8, 1});
  CHECK(to.schedule.peak == 1e-3);
  CHECK(to.schedule.total == 50);
  CHECK(to.micro_batch_rows == 8);
  TrainingArguments w;
  apply_deepspeed_config(
      w, {{"scheduler", {{"type", "WarmupLR"}, {"params", {{"warmup_num_steps", 8}}}}}}, "ds.json",
      2);
  const LrSchedule l = lr_schedule(w, 100);
  CHECK(l.at(3) == doctest::Approx(w.learning_rate * std::log(4.0) / std::log(8.0)));
  CHECK(l.at(50) == w.learning_rate);
  TrainingArguments ratio = given({"warmup_ratio"});
  CHECK(contains(refusal(ratio, {{"scheduler",
                                  {{"type", "WarmupLR"}, {"params", {{"warmup_num_steps", 8}}}}}}),
                 "warmup_num_steps=8: the arguments give TrainingArguments::warmup_ratio"));
  CHECK(contains(
      refusal({}, {{"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 1e-4}}}}},
                   {"scheduler", {{"type", "WarmupLR"}, {"params", {{"warmup_max_lr", 1e-3}}}}}}),
      "warmup_max_lr=0.001: optimizer.params.lr is 0.0001"));
  CHECK(total_steps(TrainingArguments{}, 10) == 30);  // 3 epochs of 10
  TrainingArguments steps;
  steps.max_steps = 7;
  CHECK(total_steps(steps, 10) == 7);
}

}  // namespace deepspeed_test

TEST_CASE("a key given twice in one object is refused naming its path, as DeepSpeed refuses it") {
  using detail::parse_json_unique_keys;
  CHECK_THROWS_WITH_AS(
      parse_json_unique_keys(R"({"fp16": {"enabled": true, "enabled": false}})", "ds.json"),
      "ds.json: key 'fp16.enabled' appears twice in one object; expected each key once", Error);
  CHECK_THROWS_WITH_AS(
      parse_json_unique_keys(R"({"train_batch_size": 8, "fp16": {}, "train_batch_size": 16})",
                             "ds.json"),
      doctest::Contains("key 'train_batch_size' appears twice"), Error);
  // The same key in sibling objects, or in the objects of an array, is not a repeat.
  const auto j = parse_json_unique_keys(
      R"({"a": {"x": 1}, "b": {"x": 2, "c": [{"y": 1}, {"y": 2}]}})", "ds.json");
  CHECK(j["b"]["c"][1]["y"] == 2);
  CHECK_THROWS_WITH_AS(parse_json_unique_keys(R"({"a": })", "ds.json"),
                       doctest::Contains("ds.json: not valid JSON"), Error);
}

// seqgpt_ner's --deepspeed: our users' guide's ds_config.json (SEQPAR_DATA_DIR/deepspeed,
// skipped where absent) mapped onto the options; "auto" from the command line; keys that
// would change the training refused by name; the batch as micro x accumulation x ranks;
// DeepSpeed's schedules. --device and --precision: what a build with and without CUDA
// accepts, which plans and communicators --device cuda gets.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "deepspeed_config.hpp"
#include "device_launch.hpp"
#include "options.hpp"
#include "train_controls.hpp"

#ifndef SEQPAR_DATA_DIR
#define SEQPAR_DATA_DIR ""
#endif

using nlohmann::json;

namespace {

ner::Options parse(std::vector<std::string> args) {
  args.insert(args.begin(), "seqgpt_ner");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return ner::parse_options(static_cast<int>(argv.size()), argv.data());
}

bool has(const std::vector<std::string>& v, const std::string& prefix) {
  for (const auto& s : v)
    if (s.starts_with(prefix)) return true;
  return false;
}

// The message of the seqpar::Error that applying `config` throws ("" when none).
std::string refusal(ner::Options o, const json& config, std::int64_t world = 2) {
  try {
    ner::apply_deepspeed_config(o, config, "ds.json", world);
  } catch (const seqpar::Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

const std::filesystem::path guide_config =
    std::filesystem::path(SEQPAR_DATA_DIR) / "deepspeed" / "zero3_offload.json";

}  // namespace

TEST_CASE(
    "the users' guide's zero3_offload.json: ZeRO-3 over all ranks, both offloads, auto from the "
    "command line") {
  if (std::string(SEQPAR_DATA_DIR).empty() || !std::filesystem::exists(guide_config)) {
    MESSAGE(
        "skipped: no SEQPAR_DATA_DIR/deepspeed/zero3_offload.json (configure with "
        "-DSEQPAR_DATA_DIR=...)");
    return;
  }
  // The guide's TrainingArguments: per-device batch 4, accumulation 4, lr 2e-5, warmup 0.1.
  ner::Options o =
      parse({"--deepspeed", guide_config.string(), "--micro-batch", "4",
             "--gradient-accumulation-steps", "4", "--lr", "2e-5", "--warmup-ratio", "0.1"});
  const ner::DeepSpeedReport r = ner::apply_deepspeed_file(o, 2);
  CHECK(o.plan == "zero3x2");
  CHECK(o.offload == "optimizer+params");
  CHECK(o.precision == "fp32");  // fp16.enabled "auto" and no --precision fp16
  CHECK(o.lr == 2e-5);
  CHECK(o.adam_beta1 == 0.9);
  CHECK(o.adam_beta2 == 0.999);
  CHECK(o.adam_epsilon == 1e-8);
  CHECK(o.weight_decay == 0.01);                         // "auto": the example's default
  CHECK(o.max_grad_norm == 1.0);                         // gradient_clipping "auto"
  CHECK(o.lr_scheduler_type == "constant_with_warmup");  // WarmupLR
  CHECK(o.warmup_type == "log");                         // DeepSpeed's default warmup_type
  CHECK(o.warmup_min_lr == 0.0);
  CHECK(o.warmup_steps == -1);            // "auto": --warmup-ratio of the run's steps
  CHECK(o.loss_scale.loss_scale == 0.0);  // dynamic
  CHECK(o.loss_scale.loss_scale_window == 1000);
  CHECK(o.loss_scale.hysteresis == 2);
  CHECK(o.loss_scale.min_loss_scale == 1.0);
  CHECK(o.loss_scale.initial_scale_power == 16);  // absent: DeepSpeed's default
  // The batch: 4 rows x 4 micro-batches x 2 data ranks, as the Trainer computes it.
  const ner::BatchShape b = ner::batch_shape(o, 2, 1);
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
  CHECK(has(r.applied, "zero_optimization.stage=3 -> --plan zero3x2"));
  // The guide launches 4 GPUs: ZeRO-3 over all 4 ranks.
  ner::Options four = parse({"--deepspeed", guide_config.string()});
  const ner::DeepSpeedReport r4 = ner::apply_deepspeed_file(four, 4);
  CHECK(four.plan == "zero3x4");
  CHECK(has(r4.applied, "zero_optimization.stage=3 -> --plan zero3x4"));
  // Over 8 ranks it is a plan this build does not have: refused, the plan named.
  ner::Options eight = parse({"--deepspeed", guide_config.string()});
  try {
    ner::apply_deepspeed_file(eight, 8);
    FAIL("ZeRO-3 over 8 ranks should be refused");
  } catch (const seqpar::Error& e) {
    CHECK(contains(e.what(), "zero_optimization.stage=3"));
    CHECK(contains(e.what(), "'zero3x8'"));
  }
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
  const std::string m = refusal(ner::Options{}, config);
  CAPTURE(m);
  CHECK(contains(m, "ds.json: 7 key(s)"));
  CHECK(contains(m, "optimizer.type=\"Lamb\""));
  CHECK(contains(m, "zero_optimization.offload_param"));
  CHECK(contains(m, "stage 3 only"));
  CHECK(contains(m, "fp16.auto_cast=true"));
  CHECK(contains(m, "prescale_gradients=true"));
  CHECK(contains(m, "amp={\"enabled\":true}"));
  CHECK(contains(m, "scheduler.type=\"OneCycle\""));
  CHECK(contains(m, "zero_optimisation="));
  CHECK(!contains(m, "steps_per_print"));
  // Unknown keys inside known blocks too, and values of the wrong type.
  CHECK(contains(refusal(ner::Options{}, {{"zero_optimization", {{"stage", 3}, {"stage4", 1}}}}),
                 "zero_optimization.stage4=1: not a key of zero_optimization"));
  CHECK(contains(refusal(ner::Options{}, {{"gradient_clipping", "one"}}),
                 "gradient_clipping=\"one\": expected a number or \"auto\""));
  CHECK(contains(refusal(ner::Options{},
                         {{"zero_optimization", {{"offload_optimizer", {{"device", "nvme"}}}}}}),
                 "offload_optimizer.device=\"nvme\""));
  CHECK(contains(
      refusal(ner::Options{}, {{"fp16", {{"enabled", true}}}, {"bf16", {{"enabled", true}}}}),
      "both true"));
  CHECK(refusal(ner::Options{}, json::array()).find("a JSON object") != std::string::npos);
}

TEST_CASE(
    "an explicit value replaces a default but must agree with the command line; \"auto\" takes "
    "it") {
  const json config = {
      {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 3e-5}, {"betas", {0.8, 0.95}}}}}},
      {"gradient_clipping", 0.5}};
  ner::Options o;
  ner::apply_deepspeed_config(o, config, "ds.json", 2);
  CHECK(o.lr == 3e-5);
  CHECK(o.adam_beta1 == 0.8);
  CHECK(o.adam_beta2 == 0.95);
  CHECK(o.max_grad_norm == 0.5);
  CHECK(o.plan == "dp2");  // no zero_optimization: stage 0 over the 2 ranks
  const std::string m = refusal(parse({"--lr", "1e-4", "--max-grad-norm", "0.5"}), config);
  CHECK(contains(m, "optimizer.params.lr=3e-05: the command line gives --lr 0.0001"));
  CHECK(!contains(m, "gradient_clipping"));  // agrees with --max-grad-norm
  ner::Options a = parse({"--lr", "1e-4"});
  ner::apply_deepspeed_config(a, {{"optimizer", {{"type", "adam"}, {"params", {{"lr", "auto"}}}}}},
                              "ds.json", 2);
  CHECK(a.lr == 1e-4);
  // The plan: given on the command line it must have the stage; else the stage's over all ranks.
  CHECK(contains(refusal(parse({"--plan", "dp2"}), {{"zero_optimization", {{"stage", 3}}}}),
                 "the command line gives --plan dp2 (ZeRO stage 0)"));
  ner::Options z = parse({"--plan", "zero2x2"});
  ner::apply_deepspeed_config(z, {{"zero_optimization", {{"stage", 2}}}}, "ds.json", 2);
  CHECK(z.plan == "zero2x2");
  ner::Options one;
  ner::apply_deepspeed_config(one, {{"zero_optimization", {{"stage", 3}}}}, "ds.json", 1);
  CHECK(one.plan == "single");
  ner::Options off;
  ner::apply_deepspeed_config(
      off, {{"zero_optimization", {{"stage", 1}, {"offload_optimizer", {{"device", "cpu"}}}}}},
      "ds.json", 2);
  CHECK(off.plan == "zero1x2");
  CHECK(off.offload == "optimizer");
}

TEST_CASE("precision: fp16 / bf16 blocks, loss scaling fields, and the CPU's fp32") {
  ner::Options o;
  ner::apply_deepspeed_config(o,
                              {{"fp16",
                                {{"enabled", true},
                                 {"loss_scale", 0},
                                 {"initial_scale_power", 12},
                                 {"loss_scale_window", 500},
                                 {"hysteresis", 3},
                                 {"consecutive_hysteresis", true},
                                 {"min_loss_scale", 0.5}}}},
                              "ds.json", 2);
  CHECK(o.precision == "fp16");
  CHECK(o.loss_scale.initial_scale_power == 12);
  CHECK(o.loss_scale.loss_scale_window == 500);
  CHECK(o.loss_scale.hysteresis == 3);
  CHECK(o.loss_scale.consecutive_hysteresis);
  CHECK(o.loss_scale.min_loss_scale == 0.5);
  try {
    ner::check_precision_device(o, "cpu");
    FAIL("fp16 on the CPU should be refused");
  } catch (const seqpar::Error& e) {
    CHECK(contains(e.what(), "precision fp16"));
    CHECK(contains(e.what(), "needs --device cuda"));
  }
  CHECK_NOTHROW(ner::check_precision_device(o, "cuda"));
  ner::Options b;
  ner::apply_deepspeed_config(b, {{"bf16", {{"enabled", "auto"}}}}, "ds.json", 2);
  CHECK(b.precision == "fp32");
  ner::apply_deepspeed_config(b, {{"bf16", {{"enabled", true}}}}, "ds.json", 2);
  CHECK(b.precision == "bf16");
  CHECK_NOTHROW(ner::check_precision_device(ner::Options{}, "cpu"));
}

TEST_CASE("batch sizes: two of the three give the third; all three must agree") {
  const auto shape = [](ner::Options o, const json& c, std::int64_t world) {
    ner::apply_deepspeed_config(o, c, "ds.json", world);
    return ner::batch_shape(o, world, 1);
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
  b = shape(parse({"--gradient-accumulation-steps", "2"}),
            {{"train_batch_size", "auto"},
             {"train_micro_batch_size_per_gpu", 4},
             {"gradient_accumulation_steps", "auto"}},
            2);
  CHECK(b.rows == 16);
  const std::string m = refusal(ner::Options{}, {{"train_batch_size", 30},
                                                 {"train_micro_batch_size_per_gpu", 4},
                                                 {"gradient_accumulation_steps", 2}});
  CHECK(contains(m,
                 "train_batch_size 30 is not train_micro_batch_size_per_gpu 4 x "
                 "gradient_accumulation_steps 2 x 2 data-parallel rank(s)"));
  CHECK(contains(refusal(parse({"--batch", "8"}), {{"train_batch_size", 16}}),
                 "train_batch_size=16: the command line gives --batch 8"));
}

TEST_CASE(
    "--gradient-accumulation-steps and --micro-batch: global batch = micro x accumulation x data "
    "ranks") {
  auto b = ner::batch_shape(parse({"--batch", "16", "--gradient-accumulation-steps", "4"}), 2, 1);
  CHECK(b.rows == 16);
  CHECK(b.micro_rows == 2);
  CHECK(b.accumulation == 4);
  b = ner::batch_shape(parse({"--micro-batch", "3", "--gradient-accumulation-steps", "2"}), 2, 1);
  CHECK(b.rows == 12);  // --batch not given: the product
  b = ner::batch_shape(parse({}), 2, 1);
  CHECK(b.rows == 16);
  CHECK(b.micro_rows == 8);
  CHECK(b.accumulation == 1);
  b = ner::batch_shape(parse({}), 1, 2);  // a pipeline: micro-batches of a quarter
  CHECK(b.micro_rows == 4);
  CHECK(b.accumulation == 4);
  CHECK_THROWS_WITH_AS(
      ner::batch_shape(parse({"--batch", "16", "--gradient-accumulation-steps", "3"}), 2, 1),
      doctest::Contains("--gradient-accumulation-steps 3"), seqpar::Error);
  CHECK_THROWS_WITH_AS(
      ner::batch_shape(
          parse({"--batch", "10", "--micro-batch", "2", "--gradient-accumulation-steps", "2"}), 2,
          1),
      doctest::Contains("--batch 10 is not --micro-batch 2 x --gradient-accumulation-steps 2 x 2"),
      seqpar::Error);
  // The aliases name one option.
  const ner::Options a = parse({"--save-every", "5", "--eval-every", "7", "--max-tokens", "64"});
  const ner::Options h = parse({"--save-steps", "5", "--eval-steps", "7", "--max-length", "64"});
  CHECK(a.save_every == h.save_every);
  CHECK(a.eval_every == h.eval_every);
  CHECK(a.max_tokens == h.max_tokens);
  CHECK(a.given == h.given);
}

TEST_CASE("DeepSpeed's WarmupDecayLR through the options: the rates of its formula") {
  ner::Options o;
  ner::apply_deepspeed_config(o,
                              {{"scheduler",
                                {{"type", "WarmupDecayLR"},
                                 {"params",
                                  {{"warmup_min_lr", 1e-5},
                                   {"warmup_max_lr", 1e-3},
                                   {"warmup_num_steps", 10},
                                   {"total_num_steps", 50},
                                   {"warmup_type", "linear"}}}}}},
                              "ds.json", 2);
  const seqpar::LrSchedule s = ner::lr_schedule(o, 40);
  for (int step : {0, 3, 9, 10, 25, 49, 50, 60}) {
    CAPTURE(step);
    // DeepSpeed: min + (max - min) * gamma; gamma = step / warmup, then
    // max(0, (total - step) / (total - warmup)).
    const double gamma = step < 10 ? step / 10.0 : std::max(0.0, (50.0 - step) / 40.0);
    CHECK(s.at(step) == doctest::Approx(1e-5 + (1e-3 - 1e-5) * gamma));
  }
  ner::Options w;
  ner::apply_deepspeed_config(
      w, {{"scheduler", {{"type", "WarmupLR"}, {"params", {{"warmup_num_steps", 8}}}}}}, "ds.json",
      2);
  const seqpar::LrSchedule l = ner::lr_schedule(w, 100);
  CHECK(l.at(3) == doctest::Approx(w.lr * std::log(4.0) / std::log(8.0)));  // log warmup
  CHECK(l.at(50) == w.lr);                                                  // then constant
  CHECK(contains(
      refusal(parse({"--warmup-ratio", "0.1"}),
              {{"scheduler", {{"type", "WarmupLR"}, {"params", {{"warmup_num_steps", 8}}}}}}),
      "warmup_num_steps=8: the command line gives --warmup-ratio"));
  CHECK(contains(
      refusal(ner::Options{},
              {{"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 1e-4}}}}},
               {"scheduler", {{"type", "WarmupLR"}, {"params", {{"warmup_max_lr", 1e-3}}}}}}),
      "warmup_max_lr=0.001: optimizer.params.lr is 0.0001"));
}

namespace {

// The message of the seqpar::Error that check_device throws ("" when none).
std::string device_refusal(const ner::Options& o, bool with_cuda) {
  try {
    ner::check_device(o, with_cuda);
  } catch (const seqpar::Error& e) {
    return e.what();
  }
  return "";
}

// The message of the std::invalid_argument that parsing throws ("" when none).
std::string parse_refusal(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("--device and --precision: parsed, and anything else refused by name") {
  const ner::Options d = parse({});
  CHECK(d.device == "cpu");
  CHECK(d.precision == "fp32");
  const ner::Options o = parse({"--device", "cuda", "--precision", "bf16"});
  CHECK(o.device == "cuda");
  CHECK(o.precision == "bf16");
  CHECK(o.given.contains("--precision"));
  CHECK(parse({"--precision", "fp16"}).precision == "fp16");
  CHECK(contains(parse_refusal({"--device", "gpu"}), "--device is 'gpu'; expected cpu or cuda"));
  CHECK(contains(parse_refusal({"--precision", "fp8"}),
                 "--precision is 'fp8'; expected fp32, bf16 or fp16"));
  CHECK(contains(parse_refusal({"--device"}), "--device needs a value"));
}

TEST_CASE("loss scaling from the command line: DeepSpeed's fields, checked, fp16 only") {
  const ner::Options d = parse({});
  CHECK(d.loss_scale.loss_scale == 0);  // DeepSpeed's defaults
  CHECK(d.loss_scale.initial_scale_power == 16);
  CHECK(d.loss_scale.loss_scale_window == 1000);
  CHECK(d.loss_scale.hysteresis == 2);
  CHECK_FALSE(d.loss_scale.consecutive_hysteresis);
  CHECK(d.loss_scale.min_loss_scale == 1);
  ner::Options o = parse({"--device", "cuda", "--precision", "fp16", "--initial-scale-power", "12",
                          "--loss-scale-window", "500", "--hysteresis", "3",
                          "--consecutive-hysteresis", "--min-loss-scale", "0.5"});
  CHECK(o.loss_scale.initial_scale_power == 12);
  CHECK(o.loss_scale.loss_scale_window == 500);
  CHECK(o.loss_scale.hysteresis == 3);
  CHECK(o.loss_scale.consecutive_hysteresis);
  CHECK(o.loss_scale.min_loss_scale == 0.5);
  CHECK_NOTHROW(ner::check_loss_scale_flags(o));
  CHECK(parse({"--loss-scale", "128"}).loss_scale.loss_scale == 128);
  // A DeepSpeed value that disagrees with the flag is refused; "auto" takes the flag's.
  CHECK(contains(refusal(o, {{"fp16", {{"enabled", true}, {"hysteresis", 4}}}}),
                 "the command line gives --hysteresis 3"));
  ner::apply_deepspeed_config(o, {{"fp16", {{"enabled", true}, {"hysteresis", "auto"}}}}, "ds.json",
                              2);
  CHECK(o.loss_scale.hysteresis == 3);
  CHECK(contains(parse_refusal({"--hysteresis", "0"}), "--hysteresis must be positive"));
  CHECK(contains(parse_refusal({"--loss-scale-window", "0"}), "--loss-scale-window must be"));
  CHECK(contains(parse_refusal({"--min-loss-scale", "0"}), "--min-loss-scale must be above 0"));
  CHECK(contains(parse_refusal({"--initial-scale-power", "1001"}), "at most 1000"));
  CHECK(contains(parse_refusal({"--loss-scale", "-1"}), "--loss-scale expects a finite"));
  // fp32 and bf16 scale no loss: the flags are refused there, naming the flag.
  for (const char* precision : {"fp32", "bf16"}) {
    const ner::Options p = parse({"--precision", precision, "--hysteresis", "3"});
    try {
      ner::check_loss_scale_flags(p);
      FAIL("--hysteresis without fp16 should be refused");
    } catch (const seqpar::Error& e) {
      CHECK(contains(e.what(), "--hysteresis sets fp16's loss scaling"));
      CHECK(contains(e.what(), std::string("this run trains in ") + precision));
    }
  }
  // The precision a DeepSpeed configuration sets counts.
  ner::Options ds = parse({"--device", "cuda", "--loss-scale", "64"});
  CHECK_THROWS_AS(ner::check_loss_scale_flags(ds), seqpar::Error);
  ner::apply_deepspeed_config(ds, {{"fp16", {{"enabled", true}}}}, "ds.json", 2);
  CHECK_NOTHROW(ner::check_loss_scale_flags(ds));
  CHECK(ds.loss_scale.loss_scale == 64);
}

TEST_CASE("--device cuda: refused by a build without CUDA, and for plans the CUDA units lack") {
  ner::Options o = parse({"--device", "cuda", "--plan", "zero3x4"});
  const std::string no_cuda = device_refusal(o, false);
  CHECK(contains(no_cuda, "--device cuda: this seqgpt_ner was built without CUDA"));
  CHECK(contains(no_cuda, "--device cpu"));
  CHECK(device_refusal(o, true).empty());
  // The CPU keeps every plan; the CUDA units hold a few, and say which.
  o.plan = "pp2";
  const std::string pp2 = device_refusal(o, true);
  CHECK(contains(pp2, "--plan pp2 is not built for --device cuda"));
  CHECK(contains(pp2, "single dp2 dp4 zero3x2 zero3x4 tp2"));
  o.command = "eval";  // eval and predict take no plan
  CHECK(device_refusal(o, true).empty());
  CHECK(device_refusal(parse({"--plan", "pp2"}), false).empty());
  CHECK(ner::built_with_cuda == false);  // this test is compiled without SEQPAR_NER_WITH_CUDA
}

TEST_CASE(
    "a DeepSpeed bf16 block: --precision bf16, accepted with --device cuda, refused on the CPU") {
  ner::Options o = parse({"--device", "cuda"});
  ner::apply_deepspeed_config(o, {{"bf16", {{"enabled", true}}}}, "ds.json", 2);
  CHECK(o.precision == "bf16");
  CHECK_NOTHROW(ner::check_precision_device(o, o.device));
  CHECK(device_refusal(o, true).empty());
  CHECK(contains(device_refusal(o, false), "built without CUDA"));
  ner::Options cpu = parse({});
  cpu.deepspeed = "ds.json";
  ner::apply_deepspeed_config(cpu, {{"bf16", {{"enabled", true}}}}, "ds.json", 2);
  try {
    ner::check_precision_device(cpu, cpu.device);
    FAIL("bf16 on the CPU should be refused");
  } catch (const seqpar::Error& e) {
    CHECK(contains(e.what(), "precision bf16 (from ds.json or --precision) needs --device cuda"));
  }
  // The command line and the file must agree; "auto" takes the command line's.
  ner::Options given = parse({"--device", "cuda", "--precision", "bf16"});
  CHECK(contains(refusal(given, {{"fp16", {{"enabled", true}}}}),
                 "the command line gives --precision bf16"));
  ner::apply_deepspeed_config(given, {{"bf16", {{"enabled", "auto"}}}}, "ds.json", 2);
  CHECK(given.precision == "bf16");
}

TEST_CASE("CudaPlans are plans of plans.hpp, by name and type") {
  int plans = 0;
  ner::CudaPlans::each([&](auto cuda) {
    ++plans;
    bool same = false;
    const bool found = ner::with_plan(cuda.name, [&](auto plan) {
      same = std::is_same_v<typename decltype(plan)::type, typename decltype(cuda)::type> &&
             plan.spelled == cuda.spelled;
    });
    CHECK_MESSAGE(found, cuda.name);
    CHECK_MESSAGE(same, cuda.name);
  });
  CHECK(plans == 6);
  CHECK(ner::plan_world_size("zero3x4") == 4);
}

TEST_CASE("the communicator of a launch: threads or processes, CPU or GPU") {
  using ner::RankComm;
  CHECK(ner::rank_comm("cpu", false) == RankComm::thread);
  CHECK(ner::rank_comm("cpu", true) == RankComm::mpi);
  CHECK(ner::rank_comm("cuda", false) == RankComm::cuda_thread);
  CHECK(ner::rank_comm("cuda", true) == RankComm::nccl);
  CHECK(std::string(ner::rank_comm_name(RankComm::nccl)) == "NcclComm");
  CHECK(std::string(ner::rank_comm_name(RankComm::cuda_thread)) == "CudaThreadComm");
}

TEST_CASE("NCCL under mpirun: a node with more processes than GPUs is refused with both counts") {
  // 2 nodes of 4 processes; the second has 2 GPUs.
  std::vector<ner::NodeGpus> ranks;
  for (std::int64_t r = 0; r < 8; ++r) ranks.push_back({r, 4, r < 4 ? 4 : 2});
  const std::string why = ner::gpu_shortage(ranks, "mpirun");
  CHECK(contains(why,
                 "--device cuda under mpirun: the node of rank 4 runs 4 processes of this "
                 "job but has 2 GPUs"));
  CHECK(contains(why, "start at most 2 per node"));
  CHECK(contains(why, "CudaThreadComm"));
  for (auto& r : ranks) r.gpus = 4;
  CHECK(ner::gpu_shortage(ranks, "mpirun").empty());
  ranks[0].gpus = 1;
  CHECK(contains(ner::gpu_shortage(ranks, "srun"), "has 1 GPU;"));
  ranks[0].gpus = 0;
  CHECK(contains(ner::gpu_shortage(ranks, "srun"), "rank 0 sees no CUDA GPU"));
}

// seqpar-plan: before launch, which plans fit a BLOOM model on N GPUs of M GB (or N CPU
// ranks), what each holds per rank by category, what offload needs on the host, the largest
// micro-batch that fits, and a step time from stated assumptions. The figures are the planner's
// (include/seqpar/plan/): exact for the arena's categories on a synchronous communicator,
// see docs/memory.md. --shapes: every published BLOOM shape on each GPU it knows. Plans are named
// as seqgpt_ner takes them (plan/registry.hpp: tp2dp4, or --zero-stage 0 --tensor-parallel 2), and
// only those it can launch are offered (seqpar::StandardPlans) unless --all asks for every plan the
// planner models.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "seqpar/core/error.hpp"
#include "seqpar/io/hf_config.hpp"
#include "seqpar/plan/plan_desc.hpp"
#include "seqpar/plan/plan_rules.hpp"
#include "seqpar/plan/predict.hpp"
#include "seqpar/plan/registry.hpp"
#include "seqpar/plan/step_time.hpp"

namespace {
using namespace seqpar;

constexpr const char* kUsage = R"(usage: seqpar-plan [options]

Every parallel plan of --gpus GPUs (or --device cpu: --ranks CPU ranks) that seqgpt_ner can
launch for a BLOOM model (SeqGPT-560M unless --model or --config), named as it takes them
(--plan tp2dp4, or the flags --zero-stage, --tensor-parallel, --pipeline-parallel), with its
predicted memory per rank by category, the host memory offload needs, the largest
micro-batch that fits and a predicted step time. --shapes: for every published BLOOM shape
on each GPU below, the fastest plan that fits and its memory and step time.

  --model NAME           a published shape: bloom-560m (SeqGPT-560M's), bloom-1b1,
                         bloom-1b7, bloom-3b, bloom-7b1 (bloomz-* are the same shapes)
  --config PATH          a Hugging Face BLOOM config.json (default: SeqGPT-560M)
  --shapes               every published shape on --gpus GPUs of each preset of --gpu
                         (on --ranks CPU ranks with --device cpu), one line a shape
  --device D             gpu | cpu (default gpu). cpu: a rank's device memory is the host's,
                         so its device and host bytes share --memory-gb; the CPU's logits
                         budget (1 GiB); no reserve; rates of the cpu preset (docs/cpu.md)
  --gpus N, --ranks N    number of GPUs, or of CPU ranks (default 1)
  --gpu NAME             preset: h200 h100 a100-40 a100-80 rtx4090 rtx3090 (default h200);
                         sets the memory and every rate below, which flags after it override
  --gpu-memory-gb M      usable memory per GPU, GiB (2^30 bytes); --memory-gb M: per rank
  --reserve-gb R         kept back for the CUDA context, cuBLAS and NCCL (default 1; cpu 0)
  --precision P          fp32 | bf16 | fp16 (default bf16: 16-bit weights, fp32 master)
  --seq S                tokens per row (default 512)
  --micro-batch B        rows per micro-batch (default 1)
  --micro-batches M      micro-batches per data rank per step (default 1; 4 x stages
                         under a pipeline)
  --recompute R          none | selective | full (default none)
  --recompute-every K    under full recomputation, every K-th block only (default 1: all)
  --attention A          standard | fused (default standard)
  --offload O            none | optimizer | optimizer+params (default none; parameters
                         are offloaded under ZeRO-3 only)
  --logits-mb L          the LM head's logits budget, MiB (default 256, as on Cuda; cpu 1024)
  --tflops F             dense 16-bit peak, TFLOP/s      --tflops-fp32 F   fp32 peak
  --efficiency E         fraction of the peak reached (default 0.4)
  --hbm-gbps G           device memory bandwidth, GB/s
  --link-gbps G          GPU-GPU bandwidth in a node per direction (NVLink, else PCIe)
  --network-gbps G       between nodes per GPU       --pcie-gbps G   host <-> device
  --host-gbps G          host memory bandwidth (host AdamW)
  --gpus-per-node K      (default 8)
  --sync                 a synchronous communicator (MpiComm): no gathers ahead
  --all                  every plan the planner models, also those seqgpt_ner does not compile
                         (marked: tensor degrees above 4, more than 2 pipeline stages)
  --json                 one JSON object instead of the table
  --help
)";

[[noreturn]] void usage_error(const std::string& what) {
  throw Error("seqpar-plan: " + what + " (see --help)");
}

double number(std::string_view flag, const std::string& v, double lo) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(x) || x < lo)
    usage_error(std::string(flag) + " takes a number of at least " + std::to_string(lo) +
                ", not '" + v + "'");
  return x;
}
std::int64_t integer(std::string_view flag, const std::string& v, std::int64_t lo) {
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < lo)
    usage_error(std::string(flag) + " takes a whole number of at least " + std::to_string(lo) +
                ", not '" + v + "'");
  return x;
}

struct Options {
  BloomConfig model = SeqGPT560M::config;
  std::string model_name = "SeqGPT-560M";
  int gpus = 1;
  Hardware hw = *hardware_preset("h200");
  bool cpu = false;
  double reserve_gib = -1;  // -1: the device's default
  PlanPrecision precision = PlanPrecision::bf16;
  std::string precision_name = "bf16";
  std::int64_t seq = 512, micro_batch = 1, micro_batches = 0;
  Recompute recompute = Recompute::none;
  std::string recompute_name = "none";
  std::int64_t recompute_every = 1;
  bool fused = false;
  Offload offload = Offload::none;
  std::string offload_name = "none";
  std::int64_t logits_mib = 0;  // 0: the device's default
  bool sync = false, json = false, all = false, shapes = false;
};

// A published shape by name; bloomz-<size> is bloom-<size>'s shape.
const PublishedBloom* published_by_name(std::string name) {
  if (name.rfind("bloomz-", 0) == 0) name.erase(5, 1);
  for (const PublishedBloom& b : published_blooms)
    if (b.name == name) return &b;
  return nullptr;
}

Options parse(int argc, char** argv) {
  Options o;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) usage_error(a + " needs a value");
      return args[++i];
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--sync") {
      o.sync = true;
    } else if (a == "--all") {
      o.all = true;
    } else if (a == "--shapes") {
      o.shapes = true;
    } else if (a == "--model") {
      const std::string& name = value();
      const PublishedBloom* b = published_by_name(name);
      if (!b)
        usage_error("--model '" + name +
                    "' is not bloom-560m, bloom-1b1, bloom-1b7, bloom-3b or bloom-7b1");
      o.model = b->config;
      o.model_name = name;
    } else if (a == "--config") {
      const std::string& path = value();
      o.model = read_bloom_config(path);
      o.model_name = path;
    } else if (a == "--device") {
      const std::string& v = value();
      if (v != "gpu" && v != "cpu") usage_error("--device '" + v + "' is not gpu or cpu");
      o.cpu = v == "cpu";
      o.hw = o.cpu ? cpu_hardware() : *hardware_preset("h200");
    } else if (a == "--gpus" || a == "--ranks") {
      o.gpus = static_cast<int>(integer(a, value(), 1));
      if (o.gpus > 4096) usage_error(a + " " + std::to_string(o.gpus) + " is more than 4096");
    } else if (a == "--gpu") {
      const std::string& name = value();
      const auto h = hardware_preset(name);
      if (!h)
        usage_error("--gpu '" + name + "' is not one of h200 h100 a100-40 a100-80 rtx4090 rtx3090");
      o.hw = *h;
    } else if (a == "--gpu-memory-gb" || a == "--memory-gb") {
      o.hw.memory_gib = number(a, value(), 0.001);
    } else if (a == "--reserve-gb") {
      o.reserve_gib = number(a, value(), 0);
    } else if (a == "--precision") {
      o.precision_name = value();
      if (o.precision_name == "fp32")
        o.precision = PlanPrecision::fp32;
      else if (o.precision_name == "bf16")
        o.precision = PlanPrecision::bf16;
      else if (o.precision_name == "fp16")
        o.precision = PlanPrecision::fp16;
      else
        usage_error("--precision '" + o.precision_name + "' is not fp32, bf16 or fp16");
    } else if (a == "--seq") {
      o.seq = integer(a, value(), 1);
    } else if (a == "--micro-batch") {
      o.micro_batch = integer(a, value(), 1);
    } else if (a == "--micro-batches") {
      o.micro_batches = integer(a, value(), 1);
    } else if (a == "--recompute") {
      o.recompute_name = value();
      if (o.recompute_name == "none")
        o.recompute = Recompute::none;
      else if (o.recompute_name == "selective")
        o.recompute = Recompute::selective;
      else if (o.recompute_name == "full")
        o.recompute = Recompute::full;
      else
        usage_error("--recompute '" + o.recompute_name + "' is not none, selective or full");
    } else if (a == "--recompute-every") {
      o.recompute_every = integer(a, value(), 1);
    } else if (a == "--attention") {
      const std::string& v = value();
      if (v != "standard" && v != "fused")
        usage_error("--attention '" + v + "' is not standard or fused");
      o.fused = v == "fused";
    } else if (a == "--offload") {
      o.offload_name = value();
      if (o.offload_name == "none")
        o.offload = Offload::none;
      else if (o.offload_name == "optimizer")
        o.offload = Offload::optimizer;
      else if (o.offload_name == "optimizer+params")
        o.offload = Offload::optimizer_and_params;
      else
        usage_error("--offload '" + o.offload_name +
                    "' is not none, optimizer or optimizer+params");
    } else if (a == "--logits-mb") {
      o.logits_mib = integer(a, value(), 1);
    } else if (a == "--tflops") {
      o.hw.tflops_16 = number(a, value(), 0.001);
    } else if (a == "--tflops-fp32") {
      o.hw.tflops_32 = number(a, value(), 0.001);
    } else if (a == "--efficiency") {
      o.hw.efficiency = number(a, value(), 0.001);
      if (o.hw.efficiency > 1) usage_error("--efficiency is a fraction of the peak, at most 1");
    } else if (a == "--hbm-gbps") {
      o.hw.hbm_gbps = number(a, value(), 0.001);
    } else if (a == "--link-gbps") {
      o.hw.link_gbps = number(a, value(), 0.001);
    } else if (a == "--network-gbps") {
      o.hw.network_gbps = number(a, value(), 0.001);
    } else if (a == "--pcie-gbps") {
      o.hw.pcie_gbps = number(a, value(), 0.001);
    } else if (a == "--host-gbps") {
      o.hw.host_gbps = number(a, value(), 0.001);
    } else if (a == "--gpus-per-node") {
      o.hw.gpus_per_node = static_cast<int>(integer(a, value(), 1));
    } else {
      usage_error("unknown option '" + a + "'");
    }
  }
  if (o.reserve_gib < 0) o.reserve_gib = o.cpu ? 0 : 1;
  if (o.logits_mib == 0) o.logits_mib = (o.cpu ? cpu_logits_budget : cuda_logits_budget) >> 20;
  return o;
}

struct Row {
  PlanDesc plan;
  bool launchable = false;  // compiled in seqpar::StandardPlans
  PlanQuery query;
  PlanPrediction pred;
  std::int64_t max_micro_batch = 0;
  double seconds = 0;
  bool fits = false;
};

double gib(std::int64_t b) { return static_cast<double>(b) / static_cast<double>(1ll << 30); }

// The layout flags seqgpt_ner takes for a layout (--zero-stage 0 --tensor-parallel 2 ...).
std::string launch_flags(const PlanDesc& p) {
  std::string flags;
  layout_fields(p, [&flags](std::string field, const std::string& value) {
    std::replace(field.begin(), field.end(), '_', '-');
    flags += (flags.empty() ? "--" : " --") + field + " " + value;
  });
  return flags;
}

// Bytes per rank a device may use: its memory less the reserve.
std::int64_t budget_bytes(const Options& o) {
  return static_cast<std::int64_t>((o.hw.memory_gib - o.reserve_gib) * (1ll << 30));
}

// The planner's question for plan p under the options.
PlanQuery query_of(const Options& o, const PlanDesc& p) {
  PlanQuery q;
  q.model = o.model;
  q.plan = p;
  q.precision = o.precision;
  q.micro_batch_rows = o.micro_batch;
  q.seq = o.seq;
  q.micro_batches = o.micro_batches > 0 ? o.micro_batches : (p.pipeline > 1 ? 4 * p.pipeline : 1);
  q.recompute = o.recompute;
  q.recompute_every = o.recompute_every;
  q.fused_attention = o.fused;
  q.offload = o.offload;
  q.logits_bytes = o.logits_mib << 20;
  q.asynchronous = !o.sync;
  return q;
}

// Every plan of the world the planner models (only the compiled ones unless --all), predicted.
std::vector<Row> plan_rows(const Options& o, std::int64_t budget) {
  std::vector<Row> rows;
  const std::vector<PlanDesc> compiled = StandardPlans::layouts();
  for (const PlanDesc& p : enumerate_plans(o.model, o.gpus)) {
    Row r;
    r.plan = p;
    r.launchable = layout_compiled(p, compiled);
    if (!r.launchable && !o.all) continue;
    r.query = query_of(o, p);
    r.pred = predict(r.query);
    r.max_micro_batch = max_micro_batch(r.query, budget, 1 << 16, o.cpu);
    r.seconds = step_seconds(r.query, r.pred, o.hw);
    r.fits = (o.cpu ? r.pred.worst_joint_peak() : r.pred.worst_device_peak()) <= budget;
    rows.push_back(std::move(r));
  }
  return rows;
}

// One plan's row as JSON.
nlohmann::json plan_json(const Row& r) {
  using nlohmann::json;
  json dev;
  for (std::size_t k = 0; k < memory_kinds; ++k) {
    const auto m = static_cast<Memory>(k);
    if (!host_memory(m)) dev[memory_name(m)] = r.pred.worst(m);
  }
  dev["total"] = r.pred.worst_device_peak();
  dev["joint"] = r.pred.worst_joint_peak();  // with the host's: a CPU rank's whole
  json host;
  host["host_optimizer"] = r.pred.worst(Memory::host_optimizer);
  host["host_parameters"] = r.pred.worst(Memory::host_parameters);
  std::uint64_t data = 0, tensor = 0, pipe = 0;
  for (const auto& rk : r.pred.ranks) {
    data = std::max<std::uint64_t>(data, rk.data.total_bytes_sent());
    tensor = std::max<std::uint64_t>(tensor, rk.tensor.total_bytes_sent());
    pipe = std::max<std::uint64_t>(pipe, rk.pipeline.total_bytes_sent());
  }
  const double tokens = static_cast<double>(r.query.micro_batch_rows * r.query.seq *
                                            r.query.micro_batches * r.plan.data);
  return {{"plan", r.plan.name()},
          {"name", plan_name(r.plan)},
          {"flags", launch_flags(r.plan)},
          {"launchable", r.launchable},
          {"data", r.plan.data},
          {"tensor", r.plan.tensor},
          {"pipeline", r.plan.pipeline},
          {"zero_stage", r.plan.zero_stage},
          {"micro_batches", r.query.micro_batches},
          {"device_bytes", dev},
          {"host_bytes", r.pred.worst_host_bytes()},
          {"host_bytes_by_category", host},
          {"bytes_sent_per_step", {{"data", data}, {"tensor", tensor}, {"pipeline", pipe}}},
          {"fits", r.fits},
          {"max_micro_batch", r.max_micro_batch},
          {"step_seconds", r.seconds},
          {"tokens_per_second", tokens / r.seconds}};
}

// The hardware as JSON.
nlohmann::json hardware_json(const Options& o, std::int64_t budget) {
  return {{"name", o.hw.name},
          {"memory_gib", o.hw.memory_gib},
          {"reserve_gib", o.reserve_gib},
          {"budget_bytes", budget},
          {"tflops_16", o.hw.tflops_16},
          {"tflops_32", o.hw.tflops_32},
          {"efficiency", o.hw.efficiency},
          {"hbm_gbps", o.hw.hbm_gbps},
          {"link_gbps", o.hw.link_gbps},
          {"network_gbps", o.hw.network_gbps},
          {"pcie_gbps", o.hw.pcie_gbps},
          {"host_gbps", o.hw.host_gbps},
          {"gpus_per_node", o.hw.gpus_per_node}};
}

// --json: the question and every row as one JSON object.
void print_json(const Options& o, std::int64_t budget, const std::vector<Row>& rows) {
  using nlohmann::json;
  json plans = json::array();
  for (const Row& r : rows) plans.push_back(plan_json(r));
  const json out = {{"model",
                     {{"name", o.model_name},
                      {"vocab_size", o.model.vocab_size},
                      {"hidden", o.model.hidden},
                      {"layers", o.model.layers},
                      {"heads", o.model.heads}}},
                    {"device", o.cpu ? "cpu" : "gpu"},
                    {"gpus", o.gpus},
                    {"gpu", hardware_json(o, budget)},
                    {"precision", o.precision_name},
                    {"seq", o.seq},
                    {"micro_batch", o.micro_batch},
                    {"recompute", o.recompute_name},
                    {"recompute_every", o.recompute_every},
                    {"attention", o.fused ? "fused" : "standard"},
                    {"offload", o.offload_name},
                    {"asynchronous", !o.sync},
                    {"plans", plans}};
  std::cout << out.dump(2) << "\n";
}

// The table's title lines and column heads.
void print_table_head(const Options& o, std::int64_t budget) {
  const std::string recompute =
      o.recompute == Recompute::full && o.recompute_every > 1
          ? o.recompute_name + " (every " + std::to_string(o.recompute_every) + ". block)"
          : o.recompute_name;
  std::printf(
      "%s on %d x %s (%.1f GiB, %.1f GiB usable), %s, %lld tokens a row, micro-batch %lld, "
      "recompute %s, offload %s\n",
      o.model_name.c_str(), o.gpus, o.cpu ? "CPU rank" : o.hw.name.c_str(), o.hw.memory_gib,
      gib(budget), o.precision_name.c_str(), static_cast<long long>(o.seq),
      static_cast<long long>(o.micro_batch), recompute.c_str(), o.offload_name.c_str());
  std::printf(
      "GiB per %s (the worst rank; categories peak at different moments, total is their "
      "joint peak%s)\n\n",
      o.cpu ? "rank" : "GPU", o.cpu ? ", the host's included: it is the same memory" : "");
  std::printf(
      "| plan | layout | m | params | grads | optim | acts | buffers | gathered | unreduced | "
      "total | host | fits | max B | step s |\n");
  std::printf(
      "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :-: | "
      "---: | ---: |\n");
}

// One plan's line of the table.
void print_table_row(const Options& o, const Row& r) {
  const auto w = [&](Memory m) { return gib(r.pred.worst(m)); };
  std::printf(
      "| `%s`%s | `%s` | %lld | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | "
      "%s | %lld | %.3f |\n",
      plan_name(r.plan).c_str(), r.launchable ? "" : " (not compiled)", r.plan.name().c_str(),
      static_cast<long long>(r.query.micro_batches), w(Memory::parameters), w(Memory::gradients),
      w(Memory::optimizer), w(Memory::activations), w(Memory::buffers),
      w(Memory::gathered_parameters), w(Memory::unreduced_gradients),
      gib(o.cpu ? r.pred.worst_joint_peak() : r.pred.worst_device_peak()),
      gib(r.pred.worst_host_bytes()), r.fits ? "yes" : "no",
      static_cast<long long>(r.max_micro_batch), r.seconds);
}

// The notes under the table: how plans are named, what the step time assumes.
void print_table_notes(const Options& o) {
  std::printf(
      "\nplan: seqgpt_ner --plan NAME (or its flags: `--plan tp2pp2dp2` is --zero-stage 0 "
      "--tensor-parallel 2 --pipeline-parallel 2 over 8 ranks).\n");
  std::printf(
      "m: micro-batches per data rank per step. step s: compute at %.0f%% of %.3g "
      "TFLOP/s, plus each axis's bytes at %.0f GB/s in a node (%.0f between nodes), plus "
      "AdamW at %.0f GB/s %s%s.\n",
      100 * o.hw.efficiency, o.precision == PlanPrecision::fp32 ? o.hw.tflops_32 : o.hw.tflops_16,
      o.hw.link_gbps, o.hw.network_gbps, o.hw.hbm_gbps, o.cpu ? "of memory" : "HBM",
      o.offload != Offload::none
          ? " (offloaded: on the host, and over PCIe the uploads after it and of the gradient "
            "downloads what the backward does not hide, at least the last unit's); nothing "
            "else overlaps"
          : "; no overlap");
}

// --shapes: a shape on one hardware, the fastest plan that fits or, where none does, the plan
// needing the least memory.
struct ShapeOn {
  Hardware hw;
  Row row;
  bool any = false;
};

ShapeOn shape_on(Options o, const BloomConfig& shape, const Hardware& hw) {
  o.model = shape;
  o.hw = hw;
  ShapeOn best{hw, {}, false};
  const auto total = [&](const Row& r) {
    return o.cpu ? r.pred.worst_joint_peak() : r.pred.worst_device_peak();
  };
  for (Row& r : plan_rows(o, budget_bytes(o))) {
    const bool better = !best.any || (r.fits && !best.row.fits) ||
                        (r.fits == best.row.fits &&
                         (r.fits ? r.seconds < best.row.seconds : total(r) < total(best.row)));
    if (better) best = {hw, std::move(r), true};
  }
  return best;
}

// --shapes: every published shape on each hardware preset (the CPU alone with --device cpu).
void print_shapes(const Options& o) {
  const std::vector<Hardware> hws = o.cpu ? std::vector<Hardware>{o.hw} : hardware_presets();
  const auto total = [&](const Row& r) {
    return o.cpu ? r.pred.worst_joint_peak() : r.pred.worst_device_peak();
  };
  nlohmann::json shapes = nlohmann::json::array();
  if (!o.json) {
    std::printf(
        "Every published BLOOM shape on %d x each %s, %s, %lld tokens a row, micro-batch %lld, "
        "recompute %s, offload %s: the fastest plan that fits, its GiB per %s (the worst "
        "rank's joint peak) and step seconds; where none fits, the least any plan needs\n\n| "
        "shape | parameters |",
        o.gpus, o.cpu ? "CPU rank" : "GPU preset", o.precision_name.c_str(),
        static_cast<long long>(o.seq), static_cast<long long>(o.micro_batch),
        o.recompute_name.c_str(), o.offload_name.c_str(), o.cpu ? "rank" : "GPU");
    for (const Hardware& h : hws) std::printf(" %s (%.0f GiB) |", h.name.c_str(), h.memory_gib);
    std::printf("\n| --- | ---: |");
    for (std::size_t i = 0; i < hws.size(); ++i) std::printf(" --- |");
    std::printf("\n");
  }
  for (const PublishedBloom& b : published_blooms) {
    nlohmann::json on = nlohmann::json::array();
    if (!o.json)
      std::printf("| %s | %.2f B |", std::string(b.name).c_str(),
                  static_cast<double>(b.parameter_count) * 1e-9);
    for (const Hardware& h : hws) {
      const ShapeOn s = shape_on(o, b.config, h);
      if (o.json) {
        on.push_back({{"gpu", h.name},
                      {"fits", s.any && s.row.fits},
                      {"plan", s.any ? s.row.plan.name() : ""},
                      {"name", s.any ? plan_name(s.row.plan) : ""},
                      {"device_bytes", s.any ? total(s.row) : 0},
                      {"parameter_bytes", s.any ? s.row.pred.worst(Memory::parameters) : 0},
                      {"max_micro_batch", s.any ? s.row.max_micro_batch : 0},
                      {"step_seconds", s.any ? s.row.seconds : 0.0}});
      } else if (!s.any) {
        std::printf(" no plan for %d |", o.gpus);
      } else if (s.row.fits) {
        std::printf(" `%s` %.1f GiB, %.3f s |", plan_name(s.row.plan).c_str(), gib(total(s.row)),
                    s.row.seconds);
      } else {
        std::printf(" none fits: %.1f GiB (`%s`) |", gib(total(s.row)),
                    plan_name(s.row.plan).c_str());
      }
    }
    if (o.json)
      shapes.push_back({{"name", b.name},
                        {"parameters", b.parameter_count},
                        {"vocab_size", b.config.vocab_size},
                        {"hidden", b.config.hidden},
                        {"layers", b.config.layers},
                        {"heads", b.config.heads},
                        {"on", on}});
    else
      std::printf("\n");
  }
  if (o.json)
    std::cout << nlohmann::json{{"gpus", o.gpus},
                                {"device", o.cpu ? "cpu" : "gpu"},
                                {"precision", o.precision_name},
                                {"seq", o.seq},
                                {"micro_batch", o.micro_batch},
                                {"shapes", shapes}}
                     .dump(2)
              << "\n";
  else
    std::printf(
        "\nplan: seqgpt_ner --plan NAME. step s: as each preset's table prices it (seqpar-plan "
        "--gpu NAME --model SHAPE prints every plan of one), at efficiency %.2f; %d GPUs a "
        "node.\n",
        o.hw.efficiency, o.hw.gpus_per_node);
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  if (o.shapes) {
    print_shapes(o);
    return 0;
  }
  const std::int64_t budget = budget_bytes(o);
  const std::vector<Row> rows = plan_rows(o, budget);
  if (o.json) {
    print_json(o, budget, rows);
    return 0;
  }
  print_table_head(o, budget);
  for (const Row& r : rows) print_table_row(o, r);
  print_table_notes(o);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
}

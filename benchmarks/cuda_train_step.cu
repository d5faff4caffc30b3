// How many tokens per second does seqpar train SeqGPT-560M at on one GPU? Trainer<SeqGPT560M,
// Replicated<1>, Cuda, Bf16Mixed> (bf16 weights, activations and gradients; fp32 master
// weights and AdamW moments) runs whole training steps (forward, loss, backward, clipping,
// AdamW) on random token ids, 8 x 512 and 16 x 512 tokens per step by default. After
// --warmup untimed steps, --steps steps are timed together (each step ends with a device
// synchronisation). Each batch shape (under each logits budget) ends with a JSON line:
//
//   {"impl": "seqpar", "batch": B, "seq": S, "variant": "", "tokens_per_s": ..., "mfu": ...,
//    "peak_bytes": ..., "device_peak_bytes": ..., "ms_per_step": ..., "logits_bytes": ..., ...}
//
// mfu = tokens_per_s * (6 P + 12 L h s) / 989e12 (P parameters with the tied embedding once,
// L layers, h hidden, s sequence length; 989 TFLOP/s: H200 dense bf16). peak_bytes is the
// largest total of the trainer's arena over the timed steps (what its Buffers held);
// device_peak_bytes is the most device memory in use (cudaMemGetInfo, sampled after every
// step) above what was in use before the trainer was made: the arena plus the CUDA
// contexts' workspaces, scratch and cached blocks. tools/gpu-check.sh reads these lines.
//
// Options: --shapes=8x512,16x512  --micro-batch-rows=N (0: the whole batch at once)
//          --logits-mib=0,4096 (LM head logits budgets, TrainOptions::logits_bytes; 0, the
//          default: the device's 256 MiB)  --recompute-attention=0,1,2 (TrainOptions::
//          recompute: 0 none, 1 selective, 2 full; default 0)  --fused-attention=0,1
//          (TrainOptions::attention = AttentionKind::fused; default 0). Each combination gets a
//          fresh trainer and runs every shape; one other than the defaults is named in the
//          "variant" of its lines.
//          --warmup=3  --steps=10  --seed=1
// Exit status: 0, 1 when a configuration failed, 77 without a CUDA device, 2 for bad options.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/backend/cuda/ops.hpp"
#include "seqpar/core/rng.hpp"
#include "seqpar/train/trainer.hpp"

namespace {

using namespace seqpar;
using Model = SeqGPT560M;
using TrainerT = Trainer<Model, Replicated<1>, Cuda, Bf16Mixed>;

constexpr double kPeakFlops = 989e12;

struct Shape {
  std::int64_t rows, seq;
};

struct Args {
  std::vector<Shape> shapes{{8, 512}, {16, 512}};
  std::int64_t micro_batch_rows = 0;
  std::vector<std::int64_t> logits_mib{0};  // LM head logits budgets; 0: the device's default
  std::vector<std::int64_t> recompute{0};   // Recompute: 0 none, 1 selective, 2 full
  std::vector<std::int64_t> fused{0};       // 1: fused attention (a log-sum-exp per query kept)
  int warmup = 3, steps = 10;
  std::uint64_t seed = 1;
};

[[noreturn]] void usage(const std::string& bad) {
  std::fprintf(stderr,
               "bench_cuda_train_step: bad argument '%s'\n"
               "usage: bench_cuda_train_step [--shapes=8x512,16x512] [--micro-batch-rows=N] "
               "[--logits-mib=0,4096] [--recompute-attention=0,1,2] [--fused-attention=0,1] "
               "[--warmup=3] [--steps=10] "
               "[--seed=1]\n",
               bad.c_str());
  std::exit(2);
}

std::int64_t to_int(const std::string& s, const std::string& arg) {
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v < 0) usage(arg);
  return v;
}

// "a,b,c" -> {"a", "b", "c"}
std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  for (std::size_t start = 0; start <= list.size();) {
    const std::size_t comma = std::min(list.find(',', start), list.size());
    out.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto eq = arg.find('=');
    if (eq == std::string::npos) usage(arg);
    const std::string key = arg.substr(0, eq), value = arg.substr(eq + 1);
    if (key == "--shapes") {
      a.shapes.clear();
      for (const std::string& item : split(value)) {
        const auto x = item.find('x');
        if (x == std::string::npos) usage(arg);
        const Shape s{to_int(item.substr(0, x), arg), to_int(item.substr(x + 1), arg)};
        if (s.rows == 0 || s.seq == 0) usage(arg);
        a.shapes.push_back(s);
      }
    } else if (key == "--logits-mib") {
      a.logits_mib.clear();
      for (const std::string& item : split(value)) a.logits_mib.push_back(to_int(item, arg));
    } else if (key == "--recompute-attention") {
      a.recompute.clear();
      for (const std::string& item : split(value)) {
        a.recompute.push_back(to_int(item, arg));
        if (a.recompute.back() > 2) usage(arg);
      }
    } else if (key == "--fused-attention") {
      a.fused.clear();
      for (const std::string& item : split(value)) {
        a.fused.push_back(to_int(item, arg));
        if (a.fused.back() > 1) usage(arg);
      }
    } else if (key == "--micro-batch-rows") {
      a.micro_batch_rows = to_int(value, arg);
    } else if (key == "--warmup") {
      a.warmup = static_cast<int>(to_int(value, arg));
    } else if (key == "--steps") {
      a.steps = static_cast<int>(to_int(value, arg));
      if (a.steps == 0) usage(arg);
    } else if (key == "--seed") {
      a.seed = static_cast<std::uint64_t>(to_int(value, arg));
    } else {
      usage(arg);
    }
  }
  return a;
}

// Random ids in [4, vocab): never zeros, never one repeated id; labels are the ids (the
// shift happens inside the loss), as in tools/bench_torch_gpu.py.
Batch random_batch(const Shape& s, std::uint64_t seed) {
  Batch b(s.rows, s.seq);
  const CounterRng rng(seed, "bench-cuda-train-step");
  for (std::size_t i = 0; i < b.input_ids.size(); ++i) {
    b.input_ids[i] = static_cast<std::int32_t>(4 + rng.bits(i) % (Model::vocab_size - 4));
    b.labels[i] = b.input_ids[i];
  }
  return b;
}

std::int64_t device_used() {
  std::size_t free_bytes = 0, total_bytes = 0;
  SEQPAR_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return static_cast<std::int64_t>(total_bytes - free_bytes);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int run(const Args& args) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    std::printf("bench_cuda_train_step: no CUDA device: skipped\n");
    return 77;
  }
  cudaDeviceProp prop{};
  SEQPAR_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  Ops<Cuda>::synchronize();  // the thread's context exists before the baseline is taken
  const std::int64_t used_before = device_used();
  std::printf("device %s, %.1f GiB; SeqGPT-560M, %lld parameters, Bf16Mixed\n", prop.name,
              static_cast<double>(prop.totalGlobalMem) / (1ull << 30),
              static_cast<long long>(Model::parameter_count));

  TrainOptions o;
  o.schedule.peak = 1e-4;
  o.weight_decay = 0.01;
  o.max_grad_norm = 1.0;
  o.micro_batch_rows = args.micro_batch_rows;
  o.seed = args.seed;
  std::unique_ptr<TrainerT> trainer;
  double init_s = 0;
  // A trainer for the options; the previous one (and the blocks it cached) goes first.
  const auto make_trainer = [&] {
    trainer.reset();
    CudaContext::current().release_cache();
    const auto t_init = std::chrono::steady_clock::now();
    trainer = std::make_unique<TrainerT>(o);
    Ops<Cuda>::synchronize();
    init_s = seconds_since(t_init);
  };

  int status = 0;
  for (const std::int64_t mib : args.logits_mib)
    for (const std::int64_t recompute : args.recompute)
      for (const std::int64_t fused : args.fused) {
        o.logits_bytes = mib << 20;
        o.recompute = static_cast<Recompute>(recompute);
        o.attention = fused != 0 ? AttentionKind::fused : AttentionKind::standard;
        // Fused attention keeps no probabilities: recomputing them alone is moot.
        if (fused != 0 && o.recompute == Recompute::selective) continue;
        const std::int64_t logits_bytes = mib > 0 ? o.logits_bytes : Ops<Cuda>::logits_chunk_bytes;
        // Rows of the table are told apart by this; the defaults (0 or the default budget
        // given by its size) have none. `suffix` follows the shape in the readable lines.
        std::string variant = logits_bytes != Ops<Cuda>::logits_chunk_bytes
                                  ? "logits " + std::to_string(mib) + " MiB"
                                  : "";
        if (o.recompute != Recompute::none)
          variant += (variant.empty() ? "" : ", ") + std::string(o.recompute == Recompute::full
                                                                     ? "blocks recomputed"
                                                                     : "attention recomputed");
        if (fused != 0) variant += (variant.empty() ? "" : ", ") + std::string("attention fused");
        const std::string suffix = variant.empty() ? "" : ", " + variant;
        make_trainer();
        std::printf(
            "trainer made in %.1f s; model state %.2f GiB in the arena; "
            "LM head logits budget %lld MiB; attention probabilities %s\n",
            init_s, static_cast<double>(trainer->memory().total_current) / (1ull << 30),
            static_cast<long long>(logits_bytes >> 20),
            fused != 0                       ? "never made (fused)"
            : o.recompute != Recompute::none ? "recomputed"
                                             : "kept");
        std::fflush(stdout);
        for (const Shape& shape : args.shapes) {
          const Batch batch =
              random_batch(shape, args.seed + static_cast<std::uint64_t>(shape.rows));
          const std::int64_t tokens = shape.rows * shape.seq;
          try {
            double loss = 0;
            const auto t_warm = std::chrono::steady_clock::now();
            for (int i = 0; i < args.warmup; ++i) loss = trainer->step(batch).loss;
            const double warm_s = seconds_since(t_warm);
            std::int64_t arena_peak = 0, device_peak = 0, skipped = 0;
            double grad_norm = 0;
            const auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < args.steps; ++i) {
              const StepStats st = trainer->step(batch);
              loss = st.loss;
              grad_norm = st.grad_norm;
              skipped += st.skipped;
              arena_peak = std::max(arena_peak, st.memory.total_peak);
              device_peak = std::max(device_peak, device_used() - used_before);
            }
            const double secs = seconds_since(t0);
            const double ms = secs * 1e3 / args.steps;
            const double tokens_per_s = static_cast<double>(tokens) * args.steps / secs;
            const double flops_per_token =
                6.0 * static_cast<double>(Model::parameter_count) +
                12.0 * Model::layers * Model::hidden * static_cast<double>(shape.seq);
            const double mfu = tokens_per_s * flops_per_token / kPeakFlops;
            if (!std::isfinite(loss)) status = 1;
            std::printf(
                "%lldx%lld%s: %.1f ms/step, %.0f tokens/s, MFU %.1f%%, "
                "peak %.2f GiB (device %.2f GiB), loss %.3f\n",
                static_cast<long long>(shape.rows), static_cast<long long>(shape.seq),
                suffix.c_str(), ms, tokens_per_s, 100 * mfu,
                static_cast<double>(arena_peak) / (1ull << 30),
                static_cast<double>(device_peak) / (1ull << 30), loss);
            std::printf(
                "{\"impl\": \"seqpar\", \"batch\": %lld, \"seq\": %lld, \"variant\": \"%s\", "
                "\"tokens_per_s\": %.1f, \"mfu\": %.5f, \"peak_bytes\": %lld, "
                "\"device_peak_bytes\": %lld, \"ms_per_step\": %.3f, \"loss\": %.5f, "
                "\"grad_norm\": %.5f, \"skipped_steps\": %lld, \"params\": %lld, "
                "\"flops_per_token\": %.0f, \"micro_batch_rows\": %lld, \"logits_bytes\": %lld, "
                "\"recompute\": \"%s\", \"fused_attention\": %s, \"warmup_s\": %.3f, "
                "\"steps\": %d, \"init_s\": %.3f, "
                "\"precision\": \"Bf16Mixed: bf16 model, fp32 master weights and AdamW moments\", "
                "\"device\": \"%s\"}\n",
                static_cast<long long>(shape.rows), static_cast<long long>(shape.seq),
                variant.c_str(), tokens_per_s, mfu, static_cast<long long>(arena_peak),
                static_cast<long long>(device_peak), ms, loss, grad_norm,
                static_cast<long long>(skipped), static_cast<long long>(Model::parameter_count),
                flops_per_token, static_cast<long long>(args.micro_batch_rows),
                static_cast<long long>(logits_bytes), recompute_name(o.recompute),
                fused != 0 ? "true" : "false", warm_s, args.steps, init_s, prop.name);
          } catch (const std::exception& e) {
            std::printf("%lldx%lld%s: failed: %s\n", static_cast<long long>(shape.rows),
                        static_cast<long long>(shape.seq), suffix.c_str(), e.what());
            std::printf(
                "{\"impl\": \"seqpar\", \"batch\": %lld, \"seq\": %lld, \"variant\": \"%s\", "
                "\"error\": \"step failed\"}\n",
                static_cast<long long>(shape.rows), static_cast<long long>(shape.seq),
                variant.c_str());
            status = 1;
            // A failed step leaves the trainer's buffers in an unknown state: make a fresh one.
            make_trainer();
          }
          std::fflush(stdout);
        }
      }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::printf("bench_cuda_train_step: %s\n", e.what());
    return 1;
  }
}

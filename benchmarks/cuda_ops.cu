// How fast is each Ops<Cuda> op at SeqGPT-560M's shapes (8 x 512 tokens, hidden 1024,
// 16 heads, vocab 250880), and a decoding step's choice of candidates on the device against
// downloading the logits? GEMMs report TFLOP/s, memory-bound ops GB/s (bytes read and
// written once). Each iteration is timed with CUDA events around the op alone; inputs
// are random (never zeros).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "seqpar/backend/cuda/ops.hpp"
#include "seqpar/backend/kernels.hpp"
#include "seqpar/nn/params.hpp"
#include "seqpar/optim/segments.hpp"

using namespace seqpar;
using O = Ops<Cuda>;
using bf16 = __nv_bfloat16;

namespace {

constexpr std::int64_t kTokens = 8 * 512, kHidden = 1024, kHeads = 16, kHeadDim = 64,
                       kVocab = 250880;

// x[i] = offset + a uniform value in [-scale, scale) from a hash of (seed, i).
template <class T>
__global__ void fill_random_kernel(T* x, std::int64_t n, std::uint64_t seed, float scale,
                                   float offset) {
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(i);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float u = static_cast<float>(z >> 40) * 0x1.0p-24f;
    x[i] = detail::from_float<T>(offset + scale * (2.0f * u - 1.0f));
  }
}

// A device array of n random values, freed at scope end.
template <class T>
class Random {
 public:
  Random(DeviceArena<Cuda>& arena, std::int64_t n, std::uint64_t seed, float scale = 1.0f,
         float offset = 0.0f)
      : buf_(arena, static_cast<std::size_t>(n), Memory::buffers) {
    SEQPAR_LAUNCH(fill_random_kernel, detail::grid_for(n, 256), 256, 0,
                  CudaContext::current().stream())
    (buf_.data(), n, seed, scale, offset);
    SEQPAR_CUDA_CHECK_LAUNCH();
  }
  T* data() { return buf_.data(); }

 private:
  Buffer<T, DeviceArena<Cuda>> buf_;
};

// Runs op once untimed, then once per iteration between two events.
template <class F>
void time_op(benchmark::State& state, F&& op) {
  CudaContext& ctx = CudaContext::current();
  cudaEvent_t start, stop;
  SEQPAR_CUDA_CHECK(cudaEventCreate(&start));
  SEQPAR_CUDA_CHECK(cudaEventCreate(&stop));
  op();
  ctx.synchronize();
  for (auto _ : state) {
    SEQPAR_CUDA_CHECK(cudaEventRecord(start, ctx.stream()));
    op();
    SEQPAR_CUDA_CHECK(cudaEventRecord(stop, ctx.stream()));
    SEQPAR_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    SEQPAR_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    state.SetIterationTime(static_cast<double>(ms) / 1e3);
  }
  SEQPAR_CUDA_CHECK(cudaEventDestroy(start));
  SEQPAR_CUDA_CHECK(cudaEventDestroy(stop));
}

void flops(benchmark::State& state, double per_iteration) {
  state.counters["TFLOP/s"] =
      benchmark::Counter(per_iteration / 1e12, benchmark::Counter::kIsIterationInvariantRate);
}
void bytes(benchmark::State& state, double per_iteration) {
  state.counters["GB/s"] =
      benchmark::Counter(per_iteration / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// Args: ta, tb, M, N, K.
template <class T>
void BM_gemm(benchmark::State& state) {
  const bool ta = state.range(0) != 0, tb = state.range(1) != 0;
  const std::int64_t M = state.range(2), N = state.range(3), K = state.range(4);
  DeviceArena<Cuda> arena;
  Random<T> a(arena, M * K, 1), b(arena, K * N, 2), c(arena, M * N, 3);
  time_op(state, [&] {
    O::gemm(ta, tb, M, N, K, T(1.0f), a.data(), ta ? M : K, b.data(), tb ? K : N, T(0.0f), c.data(),
            N);
  });
  flops(state, 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K));
}

// Attention on one micro-batch of B x 512 tokens, 16 heads of 64: pass 0 the forward,
// 1 the backward, 2 the probabilities alone (what a recomputing backward adds).
template <class T>
void BM_attention(benchmark::State& state) {
  const std::int64_t B = state.range(0), S = 512, N = B * S, Hl = kHeads * kHeadDim;
  const std::int64_t pass = state.range(1);
  DeviceArena<Cuda> arena;
  Random<T> qkv(arena, N * 3 * Hl, 4), dctx(arena, N * Hl, 5);
  Buffer<T, DeviceArena<Cuda>> ctx(arena, N * Hl, Memory::buffers),
      probs(arena, B * kHeads * S * S, Memory::buffers), dqkv(arena, N * 3 * Hl, Memory::buffers),
      scratch(arena, B * kHeads * S * S, Memory::buffers);
  std::vector<float> pos(N), slopes(kHeads);
  std::vector<std::uint8_t> valid(N, 1);
  for (std::int64_t i = 0; i < N; ++i) pos[i] = static_cast<float>(i % S);
  for (std::int64_t h = 0; h < kHeads; ++h)
    slopes[h] = static_cast<float>(kernels::alibi_slope(h, kHeads));
  Buffer<float, DeviceArena<Cuda>> d_pos(arena, N, Memory::buffers),
      d_slopes(arena, kHeads, Memory::buffers);
  Buffer<std::uint8_t, DeviceArena<Cuda>> d_valid(arena, N, Memory::buffers);
  O::upload(d_pos.data(), pos.data(), N);
  O::upload(d_slopes.data(), slopes.data(), kHeads);
  O::upload(d_valid.data(), valid.data(), N);
  O::attention_forward(ctx.data(), probs.data(), qkv.data(), d_pos.data(), d_valid.data(),
                       d_slopes.data(), B, S, kHeads, kHeadDim);
  time_op(state, [&] {
    if (pass == 1)
      O::attention_backward(dqkv.data(), dctx.data(), qkv.data(), probs.data(), d_valid.data(),
                            scratch.data(), B, S, kHeads, kHeadDim);
    else if (pass == 2)
      O::attention_probs(scratch.data(), qkv.data(), d_pos.data(), d_valid.data(), d_slopes.data(),
                         B, S, kHeads, kHeadDim);
    else
      O::attention_forward(ctx.data(), probs.data(), qkv.data(), d_pos.data(), d_valid.data(),
                           d_slopes.data(), B, S, kHeads, kHeadDim);
  });
  // Products as computed (the full T x T scores, masked half included): 2 forward, 4
  // backward, 1 for the probabilities alone.
  const double one = 2.0 * static_cast<double>(B * kHeads) * S * S * kHeadDim;
  flops(state, (pass == 1 ? 4.0 : pass == 2 ? 1.0 : 2.0) * one);
}

// Fused attention on the same micro-batch: pass 0 the forward (ctx and lse), 1 the
// backward (probabilities made again per tile). FLOPs counted as BM_attention's (the full
// T x T products), so the two rates compare time for the same work; the fused kernels skip
// the masked half.
template <class T>
void BM_flash_attention(benchmark::State& state) {
  const std::int64_t B = state.range(0), S = 512, N = B * S, Hl = kHeads * kHeadDim;
  const std::int64_t pass = state.range(1);
  DeviceArena<Cuda> arena;
  Random<T> qkv(arena, N * 3 * Hl, 4), dctx(arena, N * Hl, 5);
  Buffer<T, DeviceArena<Cuda>> ctx(arena, N * Hl, Memory::buffers),
      dqkv(arena, N * 3 * Hl, Memory::buffers);
  Buffer<float, DeviceArena<Cuda>> lse(arena, B * kHeads * S, Memory::buffers),
      delta(arena, B * kHeads * S, Memory::buffers);
  std::vector<float> pos(N), slopes(kHeads);
  std::vector<std::uint8_t> valid(N, 1);
  for (std::int64_t i = 0; i < N; ++i) pos[i] = static_cast<float>(i % S);
  for (std::int64_t h = 0; h < kHeads; ++h)
    slopes[h] = static_cast<float>(kernels::alibi_slope(h, kHeads));
  Buffer<float, DeviceArena<Cuda>> d_pos(arena, N, Memory::buffers),
      d_slopes(arena, kHeads, Memory::buffers);
  Buffer<std::uint8_t, DeviceArena<Cuda>> d_valid(arena, N, Memory::buffers);
  O::upload(d_pos.data(), pos.data(), N);
  O::upload(d_slopes.data(), slopes.data(), kHeads);
  O::upload(d_valid.data(), valid.data(), N);
  O::flash_attention_forward(ctx.data(), lse.data(), qkv.data(), d_pos.data(), d_valid.data(),
                             d_slopes.data(), B, S, kHeads, kHeadDim);
  time_op(state, [&] {
    if (pass == 1)
      O::flash_attention_backward(dqkv.data(), dctx.data(), ctx.data(), qkv.data(), lse.data(),
                                  d_pos.data(), d_valid.data(), d_slopes.data(), delta.data(), B, S,
                                  kHeads, kHeadDim);
    else
      O::flash_attention_forward(ctx.data(), lse.data(), qkv.data(), d_pos.data(), d_valid.data(),
                                 d_slopes.data(), B, S, kHeads, kHeadDim);
  });
  const double one = 2.0 * static_cast<double>(B * kHeads) * S * S * kHeadDim;
  flops(state, (pass == 1 ? 4.0 : 2.0) * one);
}

template <class T>
void BM_layernorm(benchmark::State& state) {
  const std::int64_t n = kTokens, d = kHidden;
  const bool backward = state.range(0) != 0;
  DeviceArena<Cuda> arena;
  Random<T> x(arena, n * d, 6), dy(arena, n * d, 7), w(arena, d, 8), b(arena, d, 9);
  Buffer<T, DeviceArena<Cuda>> y(arena, n * d, Memory::buffers), dx(arena, n * d, Memory::buffers),
      dw(arena, d, Memory::buffers), db(arena, d, Memory::buffers);
  Buffer<float, DeviceArena<Cuda>> mean(arena, n, Memory::buffers), rstd(arena, n, Memory::buffers);
  O::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, d,
                       1e-5);
  time_op(state, [&] {
    if (backward)
      O::layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), mean.data(),
                            rstd.data(), w.data(), n, d);
    else
      O::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, d,
                           1e-5);
  });
  bytes(state, static_cast<double>(sizeof(T) * n * d) * (backward ? 4.0 : 2.0));
}

template <class T>
void BM_gelu(benchmark::State& state) {
  const std::int64_t n = kTokens * 4 * kHidden;
  DeviceArena<Cuda> arena;
  Random<T> x(arena, n, 10, 3.0f);
  Buffer<T, DeviceArena<Cuda>> y(arena, n, Memory::buffers);
  time_op(state, [&] { O::gelu_forward(y.data(), x.data(), n); });
  bytes(state, 2.0 * static_cast<double>(sizeof(T) * n));
}

template <class T>
void BM_bias_and_column_sum(benchmark::State& state) {
  const std::int64_t n = kTokens, d = 4 * kHidden;
  DeviceArena<Cuda> arena;
  Random<T> y(arena, n * d, 11), b(arena, d, 12);
  const bool column_sum = state.range(0) != 0;
  time_op(state, [&] {
    if (column_sum)
      O::column_sum(b.data(), y.data(), n, d);
    else
      O::add_bias(y.data(), b.data(), n, d);
  });
  bytes(state, static_cast<double>(sizeof(T) * n * d) * (column_sum ? 1.0 : 2.0));
}

template <class T>
void BM_embedding_backward(benchmark::State& state) {
  const std::int64_t n = kTokens, d = kHidden;
  DeviceArena<Cuda> arena;
  Random<T> dy(arena, n * d, 13);
  Buffer<T, DeviceArena<Cuda>> table(arena, kVocab * d, Memory::buffers);
  std::vector<std::int32_t> ids(n);
  std::uint64_t z = 12345;
  for (auto& id : ids) {
    z = z * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<std::int32_t>((z >> 33) % kVocab);
  }
  for (std::int64_t i = 0; i < 256; ++i) ids[i] = 3;  // a run of left padding
  Buffer<std::int32_t, DeviceArena<Cuda>> d_ids(arena, n, Memory::buffers);
  O::upload(d_ids.data(), ids.data(), n);
  time_op(state,
          [&] { O::embedding_backward(table.data(), d_ids.data(), dy.data(), n, d, 0, kVocab); });
  bytes(state, 3.0 * static_cast<double>(sizeof(T) * n * d));
}

// fn(offset, segments) over one SeqGPT-560M block: a call per tensor (twelve, eight of
// them 1024 to 4096 elements), or as few as the block's segments need (one, as the
// trainer does), each segment of value value_of(spec).
template <class V, class ValueOf, class Fn>
void block_calls(const UnitTable& block, bool per_tensor, ValueOf value_of, Fn fn) {
  if (!per_tensor) return for_each_segments<V>(block, 0, block.numel, value_of, fn);
  for (const auto& spec : block.params)
    fn(spec.offset, kernels::Segments<V>::uniform(spec.numel(), value_of(spec)));
}

// Arg per_tensor: a launch per tensor (1) or one over the block (0).
template <class T>
void BM_adamw_mixed(benchmark::State& state) {
  const bool per_tensor = state.range(0) != 0;
  const UnitTable block = bloom_units<SeqGPT560M>()[1];  // made before the clock starts
  const std::int64_t n = block.numel;
  DeviceArena<Cuda> arena;
  Random<float> master(arena, n, 14), m(arena, n, 15, 0.01f), v(arena, n, 16, 1e-4f, 1e-4f);
  Random<T> g(arena, n, 17);
  Buffer<T, DeviceArena<Cuda>> w(arena, n, Memory::buffers);
  const kernels::AdamCoeffs c{1e-4f, 0.9f, 0.999f, 1e-8f, 0.01f, 1e-3f, 0.03f};
  time_op(state, [&] {
    block_calls<bool>(
        block, per_tensor, [](const ParamSpec& p) { return p.decay; },
        [&](std::int64_t k, const kernels::Segments<bool>& decay) {
          O::adamw_mixed(master.data() + k, w.data() + k, g.data() + k, m.data() + k, v.data() + k,
                         decay, c);
        });
  });
  bytes(state, static_cast<double>(n) * (4 * 3 * 2 + 2 * sizeof(T)));
}

// The gradient norm's share of one block: Arg per_tensor as BM_adamw_mixed.
template <class T>
void BM_grad_square_sum(benchmark::State& state) {
  const bool per_tensor = state.range(0) != 0;
  const UnitTable block = bloom_units<SeqGPT560M>()[1];  // made before the clock starts
  const std::int64_t n = block.numel;
  DeviceArena<Cuda> arena;
  Random<T> g(arena, n, 19);
  Buffer<double, DeviceArena<Cuda>> acc(arena, 1, Memory::buffers);
  time_op(state, [&] {
    block_calls<double>(
        block, per_tensor, [](const ParamSpec&) { return 1.0; },
        [&](std::int64_t k, const kernels::Segments<double>& weight) {
          O::sum_squares_accumulate(acc.data(), g.data() + k, weight);
        });
  });
  bytes(state, static_cast<double>(sizeof(T) * n));
}

// One beam-search step's choice for 8 prompts x 4 beams of fp32 logits over the whole
// vocabulary: Arg on_device 0 downloads the logits (what choosing on the host needs before
// it computes anything: a lower bound of that way's cost), 1 is generate's way: the
// maxima, sums of exps and lse's round trips, the scores with a 300-id penalty a row, each
// row's 8 best, and their download.
void BM_next_token_choice(benchmark::State& state) {
  const bool on_device = state.range(0) != 0;
  constexpr std::int64_t rows = 32, k = 8, seen_per_row = 300;
  DeviceArena<Cuda> arena;
  Random<float> logits(arena, rows * kVocab, 23, 8.0f);
  Buffer<float, DeviceArena<Cuda>> mx(arena, rows, Memory::buffers),
      lse(arena, rows, Memory::buffers), base(arena, rows, Memory::buffers),
      score(arena, rows * k, Memory::buffers);
  Buffer<double, DeviceArena<Cuda>> sum(arena, rows, Memory::buffers);
  Buffer<std::int64_t, DeviceArena<Cuda>> token(arena, rows * k, Memory::buffers),
      start(arena, rows + 1, Memory::buffers);
  Buffer<std::int32_t, DeviceArena<Cuda>> seen(arena, rows * seen_per_row, Memory::buffers);
  std::vector<std::int32_t> host_seen(rows * seen_per_row);
  std::vector<std::int64_t> host_start(rows + 1);
  for (std::int64_t i = 0; i < rows * seen_per_row; ++i)
    host_seen[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i * 7919 % kVocab);
  for (std::int64_t r = 0; r <= rows; ++r)
    host_start[static_cast<std::size_t>(r)] = r * seen_per_row;
  O::upload(start.data(), host_start.data(), rows + 1);
  std::vector<float> host_logits(on_device ? 0 : rows * kVocab), host_row(rows),
      host_base(rows, -1.5f), host_score(rows * k);
  std::vector<double> host_sum(rows);
  std::vector<std::int64_t> host_token(rows * k);
  time_op(state, [&] {
    if (!on_device) {
      O::download(host_logits.data(), logits.data(), rows * kVocab);
      return;
    }
    O::next_token_max(mx.data(), logits.data(), rows, kVocab, kVocab);
    O::download(host_row.data(), mx.data(), rows);
    O::upload(mx.data(), host_row.data(), rows);
    O::next_token_sum_exp(sum.data(), logits.data(), mx.data(), rows, kVocab, kVocab);
    O::download(host_sum.data(), sum.data(), rows);
    for (std::int64_t r = 0; r < rows; ++r)
      host_row[static_cast<std::size_t>(r)] =
          static_cast<float>(std::log(host_sum[static_cast<std::size_t>(r)]));
    O::upload(lse.data(), host_row.data(), rows);
    O::upload(seen.data(), host_seen.data(), rows * seen_per_row);
    O::next_token_scores(logits.data(), logits.data(), mx.data(), lse.data(), seen.data(),
                         start.data(), 2.0f, rows, kVocab, 0, kVocab);
    O::upload(base.data(), host_base.data(), rows);
    O::next_token_top_k(score.data(), token.data(), logits.data(), base.data(), rows, kVocab, 0,
                        kVocab, k);
    O::download(host_score.data(), score.data(), rows * k);
    O::download(host_token.data(), token.data(), rows * k);
  });
  bytes(state, static_cast<double>(sizeof(float) * rows * kVocab));
}

constexpr std::int64_t H = kHidden, N = kTokens;

}  // namespace

// The linear layers of a block: forward y = x W^T, backward dx = dy W and dW = dy^T x.
BENCHMARK_TEMPLATE(BM_gemm, bf16)
    ->ArgNames({"ta", "tb", "M", "N", "K"})
    ->Args({0, 1, N, 3 * H, H})
    ->Args({0, 1, N, 4 * H, H})
    ->Args({0, 1, N, H, 4 * H})
    ->Args({0, 0, N, H, 4 * H})
    ->Args({1, 0, 4 * H, H, N})
    ->Args({0, 1, N, 8192, H})  // an LM-head chunk
    ->UseManualTime();
BENCHMARK_TEMPLATE(BM_gemm, float)
    ->ArgNames({"ta", "tb", "M", "N", "K"})
    ->Args({0, 1, N, 4 * H, H})
    ->UseManualTime();
BENCHMARK_TEMPLATE(BM_attention, bf16)
    ->ArgNames({"B", "pass"})
    ->Args({8, 0})
    ->Args({8, 1})
    ->Args({8, 2})
    ->UseManualTime();
BENCHMARK_TEMPLATE(BM_flash_attention, bf16)
    ->ArgNames({"B", "pass"})
    ->Args({8, 0})
    ->Args({8, 1})
    ->UseManualTime();
BENCHMARK_TEMPLATE(BM_layernorm, bf16)->ArgName("backward")->Arg(0)->Arg(1)->UseManualTime();
BENCHMARK_TEMPLATE(BM_gelu, bf16)->UseManualTime();
BENCHMARK_TEMPLATE(BM_bias_and_column_sum, bf16)
    ->ArgName("column_sum")
    ->Arg(0)
    ->Arg(1)
    ->UseManualTime();
BENCHMARK_TEMPLATE(BM_embedding_backward, bf16)->UseManualTime();
BENCHMARK_TEMPLATE(BM_adamw_mixed, bf16)->ArgName("per_tensor")->Arg(0)->Arg(1)->UseManualTime();
BENCHMARK_TEMPLATE(BM_grad_square_sum, bf16)
    ->ArgName("per_tensor")
    ->Arg(0)
    ->Arg(1)
    ->UseManualTime();
BENCHMARK(BM_next_token_choice)->ArgName("on_device")->Arg(0)->Arg(1)->UseManualTime();

// Google Benchmark's main, after a check that there is a device: none exits with 77 (skipped).
int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    std::printf("bench_cuda_ops: no CUDA device: skipped\n");
    return 77;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

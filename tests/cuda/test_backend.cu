// The CUDA backend's plumbing: device buffers, errors, per-thread contexts, row gather /
// scatter and the row steps of the chunked cross-entropy (against host code in double).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cpu_reference.hpp"
#include "cuda_test_util.hpp"

using namespace seqpar;
using namespace seqpar::test;
using O = Ops<Cuda>;

TEST_CASE(
    "a device Buffer is zeroed (an activation NaN, in tests), counted by its arena and "
    "round-trips") {
  CudaArena arena;
  {
    DeviceBuffer<float> act(arena, 10, Memory::activations);
    for (const float x : to_host(act)) CHECK(std::isnan(x));  // SEQPAR_POISON_ACTIVATIONS
  }
  {
    DeviceBuffer<float> b(arena, 1000, Memory::buffers);
    CHECK(arena.stats().current_of(Memory::buffers) == 4000);
    CHECK(same_bits(to_host(b), std::vector<float>(1000, 0.0f)));
    std::vector<float> h(1000);
    for (int i = 0; i < 1000; ++i) h[static_cast<std::size_t>(i)] = static_cast<float>(i) - 0.5f;
    O::upload(b.data(), h.data(), 1000);
    CHECK(same_bits(to_host(b), h));
  }
  CHECK(arena.stats().current_of(Memory::buffers) == 0);
  CHECK(arena.stats().peak_of(Memory::buffers) == 4000);
}

TEST_CASE("CUDA failures throw seqpar::Error naming the call and the runtime's message") {
  // More memory than any GPU has.
  try {
    (void)CudaAllocator::allocate(std::size_t{1} << 60);
    FAIL("cudaMalloc of 2^60 bytes succeeded");
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK(what.find("cudaMalloc of 1152921504606846976 bytes") != std::string::npos);
    CHECK(what.find("cudaErrorMemoryAllocation") != std::string::npos);
  }
  try {
    SEQPAR_CUDA_CHECK(cudaSetDevice(1 << 20));
    FAIL("cudaSetDevice(1 << 20) succeeded");
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK(what.find("test_backend.cu:") != std::string::npos);
    CHECK(what.find("cudaSetDevice(1 << 20)") != std::string::npos);
    CHECK(what.find("cudaErrorInvalidDevice") != std::string::npos);
  }
  // Both errors were cleared: the next launch check passes.
  CudaArena arena;
  DeviceBuffer<float> b(arena, 16, Memory::buffers);
  O::fill(b.data(), 1.0f, 16);
  CHECK(same_bits(to_host(b), std::vector<float>(16, 1.0f)));
}

TEST_CASE("each thread has its own stream and cuBLAS handle, and ranks compute independently") {
  constexpr int ranks = 3;
  std::vector<cudaStream_t> streams(ranks);
  std::vector<cublasHandle_t> handles(ranks);
  std::vector<double> errors(ranks, -1.0);
  std::vector<std::string> failures(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        CudaContext& ctx = CudaContext::current();
        streams[static_cast<std::size_t>(r)] = ctx.stream();
        handles[static_cast<std::size_t>(r)] = ctx.blas();
        CudaArena arena;
        const std::int64_t n = 96 + 32 * r;
        const auto a = random_values<float>(n * n, 400 + static_cast<std::uint64_t>(r));
        std::vector<float> c(n * n);
        CpuRef::gemm(false, false, n, n, n, 1.0f, a.data(), n, a.data(), n, 0.0f, c.data(), n);
        auto d_a = to_device<float>(arena, a);
        DeviceBuffer<float> d_c(arena, n * n, Memory::buffers);
        for (int rep = 0; rep < 20; ++rep)
          O::gemm(false, false, n, n, n, 1.0f, d_a.data(), n, d_a.data(), n, 0.0f, d_c.data(), n);
        errors[static_cast<std::size_t>(r)] = rel_err(to_host(d_c), c);
      } catch (const std::exception& e) {
        failures[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < ranks; ++r) {
    CAPTURE(r);
    CHECK(failures[static_cast<std::size_t>(r)].empty());
    CHECK(errors[static_cast<std::size_t>(r)] >= 0.0);
    CHECK(errors[static_cast<std::size_t>(r)] < 1e-6);
    for (int q = 0; q < r; ++q) {
      CHECK(streams[static_cast<std::size_t>(q)] != streams[static_cast<std::size_t>(r)]);
      CHECK(handles[static_cast<std::size_t>(q)] != handles[static_cast<std::size_t>(r)]);
    }
  }
  CHECK(CudaContext::current().stream() != streams[0]);
}

TEST_CASE("a block freed by another thread goes to the cache of the thread that took it") {
  CudaContext& mine = CudaContext::current();
  constexpr std::size_t bytes = std::size_t{1} << 20;
  void* p = mine.allocate(bytes);
  const std::size_t mine_before = mine.cached_bytes();
  std::size_t cached_there = 1;
  std::thread([&] {
    CudaContext& other = CudaContext::current();
    (void)other.stream();  // a started context: it waits for its stream, then hands p over
    other.deallocate(p, bytes);
    cached_there = other.cached_bytes();
  }).join();
  CHECK(cached_there == 0);
  CHECK(mine.cached_bytes() == mine_before + bytes);
  // No cudaFree happened: this thread's next allocation of the size gets the same block.
  void* q = mine.allocate(bytes);
  CHECK(q == p);
  mine.deallocate(q, bytes);  // this thread's own block: cached
  CHECK(mine.cached_bytes() == mine_before + bytes);
  mine.release_cache();
}

TEST_CASE("growing the scratch frees nothing: the outgrown block joins the cache") {
  CudaContext& ctx = CudaContext::current();
  void* old = ctx.scratch(1);  // what it holds now (at least a byte)
  const std::size_t old_bytes = ctx.scratch_bytes();
  const std::size_t cached = ctx.cached_bytes();
  void* grown = ctx.scratch(old_bytes + 1);
  CHECK(grown != old);
  CHECK(ctx.scratch_bytes() > old_bytes);
  CHECK(ctx.cached_bytes() == cached + old_bytes);
  // The outgrown block is the cache's newest of its size: an allocation of it gets it back.
  void* again = ctx.allocate(old_bytes);
  CHECK(again == old);
  ctx.deallocate(again, old_bytes);
  ctx.release_cache();
}

TEST_CASE("an allocation that finds the device full takes back another thread's cached blocks") {
  std::size_t free_bytes = 0, total_bytes = 0;
  REQUIRE(cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess);
  // The other thread caches 60 % of the free memory; this one then asks for 60 %.
  const std::size_t block = free_bytes / 10 / 512 * 512;
  std::mutex m;
  std::condition_variable cv;
  bool cached = false, done = false;
  std::size_t held_there = 0;
  std::string failure;
  std::thread holder([&] {
    try {
      CudaContext& other = CudaContext::current();
      std::vector<void*> blocks;
      for (int i = 0; i < 6; ++i) blocks.push_back(other.allocate(block));
      for (void* b : blocks) other.deallocate(b, block);
      held_there = other.cached_bytes();
    } catch (const std::exception& e) {
      failure = e.what();
    }
    std::unique_lock lock(m);
    cached = true;
    cv.notify_all();
    cv.wait(lock, [&] { return done; });  // the context (and its cache) stays while we allocate
  });
  {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return cached; });
  }
  CHECK(failure.empty());
  CHECK(held_there == 6 * block);
  CudaContext& mine = CudaContext::current();
  std::vector<void*> got;
  std::string error;
  try {
    for (int i = 0; i < 6; ++i) got.push_back(mine.allocate(block));
  } catch (const std::exception& e) {
    error = e.what();
  }
  CHECK(error.empty());
  CHECK(got.size() == 6);
  for (void* b : got) mine.deallocate(b, block);
  mine.release_cache();
  {
    std::lock_guard lock(m);
    done = true;
  }
  cv.notify_all();
  holder.join();
}

TEST_CASE_TEMPLATE("gather_rows and scatter_rows move whole rows", T, float, __nv_bfloat16) {
  CudaArena arena;
  const std::int64_t rows = 50, d = 70, n = 20;
  const auto src = random_values<T>(rows * d, 500);
  std::vector<std::int32_t> index(n);
  for (std::int64_t r = 0; r < n; ++r)
    index[static_cast<std::size_t>(r)] = static_cast<std::int32_t>((r * 7 + 3) % rows);
  auto d_src = to_device<T>(arena, src);
  auto d_index = to_device_raw(arena, index);
  DeviceBuffer<T> d_g(arena, n * d, Memory::buffers), d_s(arena, rows * d, Memory::buffers);
  O::gather_rows(d_g.data(), d_src.data(), d_index.data(), n, d);
  O::scatter_rows(d_s.data(), d_g.data(), d_index.data(), n, d);
  std::vector<float> gathered(n * d), scattered(rows * d, 0.0f);
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t j = 0; j < d; ++j) {
      const std::int64_t from = index[static_cast<std::size_t>(r)];
      gathered[r * d + j] = src[from * d + j];
      scattered[from * d + j] = src[from * d + j];
    }
  CHECK(same_bits(to_host(d_g), gathered));
  CHECK(same_bits(to_host(d_s), scattered));
}

TEST_CASE_TEMPLATE("chunked cross-entropy steps match a host log-sum-exp in double", T, float,
                   __nv_bfloat16) {
  CudaArena arena;
  const std::int64_t n = 45, V = 300, chunk = 128;  // the last chunk is partial
  const auto logits = random_values<T>(n * V, 600, 3.0);
  std::vector<std::int32_t> target(n);
  for (std::int64_t r = 0; r < n; ++r)
    target[static_cast<std::size_t>(r)] = static_cast<std::int32_t>((r * 37 + 11) % V);
  const float grad_scale = 1.0f / 45.0f;

  // Host reference in double.
  std::vector<double> lse(n);
  double loss = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    double mx = -INFINITY, s = 0;
    for (std::int64_t j = 0; j < V; ++j) mx = std::max(mx, static_cast<double>(logits[r * V + j]));
    for (std::int64_t j = 0; j < V; ++j) s += std::exp(logits[r * V + j] - mx);
    lse[r] = mx + std::log(s);
    loss += lse[r] - logits[r * V + target[static_cast<std::size_t>(r)]];
  }

  auto d_target = to_device_raw(arena, target);
  DeviceBuffer<float> mx(arena, n, Memory::buffers), sum(arena, n, Memory::buffers),
      picked(arena, n, Memory::buffers), d_lse(arena, n, Memory::buffers);
  O::fill(mx.data(), -INFINITY, n);
  std::vector<float> grads(n * V);
  std::vector<float> ref_grads(n * V);
  for (int pass = 0; pass < 2; ++pass) {
    for (std::int64_t c0 = 0; c0 < V; c0 += chunk) {
      const std::int64_t cw = std::min(chunk, V - c0);
      std::vector<float> part(n * cw);
      for (std::int64_t r = 0; r < n; ++r)
        for (std::int64_t j = 0; j < cw; ++j) part[r * cw + j] = logits[r * V + c0 + j];
      auto d_part = to_device<T>(arena, part);
      if (pass == 0) {
        O::softmax_stats(mx.data(), sum.data(), picked.data(), d_part.data(), d_target.data(), n,
                         cw, c0);
      } else {
        O::cross_entropy_grad(d_part.data(), d_lse.data(), d_target.data(), n, cw, c0, grad_scale);
        const auto g = to_host(d_part);
        for (std::int64_t r = 0; r < n; ++r)
          for (std::int64_t j = 0; j < cw; ++j) {
            grads[r * V + c0 + j] = g[r * cw + j];
            double ref = std::exp(logits[r * V + c0 + j] - lse[r]);
            if (c0 + j == target[static_cast<std::size_t>(r)]) ref -= 1.0;
            ref_grads[r * V + c0 + j] = static_cast<float>(ref * grad_scale);
          }
      }
    }
    if (pass == 0) {
      // One shard: the global max is the local one and the rescale is a no-op.
      DeviceBuffer<float> global(arena, n, Memory::buffers);
      O::copy(global.data(), mx.data(), n);
      O::softmax_stats_rescale(sum.data(), mx.data(), global.data(), n);
      const double got =
          O::cross_entropy_loss(d_lse.data(), global.data(), sum.data(), picked.data(), n);
      CHECK(std::abs(got - loss) < 1e-5 * std::abs(loss));
      std::vector<float> lse_f(lse.begin(), lse.end());
      CHECK(rel_err(to_host(d_lse), lse_f) < 1e-6);
    }
  }
  SEQPAR_CHECK_CLOSE(T, grads, ref_grads);
}

TEST_CASE("softmax_stats_rescale moves a shard's sum of exps to a larger global max") {
  CudaArena arena;
  const std::vector<float> sum{2.0f, 5.0f}, mx{1.0f, -3.0f}, global{2.5f, -3.0f};
  auto d_sum = to_device<float>(arena, sum), d_mx = to_device<float>(arena, mx),
       d_g = to_device<float>(arena, global);
  O::softmax_stats_rescale(d_sum.data(), d_mx.data(), d_g.data(), 2);
  const auto got = to_host(d_sum);
  CHECK(std::abs(got[0] - 2.0 * std::exp(-1.5)) < 1e-6);
  CHECK(got[1] == 5.0f);
}

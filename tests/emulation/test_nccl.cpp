// The emulated NCCL with ranks as threads of this process, each on its own device: every
// collective against serial results, split, groups (and the deadlock of two sends outside one),
// abort, the refusals, a collective that ranks call differently, and a device-wide
// synchronisation while an operation is queued.
#include <cuda_runtime.h>
#include <doctest/doctest.h>
#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "emulation_test_util.hpp"

using namespace emu_test;

namespace {

// f(rank) on n threads, rank r on device r; the failures of CHECKs inside are collected.
void on_ranks(int n, const std::function<void(int)>& f) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      (void)cudaSetDevice(r);
      f(r);
    });
  for (auto& t : threads) t.join();
}

ncclUniqueId new_id() {
  ncclUniqueId id{};
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  return id;
}

struct Rank {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  Rank(int n, const ncclUniqueId& id, int r) {
    (void)ncclCommInitRank(&comm, n, id, r);
    (void)cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  }
  ~Rank() {
    (void)cudaStreamDestroy(stream);
    (void)ncclCommDestroy(comm);
  }
};

float value(int r, int i) { return static_cast<float>(100 * r + i); }

}  // namespace

TEST_CASE("in-process NCCL: every collective equals the serial result") {
  constexpr int n = 3, count = 37;
  const ncclUniqueId id = new_id();
  std::mutex m;
  std::vector<std::string> failures;
  on_ranks(n, [&](int r) {
    Rank rank(n, id, r);
    std::vector<float> mine(count * n);
    for (int i = 0; i < count * n; ++i) mine[static_cast<std::size_t>(i)] = value(r, i);
    float *in = nullptr, *out = nullptr;
    (void)cudaMalloc(reinterpret_cast<void**>(&in), sizeof(float) * count * n);
    (void)cudaMalloc(reinterpret_cast<void**>(&out), sizeof(float) * count * n);
    (void)cudaMemcpy(in, mine.data(), sizeof(float) * count * n, cudaMemcpyHostToDevice);
    std::vector<float> sum(count), scattered(count), gathered(count * n), root(count);
    const auto read = [&](std::vector<float>& host, std::size_t elements) {
      (void)cudaStreamSynchronize(rank.stream);
      (void)cudaMemcpy(host.data(), out, sizeof(float) * elements, cudaMemcpyDeviceToHost);
    };
    ncclAllReduce(in, out, count, ncclFloat32, ncclSum, rank.comm, rank.stream);
    read(sum, count);
    ncclReduceScatter(in, out, count, ncclFloat32, ncclMax, rank.comm, rank.stream);
    read(scattered, count);
    ncclAllGather(in, out, count, ncclFloat32, rank.comm, rank.stream);
    read(gathered, count * n);
    ncclBroadcast(in, out, count, ncclFloat32, 1, rank.comm, rank.stream);
    read(root, count);
    std::lock_guard lock(m);
    for (int i = 0; i < count; ++i) {
      float s = 0;
      for (int q = 0; q < n; ++q) s += value(q, i);
      if (sum[static_cast<std::size_t>(i)] != s) failures.push_back("all_reduce");
      if (scattered[static_cast<std::size_t>(i)] != value(n - 1, r * count + i))
        failures.push_back("reduce_scatter");
      if (root[static_cast<std::size_t>(i)] != value(1, i)) failures.push_back("broadcast");
      for (int q = 0; q < n; ++q)
        if (gathered[static_cast<std::size_t>(q * count + i)] != value(q, i))
          failures.push_back("all_gather");
    }
    (void)cudaFree(in);
    (void)cudaFree(out);
  });
  CHECK(failures.empty());
}

TEST_CASE("in-process NCCL: split by color, ranked by key") {
  constexpr int n = 4;
  const ncclUniqueId id = new_id();
  std::vector<int> sizes(n), ranks(n);
  std::vector<float> sums(n);
  on_ranks(n, [&](int r) {
    Rank rank(n, id, r);
    ncclComm_t sub = nullptr;
    (void)ncclCommSplit(rank.comm, r % 2, -r, &sub, nullptr);
    (void)ncclCommCount(sub, &sizes[static_cast<std::size_t>(r)]);
    (void)ncclCommUserRank(sub, &ranks[static_cast<std::size_t>(r)]);
    float* x = nullptr;
    const float v = static_cast<float>(r + 1);
    (void)cudaMalloc(reinterpret_cast<void**>(&x), sizeof(float));
    (void)cudaMemcpy(x, &v, sizeof v, cudaMemcpyHostToDevice);
    ncclAllReduce(x, x, 1, ncclFloat32, ncclSum, sub, rank.stream);
    (void)cudaStreamSynchronize(rank.stream);
    (void)cudaMemcpy(&sums[static_cast<std::size_t>(r)], x, sizeof(float), cudaMemcpyDeviceToHost);
    (void)cudaFree(x);
    (void)ncclCommDestroy(sub);
  });
  CHECK(sizes == std::vector<int>{2, 2, 2, 2});
  CHECK(ranks == std::vector<int>{1, 1, 0, 0});  // key -r: the larger old rank first
  CHECK(sums == std::vector<float>{4, 6, 4, 6});
}

TEST_CASE("a send and a receive in one group meet; outside a group, two sends deadlock") {
  const ncclUniqueId id = new_id();
  std::vector<float> got(2);
  on_ranks(2, [&](int r) {
    Rank rank(2, id, r);
    float *mine = nullptr, *theirs = nullptr;
    const float v = static_cast<float>(10 + r);
    (void)cudaMalloc(reinterpret_cast<void**>(&mine), sizeof(float));
    (void)cudaMalloc(reinterpret_cast<void**>(&theirs), sizeof(float));
    (void)cudaMemcpy(mine, &v, sizeof v, cudaMemcpyHostToDevice);
    ncclGroupStart();
    ncclSend(mine, 1, ncclFloat32, 1 - r, rank.comm, rank.stream);
    ncclRecv(theirs, 1, ncclFloat32, 1 - r, rank.comm, rank.stream);
    ncclGroupEnd();
    (void)cudaStreamSynchronize(rank.stream);
    (void)cudaMemcpy(&got[static_cast<std::size_t>(r)], theirs, sizeof(float),
                     cudaMemcpyDeviceToHost);
    (void)cudaFree(mine);
    (void)cudaFree(theirs);
  });
  CHECK(got == std::vector<float>{11, 10});
  const Death d = run_to_death([] {
    const ncclUniqueId id2 = new_id();
    on_ranks(2, [&](int r) {
      Rank rank(2, id2, r);
      float* buf = nullptr;
      (void)cudaMalloc(reinterpret_cast<void**>(&buf), 2 * sizeof(float));
      ncclSend(buf, 1, ncclFloat32, 1 - r, rank.comm, rank.stream);
      ncclRecv(buf + 1, 1, ncclFloat32, 1 - r, rank.comm, rank.stream);
      (void)cudaStreamSynchronize(rank.stream);
    });
  });
  INFO(d.output);
  CHECK(d.signal == SIGABRT);
  CHECK(d.output.find("deadlock") != std::string::npos);
  CHECK(d.output.find("ncclSend") != std::string::npos);
}

TEST_CASE("ncclCommAbort: the peers' pending operations end and report a remote error") {
  const ncclUniqueId id = new_id();
  std::vector<int> errors(2, -1);
  std::mutex m;
  bool queried = false, aborted = false;
  std::condition_variable cv;
  on_ranks(2, [&](int r) {
    ncclComm_t comm = nullptr;
    cudaStream_t s = nullptr;
    (void)ncclCommInitRank(&comm, 2, id, r);
    (void)cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    float* x = nullptr;
    (void)cudaMalloc(reinterpret_cast<void**>(&x), sizeof(float));
    if (r == 0) {
      ncclAllReduce(x, x, 1, ncclFloat32, ncclSum, comm, s);  // rank 1 never calls it
      CHECK(cudaStreamQuery(s) == cudaErrorNotReady);
      {
        std::unique_lock lock(m);
        queried = true;
        cv.notify_all();
        cv.wait(lock, [&] { return aborted; });
      }
      CHECK(cudaStreamSynchronize(s) == cudaSuccess);  // ended, without data
      ncclResult_t e = ncclSuccess;
      (void)ncclCommGetAsyncError(comm, &e);
      errors[0] = e;
      (void)ncclCommDestroy(comm);
    } else {
      std::unique_lock lock(m);
      cv.wait(lock, [&] { return queried; });
      (void)ncclCommAbort(comm);
      aborted = true;
      cv.notify_all();
    }
    (void)cudaFree(x);
    (void)cudaStreamDestroy(s);
  });
  CHECK(errors[0] == ncclRemoteError);
}

TEST_CASE("NCCL's refusals: two ranks on one device; a stream of another device") {
  const Death d = run_to_death([] {
    const ncclUniqueId id = new_id();
    std::thread first([&] {
      (void)cudaSetDevice(5);
      ncclComm_t c = nullptr;
      (void)ncclCommInitRank(&c, 2, id, 0);  // waits for a rank that will be refused
    });
    first.detach();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    (void)cudaSetDevice(5);
    ncclComm_t c = nullptr;
    _exit(ncclCommInitRank(&c, 2, id, 1) == ncclInvalidUsage ? 42 : 1);
  });
  INFO(d.output);
  CHECK(d.status == 42);
  CHECK(d.output.find("NCCL refuses two ranks on one GPU") != std::string::npos);

  const ncclUniqueId one = new_id();
  ncclComm_t c = nullptr;
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  REQUIRE(ncclCommInitRank(&c, 1, one, 0) == ncclSuccess);
  cudaStream_t other = nullptr;
  REQUIRE(cudaSetDevice(1) == cudaSuccess);
  REQUIRE(cudaStreamCreate(&other) == cudaSuccess);
  float* x = nullptr;
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&x), 4) == cudaSuccess);
  CHECK(ncclAllReduce(x, x, 1, ncclFloat32, ncclSum, c, other) == ncclInvalidUsage);
  REQUIRE(ncclCommDestroy(c) == ncclSuccess);
  REQUIRE(cudaFree(x) == cudaSuccess);
  REQUIRE(cudaSetDevice(1) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(other) == cudaSuccess);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
}

TEST_CASE("ranks that call a collective differently stop the program, naming both calls") {
  const Death d = run_to_death([] {
    const ncclUniqueId id = new_id();
    on_ranks(2, [&](int r) {
      Rank rank(2, id, r);
      float* x = nullptr;
      (void)cudaMalloc(reinterpret_cast<void**>(&x), 8 * sizeof(float));
      ncclAllReduce(x, x, static_cast<std::size_t>(4 + r), ncclFloat32, ncclSum, rank.comm,
                    rank.stream);
      (void)cudaStreamSynchronize(rank.stream);
    });
  });
  INFO(d.output);
  CHECK(d.signal == SIGABRT);
  CHECK(d.output.find("does not match") != std::string::npos);
  CHECK(d.output.find("5 elements") != std::string::npos);
}

TEST_CASE("cudaFree while an NCCL operation is queued on its device fails, naming it") {
  const ncclUniqueId id = new_id();
  std::mutex m;
  std::condition_variable cv;
  bool freed = false;
  cudaError_t free_result = cudaSuccess;
  on_ranks(2, [&](int r) {
    Rank rank(2, id, r);
    float *x = nullptr, *scratch = nullptr;
    (void)cudaMalloc(reinterpret_cast<void**>(&x), sizeof(float));
    (void)cudaMalloc(reinterpret_cast<void**>(&scratch), sizeof(float));
    if (r == 1) {
      std::unique_lock lock(m);
      cv.wait(lock, [&] { return freed; });
    }
    ncclAllReduce(x, x, 1, ncclFloat32, ncclSum, rank.comm, rank.stream);
    if (r == 0) {
      free_result = cudaFree(scratch);  // rank 1 has not queued its part
      (void)cudaGetLastError();
      std::lock_guard lock(m);
      freed = true;
      cv.notify_all();
    } else {
      (void)cudaFree(scratch);
    }
    (void)cudaStreamSynchronize(rank.stream);
    (void)cudaFree(x);
  });
  CHECK(free_result == cudaErrorLaunchFailure);
}

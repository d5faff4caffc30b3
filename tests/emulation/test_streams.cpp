// Streams and events of the emulated device: queued work runs only when something waits for it,
// in the order the streams and events allow, so a missing wait reads stale data; the legacy
// default stream and the blocking streams wait for each other.
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <vector>

#include "emulation_test_util.hpp"

namespace emu_test {

__global__ void set_kernel(float* y, int n, float v) {
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < n;
       i += static_cast<int>(gridDim.x * blockDim.x))
    y[i] = v;
}

}  // namespace emu_test

using namespace emu_test;

namespace {

cudaStream_t make_stream(unsigned flags) {
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, flags) == cudaSuccess);
  return s;
}

}  // namespace

TEST_CASE("queued work runs when something waits for it, not before") {
  EmulatedDevice dev;
  cudaStream_t s = make_stream(cudaStreamNonBlocking);
  DeviceArray<float> x(8);
  float* pinned = nullptr;
  REQUIRE(cudaMallocHost(reinterpret_cast<void**>(&pinned), 32) == cudaSuccess);
  for (int i = 0; i < 8; ++i) pinned[i] = -1.0f;
  CUDA_EMULATED_LAUNCH(set_kernel, 1, 32, 0, s)(x.data(), 8, 3.0f);
  REQUIRE(cudaMemcpyAsync(pinned, x.data(), 32, cudaMemcpyDeviceToHost, s) == cudaSuccess);
  CHECK(pinned[0] == -1.0f);  // a host that reads now reads what was there
  cudaEvent_t e = nullptr;
  REQUIRE(cudaEventCreate(&e) == cudaSuccess);
  REQUIRE(cudaEventRecord(e, s) == cudaSuccess);
  REQUIRE(cudaEventSynchronize(e) == cudaSuccess);
  CHECK(pinned[7] == 3.0f);
  float ms = -1;
  REQUIRE(cudaEventElapsedTime(&ms, e, e) == cudaSuccess);
  CHECK(ms == 0.0f);
  REQUIRE(cudaEventDestroy(e) == cudaSuccess);
  REQUIRE(cudaFreeHost(pinned) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
}

TEST_CASE("a missing stream wait reads stale data; the event's wait reads the new data") {
  EmulatedDevice dev;
  cudaStream_t producer = make_stream(cudaStreamNonBlocking),
               consumer = make_stream(cudaStreamNonBlocking);
  DeviceArray<float> x(64), y(64), z(64);
  CUDA_EMULATED_LAUNCH(set_kernel, 2, 32, 0, producer)(x.data(), 64, 7.0f);
  // No wait: the copy runs when the consumer is synchronised, before the producer's kernel.
  REQUIRE(cudaMemcpyAsync(y.data(), x.data(), 256, cudaMemcpyDeviceToDevice, consumer) ==
          cudaSuccess);
  REQUIRE(cudaStreamSynchronize(consumer) == cudaSuccess);
  for (const float v : y.download()) CHECK(v != 7.0f);  // fresh memory: NaN
  // With the wait the copy sees the kernel's values.
  CUDA_EMULATED_LAUNCH(set_kernel, 2, 32, 0, producer)(x.data(), 64, 8.0f);
  cudaEvent_t ready = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming) == cudaSuccess);
  REQUIRE(cudaEventRecord(ready, producer) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(consumer, ready, 0) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(z.data(), x.data(), 256, cudaMemcpyDeviceToDevice, consumer) ==
          cudaSuccess);
  REQUIRE(cudaStreamSynchronize(consumer) == cudaSuccess);
  CHECK(z.download() == std::vector<float>(64, 8.0f));
  // A wait takes the event's record at the time of the wait: a later record is not waited for.
  REQUIRE(cudaStreamWaitEvent(consumer, ready, 0) == cudaSuccess);
  CUDA_EMULATED_LAUNCH(set_kernel, 2, 32, 0, producer)(x.data(), 64, 9.0f);
  REQUIRE(cudaEventRecord(ready, producer) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(z.data(), x.data(), 256, cudaMemcpyDeviceToDevice, consumer) ==
          cudaSuccess);
  REQUIRE(cudaStreamSynchronize(consumer) == cudaSuccess);
  CHECK(z.download() == std::vector<float>(64, 8.0f));
  REQUIRE(cudaEventDestroy(ready) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(producer) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(consumer) == cudaSuccess);
}

TEST_CASE("the legacy default stream and blocking streams wait for each other") {
  EmulatedDevice dev;
  cudaStream_t blocking = make_stream(cudaStreamDefault),
               non_blocking = make_stream(cudaStreamNonBlocking);
  DeviceArray<float> x(32), y(32), z(32);
  CUDA_EMULATED_LAUNCH(set_kernel, 1, 32, 0, nullptr)(x.data(), 32, 5.0f);  // legacy stream
  REQUIRE(cudaMemcpyAsync(y.data(), x.data(), 128, cudaMemcpyDeviceToDevice, blocking) ==
          cudaSuccess);
  REQUIRE(cudaMemcpyAsync(z.data(), x.data(), 128, cudaMemcpyDeviceToDevice, non_blocking) ==
          cudaSuccess);
  REQUIRE(cudaStreamSynchronize(blocking) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(non_blocking) == cudaSuccess);
  CHECK(y.download() == std::vector<float>(32, 5.0f));
  // The non-blocking stream's copy ran when it was synchronised: after the legacy kernel only
  // because the blocking stream's synchronisation had run that kernel first.
  CHECK(z.download() == std::vector<float>(32, 5.0f));
  CUDA_EMULATED_LAUNCH(set_kernel, 1, 32, 0, nullptr)(x.data(), 32, 6.0f);
  REQUIRE(cudaMemcpyAsync(z.data(), x.data(), 128, cudaMemcpyDeviceToDevice, non_blocking) ==
          cudaSuccess);
  REQUIRE(cudaStreamSynchronize(non_blocking) == cudaSuccess);
  CHECK(z.download() == std::vector<float>(32, 5.0f));  // not ordered after the legacy kernel
  REQUIRE(cudaStreamDestroy(blocking) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(non_blocking) == cudaSuccess);
}

TEST_CASE("a kernel launched on another device's stream is refused") {
  EmulatedDevice dev(1);
  cudaStream_t s = make_stream(cudaStreamNonBlocking);
  DeviceArray<float> x(32);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  CUDA_EMULATED_LAUNCH(set_kernel, 1, 32, 0, s)(x.data(), 32, 1.0f);
  CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle);
  REQUIRE(cudaSetDevice(1) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
}

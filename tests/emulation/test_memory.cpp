// Memory of the emulated device: fresh allocations hold NaN bytes; host code that touches device
// memory, and a kernel that writes past its allocation, stop the program (or fail the launch)
// with a message naming the allocation; copies are checked against their kind and their
// allocations; pageable and pinned host memory behave as the CUDA documentation says.
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "emulation_test_util.hpp"

namespace emu_test {

__global__ void write_kernel(float* y, int n, float v) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] = v;
}

}  // namespace emu_test

using namespace emu_test;

TEST_CASE("fresh device memory holds NaN bytes") {
  EmulatedDevice dev;
  DeviceArray<float> x(1000);
  std::vector<unsigned char> bytes(4000);
  REQUIRE(cudaMemcpy(bytes.data(), x.data(), 4000, cudaMemcpyDeviceToHost) == cudaSuccess);
  for (const unsigned char b : bytes) CHECK(b == 0xff);
}

TEST_CASE("host code that reads device memory stops, naming the allocation and the byte") {
  const Death d = run_to_death([] {
    float* p = nullptr;
    (void)cudaMalloc(reinterpret_cast<void**>(&p), 400);
    volatile float x = p[4];
    (void)x;
  });
  INFO(d.output);
  CHECK(d.signal == SIGABRT);
  CHECK(d.output.find("host code touched device memory at") != std::string::npos);
  CHECK(d.output.find("byte 16 of allocation") != std::string::npos);
  CHECK(d.output.find("of 400 bytes on device 0") != std::string::npos);
  CHECK(d.output.find("test_memory.cpp") != std::string::npos);  // where it was made
}

TEST_CASE("a kernel that writes past its allocation fails; one far past it stops the program") {
  {
    EmulatedDevice dev;
    DeviceArray<float> y(10);  // 40 bytes: the rest of its 256-byte granule is a canary
    CUDA_EMULATED_LAUNCH(write_kernel, 1, 32, 0, nullptr)(y.data(), 12, 1.0f);
    const std::string error = dev.sync_error();
    CHECK(error.find("cudaErrorIllegalAddress") != std::string::npos);
    CHECK(error.find("write_kernel") != std::string::npos);
    CHECK(error.find("byte 0 past the end of allocation") != std::string::npos);
  }
  const Death d = run_to_death([] {
    float* p = nullptr;
    (void)cudaMalloc(reinterpret_cast<void**>(&p), 4096);
    CUDA_EMULATED_LAUNCH(write_kernel, 64, 64, 0, nullptr)(p, 4096, 1.0f);
    (void)cudaDeviceSynchronize();
  });
  INFO(d.output);
  CHECK(d.signal == SIGABRT);
  CHECK(d.output.find("a kernel thread (kernel write_kernel, block (16,0,0), thread 0) touched") !=
        std::string::npos);
  CHECK(d.output.find("bytes past the end of allocation") != std::string::npos);
}

TEST_CASE("copies are checked against their kind and their allocations") {
  EmulatedDevice dev;
  DeviceArray<float> x(16), y(16);
  std::vector<float> host(16, 1.0f);
  CHECK(cudaMemcpy(y.data(), x.data(), 64, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy(host.data(), y.data(), 64, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy(x.data(), host.data(), 68, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy(x.data(), host.data(), 64, cudaMemcpyDeviceToDevice) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy(x.data(), host.data(), 64, cudaMemcpyDefault) == cudaSuccess);
  CHECK(cudaMemcpy(y.data(), x.data(), 64, cudaMemcpyDeviceToDevice) == cudaSuccess);
  CHECK(y.download() == host);
  // A freed pointer is no device memory any more.
  void* gone = nullptr;
  REQUIRE(cudaMalloc(&gone, 64) == cudaSuccess);
  REQUIRE(cudaFree(gone) == cudaSuccess);
  CHECK(cudaMemcpy(host.data(), gone, 64, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
  CHECK(cudaFree(gone) == cudaErrorInvalidValue);  // twice
  (void)cudaGetLastError();
}

TEST_CASE("pageable and pinned host memory: when a copy reads and writes it") {
  EmulatedDevice dev;
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  DeviceArray<float> x(4);
  // Pageable to device: staged at the call, so the host may change its buffer at once.
  std::vector<float> pageable(4, 1.0f);
  REQUIRE(cudaMemcpyAsync(x.data(), pageable.data(), 16, cudaMemcpyHostToDevice, s) == cudaSuccess);
  pageable.assign(4, 2.0f);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(x.download() == std::vector<float>(4, 1.0f));
  // Pinned to device: read when the copy runs (here, at the synchronisation).
  float* pinned = nullptr;
  REQUIRE(cudaMallocHost(reinterpret_cast<void**>(&pinned), 16) == cudaSuccess);
  for (int i = 0; i < 4; ++i) pinned[i] = 3.0f;
  REQUIRE(cudaMemcpyAsync(x.data(), pinned, 16, cudaMemcpyHostToDevice, s) == cudaSuccess);
  for (int i = 0; i < 4; ++i) pinned[i] = 4.0f;  // a race on a GPU; here the copy sees 4
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(x.download() == std::vector<float>(4, 4.0f));
  // Device to pinned: nothing lands before something waits.
  REQUIRE(cudaMemcpyAsync(pinned, x.data(), 16, cudaMemcpyDeviceToHost, s) == cudaSuccess);
  for (int i = 0; i < 4; ++i) pinned[i] = 5.0f;
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(pinned[0] == 4.0f);
  // Device to pageable: the call returns once the copy is done.
  std::vector<float> back(4, 0.0f);
  CUDA_EMULATED_LAUNCH(write_kernel, 1, 32, 0, s)(x.data(), 4, 6.0f);
  REQUIRE(cudaMemcpyAsync(back.data(), x.data(), 16, cudaMemcpyDeviceToHost, s) == cudaSuccess);
  CHECK(back == std::vector<float>(4, 6.0f));
  REQUIRE(cudaFreeHost(pinned) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
}

TEST_CASE("cudaPointerGetAttributes tells device, pinned and pageable memory apart") {
  EmulatedDevice dev(2);
  DeviceArray<float> x(4);
  float* pinned = nullptr;
  REQUIRE(cudaMallocHost(reinterpret_cast<void**>(&pinned), 16) == cudaSuccess);
  float pageable[4];
  cudaPointerAttributes a{};
  REQUIRE(cudaPointerGetAttributes(&a, x.data() + 1) == cudaSuccess);
  CHECK(a.type == cudaMemoryTypeDevice);
  CHECK(a.device == 2);
  REQUIRE(cudaPointerGetAttributes(&a, pinned) == cudaSuccess);
  CHECK(a.type == cudaMemoryTypeHost);
  REQUIRE(cudaPointerGetAttributes(&a, pageable) == cudaSuccess);
  CHECK(a.type == cudaMemoryTypeUnregistered);
  REQUIRE(cudaFreeHost(pinned) == cudaSuccess);
}

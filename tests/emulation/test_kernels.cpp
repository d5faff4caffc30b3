// Kernels on the emulated device: barriers and warp intrinsics give CUDA's results, and each
// rule a kernel can break (a barrier reached by part of a block, a lane outside its mask, a
// result that depends on the order the threads run in, a launch over the limits) makes the
// launch fail with a message naming the kernel, the block and the thread.
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "emulation_test_util.hpp"

namespace emu_test {

// out[block] = the sum of in over the block's threads: a shared-memory tree, warp shuffles
// for the last 32.
__global__ void block_sum_kernel(float* out, const float* in) {
  __shared__ float part[256];
  const unsigned t = threadIdx.x;
  part[t] = in[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half >= 32; half /= 2) {
    if (t < half) part[t] += part[t + half];
    __syncthreads();
  }
  if (t < 32) {
    float v = part[t];
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (t == 0) out[blockIdx.x] = v;
  }
}

// The same without the barrier after the first store: a thread may add a partner's slot
// before the partner wrote it.
__global__ void racy_block_sum_kernel(float* out, const float* in) {
  __shared__ float part[256];
  const unsigned t = threadIdx.x;
  part[t] = in[blockIdx.x * blockDim.x + t];
  for (unsigned half = blockDim.x / 2; half >= 32; half /= 2) {
    if (t < half) part[t] += part[t + half];
    __syncthreads();
  }
  if (t < 32) {
    float v = part[t];
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (t == 0) out[blockIdx.x] = v;
  }
}

// Threads past n return before the block's barrier.
__global__ void early_exit_kernel(float* y, int n) {
  const int i = static_cast<int>(threadIdx.x);
  if (i >= n) return;
  y[i] = 1.0f;
  __syncthreads();
  y[i] += 1.0f;
}

// Lane 3 shuffles with a mask that leaves it out.
__global__ void outside_mask_kernel(int* y) {
  const int lane = static_cast<int>(threadIdx.x);
  const unsigned mask = lane == 3 ? 0x0000fff0u : 0xffffffffu;
  y[lane] = __shfl_sync(mask, lane, 0);
}

// Votes and shuffles of every kind, with exited lanes and partial masks.
__global__ void warp_ops_kernel(unsigned* y) {
  const int lane = static_cast<int>(threadIdx.x);
  y[lane] = __ballot_sync(0xffffffffu, lane % 3 == 0);
  y[32 + lane] = static_cast<unsigned>(__shfl_up_sync(0xffffffffu, lane, 5));
  y[64 + lane] = static_cast<unsigned>(__shfl_down_sync(0xffffffffu, lane, 7, 16));
  y[96 + lane] = static_cast<unsigned>(__any_sync(0xffffffffu, lane == 17)) +
                 2u * static_cast<unsigned>(__all_sync(0xffffffffu, lane < 31));
  if (lane >= 16) return;
  // Only the low half is left; a mask naming exited lanes ignores them.
  y[128 + lane] = __ballot_sync(0xffffffffu, 1);
  y[160 + lane] = static_cast<unsigned>(__shfl_sync(0x0000ffffu, lane * 10, 15 - lane));
}

}  // namespace emu_test

using namespace emu_test;

TEST_CASE("a block reduction with barriers and shuffles sums in every thread order") {
  EmulatedDevice dev;
  const int blocks = 3, threads = 256;
  std::vector<float> in(static_cast<std::size_t>(blocks * threads));
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 17) - 8.0f;
  DeviceArray<float> d_in(in), d_out(blocks);
  CUDA_EMULATED_LAUNCH(block_sum_kernel, blocks, threads, 0, nullptr)(d_out.data(), d_in.data());
  REQUIRE(cudaGetLastError() == cudaSuccess);
  const std::vector<float> out = d_out.download();
  for (int b = 0; b < blocks; ++b) {
    float want = 0;
    for (int t = 0; t < threads; ++t) want += in[static_cast<std::size_t>(b * threads + t)];
    CHECK(out[static_cast<std::size_t>(b)] == want);
  }
}

TEST_CASE("a missing __syncthreads makes the result depend on the order: the launch fails") {
  EmulatedDevice dev;
  const int blocks = 2, threads = 256;
  std::vector<float> in(static_cast<std::size_t>(blocks * threads));
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 5) + 1.0f;
  DeviceArray<float> d_in(in), d_out(blocks);
  CUDA_EMULATED_LAUNCH(racy_block_sum_kernel, blocks, threads, 0, nullptr)
  (d_out.data(), d_in.data());
  REQUIRE(cudaGetLastError() == cudaSuccess);  // the launch itself is fine
  const std::string error = dev.sync_error();
  CHECK(error.find("cudaErrorLaunchFailure") != std::string::npos);
  CHECK(error.find("racy_block_sum_kernel") != std::string::npos);
  CHECK(error.find("depends on the order the threads run in") != std::string::npos);
}

TEST_CASE("__syncthreads reached by part of a block fails, naming the kernel, block and threads") {
  EmulatedDevice dev;
  DeviceArray<float> y(64);
  CUDA_EMULATED_LAUNCH(early_exit_kernel, 1, 64, 0, nullptr)(y.data(), 40);
  const std::string error = dev.sync_error();
  CHECK(error.find("early_exit_kernel") != std::string::npos);
  CHECK(error.find("block (0,0,0)") != std::string::npos);
  CHECK(error.find("reached by part of the block: 40 threads wait there while 24 exited") !=
        std::string::npos);
  CHECK(error.find("thread 40") != std::string::npos);
}

TEST_CASE("a lane outside its own mask fails, naming the lane") {
  EmulatedDevice dev;
  DeviceArray<int> y(32);
  CUDA_EMULATED_LAUNCH(outside_mask_kernel, 1, 32, 0, nullptr)(y.data());
  const std::string error = dev.sync_error();
  CHECK(error.find("outside_mask_kernel") != std::string::npos);
  CHECK(error.find("thread 3 (lane 3) calls __shfl_sync") != std::string::npos);
  CHECK(error.find("does not name it") != std::string::npos);
}

TEST_CASE("votes and shuffles give CUDA's results, exited lanes left out of a mask") {
  EmulatedDevice dev;
  DeviceArray<unsigned> y(192);
  CUDA_EMULATED_LAUNCH(warp_ops_kernel, 1, 32, 0, nullptr)(y.data());
  const std::vector<unsigned> out = y.download();
  unsigned ballot = 0;
  for (int l = 0; l < 32; l += 3) ballot |= 1u << l;
  for (unsigned l = 0; l < 32; ++l) {
    CAPTURE(l);
    CHECK(out[l] == ballot);
    CHECK(out[32 + l] == (l >= 5 ? l - 5 : l));             // up: lanes below delta keep theirs
    CHECK(out[64 + l] == ((l % 16) + 7 < 16 ? l + 7 : l));  // down within segments of 16
    CHECK(out[96 + l] == 1u);                               // any: yes; all: no (lane 31)
  }
  for (unsigned l = 0; l < 16; ++l) {
    CHECK(out[128 + l] == 0xffffu);
    CHECK(out[160 + l] == (15 - l) * 10);
  }
}

TEST_CASE("launches over CUDA's limits fail at the launch with cudaErrorInvalidConfiguration") {
  EmulatedDevice dev;
  DeviceArray<float> y(1);
  CUDA_EMULATED_LAUNCH(early_exit_kernel, 1, 1025, 0, nullptr)(y.data(), 0);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  CUDA_EMULATED_LAUNCH(early_exit_kernel, dim3(1, 65536), 32, 0, nullptr)(y.data(), 0);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  CUDA_EMULATED_LAUNCH(early_exit_kernel, 1, 32, 64 << 10, nullptr)(y.data(), 0);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  CUDA_EMULATED_LAUNCH(early_exit_kernel, 0, 32, 0, nullptr)(y.data(), 0);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  CHECK(cudaGetLastError() == cudaSuccess);  // not sticky
}

#pragma once
// SEQPAR_LAUNCH(kernel, grid, block, shared, stream)(args...) launches a kernel: under nvcc it
// is kernel<<<grid, block, shared, stream>>>(args...); in a unit compiled for the tests'
// emulated device (tests/emulation), whose cuda_runtime.h stands in for the toolkit's, it is
// that header's CUDA_EMULATED_LAUNCH, a call the host compiler can parse, with the same meaning.

#include "seqpar/core/separate_compilation.hpp"

#if defined(__CUDACC__)
#define SEQPAR_LAUNCH(kernel, grid, block, shared, stream) kernel<<<grid, block, shared, stream>>>
#elif defined(SEQPAR_CUDA_KERNELS)
#define SEQPAR_LAUNCH(kernel, grid, block, shared, stream) \
  CUDA_EMULATED_LAUNCH(kernel, grid, block, shared, stream)
#endif

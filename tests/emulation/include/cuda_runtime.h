#pragma once
// Stand-in for the CUDA toolkit's cuda_runtime.h on the emulated device (tests/emulation): the
// runtime's host API, and what nvcc gives device code (__global__, threadIdx, __syncthreads,
// the warp intrinsics) with kernel launches written as CUDA_EMULATED_LAUNCH.

#include "seqpar_emulation/device_code.hpp"
#include "seqpar_emulation/runtime_api.hpp"

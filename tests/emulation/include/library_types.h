#pragma once
// Stand-in for the CUDA toolkit's library_types.h on the emulated device (tests/emulation):
// the data types cuBLAS and the runtime name.

enum cudaDataType_t {
  CUDA_R_16F = 2,
  CUDA_R_32F = 0,
  CUDA_R_64F = 1,
  CUDA_R_16BF = 14,
};
using cudaDataType = cudaDataType_t;

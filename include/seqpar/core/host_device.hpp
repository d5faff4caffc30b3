#pragma once
// SEQPAR_HOST_DEVICE: marks element- and row-wise bodies shared by the CPU loops
// and the CUDA kernels.

#if defined(__CUDACC__)
#define SEQPAR_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define SEQPAR_HOST_DEVICE inline
#endif

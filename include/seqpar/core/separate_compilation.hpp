#pragma once
// SEQPAR_DECL: seqpar's non-template input/output code and CUDA kernels inline in the headers,
// or compiled once under SEQPAR_SEPARATE_COMPILATION, to save many-unit programs their compile
// time.

/// Declares (and, in the headers' definitions, defines) a non-template function of seqpar:
/// `inline` when the definitions are in the headers, nothing when the program compiles them
/// once.
#if defined(SEQPAR_SEPARATE_COMPILATION)
#define SEQPAR_DECL
#else
#define SEQPAR_DECL inline
#endif

// SEQPAR_CUDA_BACKEND: the unit sees the CUDA backend; SEQPAR_CUDA_KERNELS: it holds its kernels
// (nvcc, or the tests' emulated device). A host-compiled unit sees the backend only when built
// separately and linked to seqpar::cuda; <seqpar/compiled_cuda.hpp> then compiles the kernels once.
#if defined(__CUDACC__) || defined(SEQPAR_EMULATED_CUDA_KERNELS)
#define SEQPAR_CUDA_KERNELS 1
#endif
#if defined(SEQPAR_CUDA_KERNELS) || \
    (defined(SEQPAR_SEPARATE_COMPILATION) && defined(SEQPAR_WITH_CUDA))
#define SEQPAR_CUDA_BACKEND 1
#endif

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

// SEQPAR_CUDA_BACKEND: defined where a unit sees the CUDA backend (Cuda, Ops<Cuda>,
// CudaContext, the CUDA communicators). Its kernels need nvcc, so a header-only program sees
// it only under nvcc. A program built with SEQPAR_SEPARATE_COMPILATION and linked to
// seqpar::cuda (SEQPAR_WITH_CUDA) sees it under any compiler: Ops<Cuda> is then declared
// only, and its kernels are compiled once, by nvcc, in the unit that includes
// <seqpar/compiled_cuda.hpp>; its other units (the trainers) are ordinary C++ compiled by
// the host compiler against the CUDA toolkit's headers.
//
// SEQPAR_CUDA_KERNELS: defined where a unit holds the CUDA backend's kernels: under nvcc, and in
// the units the tests' emulated CUDA device (tests/emulation) compiles with the host compiler in
// nvcc's place (SEQPAR_EMULATED_CUDA_KERNELS). Such a unit also sees the CUDA backend.
#if defined(__CUDACC__) || defined(SEQPAR_EMULATED_CUDA_KERNELS)
#define SEQPAR_CUDA_KERNELS 1
#endif
#if defined(SEQPAR_CUDA_KERNELS) || \
    (defined(SEQPAR_SEPARATE_COMPILATION) && defined(SEQPAR_WITH_CUDA))
#define SEQPAR_CUDA_BACKEND 1
#endif

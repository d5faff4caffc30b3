#pragma once
// The CUDA backend's kernels, compiled once for a program built with
// SEQPAR_SEPARATE_COMPILATION (core/separate_compilation.hpp): the one unit that includes this
// header is compiled by nvcc; every other unit of the program, the trainers included, may be
// compiled by the host compiler and sees Ops<Cuda> declared only. The ops are instantiated
// for every storage type T (float, __nv_bfloat16, __half), with statistics, positions and
// GEMM outputs S in T or float, token ids in std::int32_t or std::int64_t, and every pair of
// storage types for add, convert and adamw_mixed. A program that calls an op with other types
// fails to link, naming it.

#include "seqpar/core/separate_compilation.hpp"

#if !defined(SEQPAR_SEPARATE_COMPILATION) || !defined(SEQPAR_CUDA_KERNELS)
#error \
    "seqpar/compiled_cuda.hpp is for the one nvcc unit of a program built with SEQPAR_SEPARATE_COMPILATION; without it every nvcc unit compiles the kernels itself"
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "seqpar/backend/cuda/impl/ops.hpp"

namespace seqpar::inline v0 {

// One explicit instantiation of Ops<Cuda>::<op><args>; the declaration's type is read from the
// op itself, so its parameters are written once, in ops.hpp.
#define SEQPAR_CUDA_OP(...) \
  template std::remove_pointer_t<decltype(&Ops<Cuda>::__VA_ARGS__)> Ops<Cuda>::__VA_ARGS__;

// The ops of one storage type.
#define SEQPAR_CUDA_OPS_OF(T)               \
  SEQPAR_CUDA_OP(gemm_batched<T>)           \
  SEQPAR_CUDA_OP(add_bias<T>)               \
  SEQPAR_CUDA_OP(column_sum<T>)             \
  SEQPAR_CUDA_OP(add_bias_residual<T>)      \
  SEQPAR_CUDA_OP(gelu_forward<T>)           \
  SEQPAR_CUDA_OP(gelu_backward<T>)          \
  SEQPAR_CUDA_OP(scale<T>)                  \
  SEQPAR_CUDA_OP(fill<T>)                   \
  SEQPAR_CUDA_OP(sum_squares<T>)            \
  SEQPAR_CUDA_OP(sum_squares_accumulate<T>) \
  SEQPAR_CUDA_OP(adamw<T>)                  \
  SEQPAR_CUDA_OP(attention_backward<T>)     \
  SEQPAR_CUDA_OP(kv_store<T>)               \
  SEQPAR_CUDA_OP(next_token_max<T>)         \
  SEQPAR_CUDA_OP(next_token_sum_exp<T>)     \
  SEQPAR_CUDA_OP(next_token_scores<T>)      \
  SEQPAR_CUDA_OP(softmax_stats_rescale<T>)  \
  SEQPAR_CUDA_OP(cross_entropy_loss<T>)     \
  SEQPAR_CUDA_OPS_WITH_IDS(T, std::int32_t) \
  SEQPAR_CUDA_OPS_WITH_IDS(T, std::int64_t)

// The ops of storage T and token ids Id.
#define SEQPAR_CUDA_OPS_WITH_IDS(T, Id)     \
  SEQPAR_CUDA_OP(embedding_forward<T, Id>)  \
  SEQPAR_CUDA_OP(embedding_backward<T, Id>) \
  SEQPAR_CUDA_OP(kv_gather<T, Id>)          \
  SEQPAR_CUDA_OP(gather_rows<T, Id>)        \
  SEQPAR_CUDA_OP(scatter_rows<T, Id>)

// The ops of storage T whose statistics, positions or GEMM output are S (T or float).
#define SEQPAR_CUDA_OPS_WITH_STATS(T, S)                 \
  SEQPAR_CUDA_OP(gemm<T, S>)                             \
  SEQPAR_CUDA_OP(layernorm_forward<T, S>)                \
  SEQPAR_CUDA_OP(layernorm_backward<T, S>)               \
  SEQPAR_CUDA_OP(attention_forward<T, S>)                \
  SEQPAR_CUDA_OP(attention_probs<T, S>)                  \
  SEQPAR_CUDA_OP(flash_attention_forward<T, S>)          \
  SEQPAR_CUDA_OP(flash_attention_backward<T, S>)         \
  SEQPAR_CUDA_OP(decode_attention<T, S>)                 \
  SEQPAR_CUDA_OP(softmax_stats<T, S, std::int32_t>)      \
  SEQPAR_CUDA_OP(softmax_stats<T, S, std::int64_t>)      \
  SEQPAR_CUDA_OP(cross_entropy_grad<T, S, std::int32_t>) \
  SEQPAR_CUDA_OP(cross_entropy_grad<T, S, std::int64_t>)

// The ops between two storage types.
#define SEQPAR_CUDA_OPS_BETWEEN(A, B) \
  SEQPAR_CUDA_OP(add<A, B>)           \
  SEQPAR_CUDA_OP(convert<A, B>)       \
  SEQPAR_CUDA_OP(adamw_mixed<A, B>)

#define SEQPAR_CUDA_OPS_FROM(A)             \
  SEQPAR_CUDA_OPS_BETWEEN(A, float)         \
  SEQPAR_CUDA_OPS_BETWEEN(A, __nv_bfloat16) \
  SEQPAR_CUDA_OPS_BETWEEN(A, __half)

SEQPAR_CUDA_OP(next_token_top_k<std::int32_t>)
SEQPAR_CUDA_OP(next_token_top_k<std::int64_t>)

SEQPAR_CUDA_OPS_OF(float)
SEQPAR_CUDA_OPS_OF(__nv_bfloat16)
SEQPAR_CUDA_OPS_OF(__half)

SEQPAR_CUDA_OPS_WITH_STATS(float, float)
SEQPAR_CUDA_OPS_WITH_STATS(__nv_bfloat16, __nv_bfloat16)
SEQPAR_CUDA_OPS_WITH_STATS(__nv_bfloat16, float)
SEQPAR_CUDA_OPS_WITH_STATS(__half, __half)
SEQPAR_CUDA_OPS_WITH_STATS(__half, float)

SEQPAR_CUDA_OPS_FROM(float)
SEQPAR_CUDA_OPS_FROM(__nv_bfloat16)
SEQPAR_CUDA_OPS_FROM(__half)

#undef SEQPAR_CUDA_OPS_FROM
#undef SEQPAR_CUDA_OPS_BETWEEN
#undef SEQPAR_CUDA_OPS_WITH_STATS
#undef SEQPAR_CUDA_OPS_WITH_IDS
#undef SEQPAR_CUDA_OPS_OF
#undef SEQPAR_CUDA_OP

}  // namespace seqpar::inline v0

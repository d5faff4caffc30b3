#pragma once
// Element- and row-wise kernels of the CUDA backend: the bodies are those of
// backend/kernels.hpp (shared with the CPU loops) in float, loading and storing the
// storage type. Compiled only in units that hold kernels (SEQPAR_CUDA_KERNELS).

#if defined(SEQPAR_CUDA_KERNELS)

#include <cstdint>

#include "seqpar/backend/cuda/context.hpp"
#include "seqpar/backend/cuda/error.hpp"
#include "seqpar/backend/cuda/numeric.hpp"
#include "seqpar/backend/kernels.hpp"

namespace seqpar::inline v0::detail {

inline constexpr int elementwise_threads = 256;

#define SEQPAR_GRID_STRIDE(i, n)                                                      \
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < (n); \
       i += std::int64_t{gridDim.x} * blockDim.x)

// ---- kernels ---------------------------------------------------------------------

template <class T, class U>
__global__ void add_kernel(T* y, const U* x, std::int64_t n) {
  SEQPAR_GRID_STRIDE(i, n) y[i] = from_float<T>(to_float(y[i]) + to_float(x[i]));
}

template <class T>
__global__ void scale_kernel(T* y, float s, std::int64_t n) {
  SEQPAR_GRID_STRIDE(i, n) y[i] = from_float<T>(to_float(y[i]) * s);
}

template <class T>
__global__ void fill_kernel(T* y, T v, std::int64_t n) {
  SEQPAR_GRID_STRIDE(i, n) y[i] = v;
}

template <class To, class From>
__global__ void convert_kernel(To* y, const From* x, std::int64_t n) {
  SEQPAR_GRID_STRIDE(i, n) y[i] = from_float<To>(to_float(x[i]));
}

template <class T>
__global__ void gelu_forward_kernel(T* y, const T* x, std::int64_t n) {
  SEQPAR_GRID_STRIDE(i, n) y[i] = from_float<T>(kernels::gelu(to_float(x[i])));
}

// dx may alias dy: each element is read before it is written, by the same thread.
template <class T>
__global__ void gelu_backward_kernel(T* dx, const T* dy, const T* x, std::int64_t n) {
  SEQPAR_GRID_STRIDE(i, n)
  dx[i] = from_float<T>(to_float(dy[i]) * kernels::gelu_grad(to_float(x[i])));
}

// y[n, d] += b[d] (+ r[n, d] when r is given); one row per block.
template <class T>
__global__ void add_bias_kernel(T* y, const T* b, const T* r, std::int64_t n, std::int64_t d) {
  for (std::int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    T* yi = y + i * d;
    const T* ri = r ? r + i * d : nullptr;
    for (std::int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      float v = to_float(yi[j]) + to_float(b[j]);
      if (ri) v += to_float(ri[j]);
      yi[j] = from_float<T>(v);
    }
  }
}

// AdamW over the segments of `decay`, each with its flag; the segments stay in the
// kernel's parameter space (__grid_constant__), and a thread, whose i only grows, walks
// them once.
template <class T>
__global__ void adamw_kernel(T* p, const T* g, T* m, T* v, std::int64_t n,
                             const __grid_constant__ kernels::Segments<bool> decay,
                             kernels::AdamCoeffs c) {
  int k = 0;
  SEQPAR_GRID_STRIDE(i, n) {
    while (i >= decay.end[k]) ++k;
    float pf = to_float(p[i]), mf = to_float(m[i]), vf = to_float(v[i]);
    kernels::adamw(pf, to_float(g[i]), mf, vf, c, decay.value[k]);
    p[i] = from_float<T>(pf);
    m[i] = from_float<T>(mf);
    v[i] = from_float<T>(vf);
  }
}

// fp32 master weights and moments, a 16-bit (or fp32) gradient times `grad_factor`
// (1 / loss scale), and the updated weight rounded into the 16-bit working copy; the
// segments as in adamw_kernel.
template <class W, class G>
__global__ void adamw_mixed_kernel(float* master, W* weight, const G* g, float* m, float* v,
                                   std::int64_t n,
                                   const __grid_constant__ kernels::Segments<bool> decay,
                                   kernels::AdamCoeffs c, float grad_factor) {
  int k = 0;
  SEQPAR_GRID_STRIDE(i, n) {
    while (i >= decay.end[k]) ++k;
    float p = master[i];
    kernels::adamw(p, kernels::mul_of(to_float(g[i]), grad_factor), m[i], v[i], c, decay.value[k]);
    master[i] = p;
    if (weight) weight[i] = from_float<W>(p);
  }
}

// dst[r, :] = src[index[r], :]  (gather)  or  dst[index[r], :] = src[r, :]  (scatter)
template <class T, class Id, bool kScatter>
__global__ void move_rows_kernel(T* dst, const T* src, const Id* index, std::int64_t n,
                                 std::int64_t d) {
  for (std::int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const std::int64_t other = static_cast<std::int64_t>(index[r]);
    T* out = dst + (kScatter ? other : r) * d;
    const T* in = src + (kScatter ? r : other) * d;
    for (std::int64_t j = threadIdx.x; j < d; j += blockDim.x) out[j] = in[j];
  }
}

#undef SEQPAR_GRID_STRIDE

// ---- launchers ------------------------------------------------------------------

template <class Kernel, class... Args>
void launch_elementwise(Kernel kernel, std::int64_t n, Args... args) {
  if (n <= 0) return;
  const cudaStream_t s = CudaContext::current().stream();
  SEQPAR_LAUNCH(kernel, grid_for(n, elementwise_threads), elementwise_threads, 0, s)(args...);
  SEQPAR_CUDA_CHECK_LAUNCH();
}

template <class Kernel, class... Args>
void launch_rows(Kernel kernel, std::int64_t rows, Args... args) {
  if (rows <= 0) return;
  const cudaStream_t s = CudaContext::current().stream();
  SEQPAR_LAUNCH(kernel, grid_for_rows(rows), elementwise_threads, 0, s)(args...);
  SEQPAR_CUDA_CHECK_LAUNCH();
}

}  // namespace seqpar::inline v0::detail

#endif  // SEQPAR_CUDA_KERNELS

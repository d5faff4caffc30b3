#pragma once
// Element- and row-wise bodies written once for both backends: the CPU loops call
// them, and so do the CUDA kernels, so the CPU tests check the GPU arithmetic too.

#include <cmath>
#include <cstdint>

#include "seqpar/core/host_device.hpp"

namespace seqpar::inline v0::kernels {

// The math the bodies call unqualified, so that a SIMD type of a backend (detail::F32x8)
// brings its own by argument-dependent lookup and a body runs on many lanes at once.
template <class T>
SEQPAR_HOST_DEVICE T tanh_of(T x) {
  return std::tanh(x);
}
template <class T>
SEQPAR_HOST_DEVICE T exp_of(T x) {
  return std::exp(x);
}
template <class T>
SEQPAR_HOST_DEVICE T sqrt_of(T x) {
  return std::sqrt(x);
}
template <class T>
SEQPAR_HOST_DEVICE T log_of(T x) {
  return std::log(x);
}
// a * b + c rounded once.
template <class T>
SEQPAR_HOST_DEVICE T fma_of(T a, T b, T c) {
  return std::fma(a, b, c);
}
// a * b rounded on its own, never contracted with a sum it meets into one fused multiply-add
// (nvcc contracts by default, and so does a host compiler that targets FMA under
// -ffp-contract=fast): a product every launcher must round the same way.
template <class T>
SEQPAR_HOST_DEVICE T mul_of(T a, T b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  T p = a * b;
#if defined(__GNUC__)
  asm("" : "+m"(p));  // an opaque step between the product and its use
#endif
  return p;
#endif
}

// Where `id` falls in the local range [begin, begin + count) of a split table (an
// embedding's rows, a vocabulary chunk's columns): its local index, or -1 outside.
template <class Id>
SEQPAR_HOST_DEVICE std::int64_t local_index(Id id, std::int64_t begin, std::int64_t count) {
  const std::int64_t r = static_cast<std::int64_t>(id) - begin;
  return r >= 0 && r < count ? r : -1;
}

// ---- layernorm: a row's mean and variance are summed by the launcher (a loop, a warp);
// what it does with them is here.

// 1 / sqrt(var + eps) of a row.
template <class T>
SEQPAR_HOST_DEVICE T layernorm_rstd(T var, T eps) {
  return T(1) / sqrt_of(var + eps);
}
// The normalised element (x - mean) rstd.
template <class T>
SEQPAR_HOST_DEVICE T layernorm_xhat(T x, T mean, T rstd) {
  return (x - mean) * rstd;
}
// y = xhat w + b.
template <class T>
SEQPAR_HOST_DEVICE T layernorm_out(T x, T mean, T rstd, T w, T b) {
  return layernorm_xhat(x, mean, rstd) * w + b;
}
// d loss / d x of one element, from dy w (g), the row means of g and of g xhat, and rstd:
// (g - mean(g) - xhat mean(g xhat)) rstd.
template <class T>
SEQPAR_HOST_DEVICE T layernorm_dx(T g, T xhat, T mean_g, T mean_g_xhat, T rstd) {
  return (g - mean_g - xhat * mean_g_xhat) * rstd;
}

// ---- softmax rows (ALiBi attention, the chunked cross-entropy)

// A score with its ALiBi bias: slope times the key's position (the key's only; softmax
// ignores a per-row constant).
template <class T>
SEQPAR_HOST_DEVICE T alibi_score(T s, T slope, T pos) {
  return s + slope * pos;
}
// The softmax backward of one element: p (dp - sum_j p_j dp_j).
template <class T>
SEQPAR_HOST_DEVICE T softmax_grad(T p, T dp, T dot) {
  return p * (dp - dot);
}
// A sum of exps taken against max `from`, moved to max `to` (>= from).
template <class T>
SEQPAR_HOST_DEVICE T rescaled_sum(T sum, T from, T to) {
  return sum * exp_of(from - to);
}
// log sum_j exp(x_j) from the row's max and its sum of exp(x_j - max).
template <class T>
SEQPAR_HOST_DEVICE T log_sum_exp(T mx, T sum) {
  return mx + log_of(sum);
}

// ---- decoding's next-token scores (nn/generate.hpp)

// A token's log-probability from its logit, its row's max and log sum_j exp(l_j - max), in
// that order, as torch's log_softmax.
template <class T>
SEQPAR_HOST_DEVICE T log_probability(T l, T mx, T lse) {
  return (l - mx) - lse;
}
// transformers' repetition penalty of a seen token's score: s / p when s > 0, s p otherwise.
template <class T>
SEQPAR_HOST_DEVICE T repetition_penalised(T s, T p) {
  return s < T(0) ? s * p : s / p;
}
// The order of decoding's candidates: (score a, index a) ranks before (score b, index b) when
// its score is larger, or equal with the smaller index (the first of equal ones, as an
// argmax or a stable sort has it). A NaN score ranks before every number, so that a row
// holding one shows it as its best candidate, where decoding refuses it.
template <class T, class I>
SEQPAR_HOST_DEVICE bool ranks_before(T score_a, I index_a, T score_b, I index_b) {
  const bool nan_a = score_a != score_a, nan_b = score_b != score_b;
  if (nan_a || nan_b) return nan_a && (!nan_b || index_a < index_b);
  return score_a > score_b || (score_a == score_b && index_a < index_b);
}

// tanh-form GELU as BLOOM computes it: 0.5 x (1 + tanh(0.79788456 x (1 + 0.044715 x^2))).
template <class T>
SEQPAR_HOST_DEVICE T gelu(T x) {
  const T t = tanh_of(T(0.79788456) * x * (T(1) + T(0.044715) * x * x));
  return x * T(0.5) * (T(1) + t);
}

// d gelu / dx = 0.5 x (1 - t^2)(0.79788456 + 0.1070322243 x^2) + 0.5 (1 + t).
template <class T>
SEQPAR_HOST_DEVICE T gelu_grad(T x) {
  const T t = tanh_of(T(0.79788456) * x * (T(1) + T(0.044715) * x * x));
  return T(0.5) * x * ((T(1) - t * t) * (T(0.79788456) + T(0.1070322243) * x * x)) +
         T(0.5) * (T(1) + t);
}

/// A flat range cut into consecutive segments with a value each (AdamW's decay flag, the
/// weight of a tensor in a gradient norm): segment k is [end[k-1], end[k]), end[-1] = 0.
/// Small enough to pass to a kernel by value, so that one launch covers every tensor of a
/// unit (a multi-tensor update); a range of more segments than `capacity` takes more.
template <class V>
struct Segments {
  static constexpr int capacity = 32;
  int count = 0;
  std::int64_t end[capacity] = {};
  V value[capacity] = {};

  /// n elements, all of value v.
  static Segments uniform(std::int64_t n, V v) {
    Segments s;
    s.append(n, v);
    return s;
  }
  SEQPAR_HOST_DEVICE std::int64_t size() const { return count > 0 ? end[count - 1] : 0; }
  SEQPAR_HOST_DEVICE std::int64_t begin(int k) const { return k > 0 ? end[k - 1] : 0; }
  /// Whether elements of value v can be appended: into a new segment, or into the last
  /// one when it has the same value.
  bool can_append(V v) const { return count < capacity || value[count - 1] == v; }
  /// Appends n elements of value v (after can_append(v) said yes).
  void append(std::int64_t n, V v) {
    if (n <= 0) return;
    if (count > 0 && value[count - 1] == v) {
      end[count - 1] += n;
      return;
    }
    end[count] = size() + n;
    value[count] = v;
    ++count;
  }
};

/// Per-step constants of AdamW (torch.optim.AdamW's formulation).
struct AdamCoeffs {
  float lr, beta1, beta2, eps, weight_decay;
  float step_size;              // lr / (1 - beta1^t)
  float bias_correction2_sqrt;  // sqrt(1 - beta2^t)
};

// One parameter element: decoupled decay, then the moment updates, then the step. Every
// product that meets a sum is an explicit fma_of, so each launcher (the CPU's lanes and
// scalars, the host AdamW's AVX2 and AVX-512 paths, the CUDA kernel) rounds it once,
// whatever the compiler's contraction setting: they all give the same bits. A launcher that
// scales the gradient first (the loss scale, the clipping coefficient) does it with mul_of:
// a plain product would meet `g - m` here, and be contracted with it in some launchers only.
// (nvcc: the host launchers instantiate this body on host-only lane types.)
#ifdef __CUDACC__
#pragma nv_exec_check_disable
#endif
template <class T, class G>
SEQPAR_HOST_DEVICE void adamw(T& p, const G& g_in, T& m, T& v, const AdamCoeffs& c, bool decay) {
  const T g = static_cast<T>(g_in);
  if (decay) p = p * fma_of(T(-c.lr), T(c.weight_decay), T(1));
  m = fma_of(T(1) - T(c.beta1), g - m, m);
  v = fma_of(v, T(c.beta2), (T(1) - T(c.beta2)) * g * g);
  const T denom = sqrt_of(v) / T(c.bias_correction2_sqrt) + T(c.eps);
  p = fma_of(T(-c.step_size), m / denom, p);
}

// ALiBi slope of head h out of n (any n, powers of two or not).
inline double alibi_slope(std::int64_t h, std::int64_t n) {
  std::int64_t c = 1;
  while (c * 2 <= n) c *= 2;
  const double base = std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(c)) - 3)));
  if (h < c) return std::pow(base, static_cast<double>(h + 1));
  const double extra = std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(2 * c)) - 3)));
  return std::pow(extra, static_cast<double>(2 * (h - c) + 1));
}

/// Head h of sequence b in fused QKV rows [B, Tn, nh, 3, hd] of stride ld: its q, k and v.
template <class T>
struct HeadQkv {
  T *q, *k, *v;
};
template <class T>
SEQPAR_HOST_DEVICE HeadQkv<T> head_qkv(T* qkv, std::int64_t b, std::int64_t h, std::int64_t Tn,
                                       std::int64_t ld, std::int64_t hd) {
  T* q = qkv + b * Tn * ld + h * 3 * hd;
  return {q, q + hd, q + 2 * hd};
}

}  // namespace seqpar::inline v0::kernels

#pragma once
// What nvcc gives device code, on the emulated device: the execution space keywords (empty),
// __shared__ (one copy per thread block: a block's threads run as fibers of one host thread,
// one block at a time), the built-in indices, __syncthreads, the warp intrinsics with CUDA's
// rules, the intrinsics seqpar's kernels call, and kernel launches.
//
// A launch is written CUDA_EMULATED_LAUNCH(kernel, grid, block, shared, stream)(args...), which
// means kernel<<<grid, block, shared, stream>>>(args...): the arguments are copied at the
// launch (trivially copyable, as CUDA requires), each thread calls kernel with them, template
// arguments deduced as nvcc deduces them.

#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <source_location>
#include <type_traits>
#include <utility>
#include <vector>

#include "seqpar_emulation/half_types.hpp"
#include "seqpar_emulation/runtime_api.hpp"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __shared__ static thread_local
#define __grid_constant__
#define __restrict__ __restrict
#define __launch_bounds__(...)

struct uint3 {
  unsigned x, y, z;
};

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};

// Set by the emulation for the thread that runs (its fiber) and its block.
inline thread_local uint3 threadIdx{0, 0, 0};
inline thread_local uint3 blockIdx{0, 0, 0};
inline thread_local dim3 blockDim{1, 1, 1};
inline thread_local dim3 gridDim{1, 1, 1};
inline constexpr int warpSize = 32;

namespace seqpar::emu {

/// The warp-synchronous intrinsics.
enum class WarpOp : int { sync, shfl_idx, shfl_up, shfl_down, shfl_xor, ballot, any, all };

/// The calling thread of a kernel waits at its block's barrier (__syncthreads at `site`).
void block_barrier(const std::source_location& site);

/// The calling lane takes part in warp op `op` over the lanes of `mask` (its own value and
/// the op's argument) and gets its result.
std::uint64_t warp_collective(WarpOp op, unsigned mask, std::uint64_t value, int arg, int width,
                              const std::source_location& site);

/// A kernel's arguments, copied at its launch into zeroed memory (no stray padding bytes): a
/// trivially copyable aggregate, whose device pointers the threads see translated.
template <class... A>
struct ArgPack;
template <>
struct ArgPack<> {};
template <class H, class... T>
struct ArgPack<H, T...> {
  H head;
  ArgPack<T...> tail;
};

template <class F, class... Done>
void apply_arg_pack(F& f, ArgPack<>&, Done&... done) {
  f(done...);
}
template <class F, class H, class... T, class... Done>
void apply_arg_pack(F& f, ArgPack<H, T...>& p, Done&... done) {
  apply_arg_pack(f, p.tail, done..., p.head);
}

/// Where device pointers may be in an argument pack: the offsets of its pointer arguments, and
/// the bytes of its class arguments (whose 8-byte words are looked at).
struct ArgLayout {
  std::vector<std::size_t> pointers;
  std::vector<std::pair<std::size_t, std::size_t>> records;  // offset, bytes
};

inline void place_args(ArgPack<>&) {}
template <class H, class... T>
void place_args(ArgPack<H, T...>& p, const H& h, const T&... t) {
  std::memcpy(static_cast<void*>(&p.head), &h, sizeof(H));
  place_args(p.tail, t...);
}

inline void arg_layout(const ArgPack<>&, const unsigned char*, ArgLayout&) {}
template <class H, class... T>
void arg_layout(const ArgPack<H, T...>& p, const unsigned char* base, ArgLayout& out) {
  const auto offset =
      static_cast<std::size_t>(reinterpret_cast<const unsigned char*>(&p.head) - base);
  if constexpr (std::is_pointer_v<H>)
    out.pointers.push_back(offset);
  else if constexpr (std::is_class_v<H>)
    out.records.emplace_back(offset, sizeof(H));
  arg_layout(p.tail, base, out);
}

/// One launch's kernel and arguments, type-erased.
class KernelBody {
 public:
  virtual ~KernelBody() = default;
  /// The arguments as copied at the launch.
  virtual void* args() = 0;
  virtual std::size_t args_size() const = 0;
  virtual ArgLayout layout() const = 0;
  /// One thread of the kernel, with arguments `args` (a translated copy of args()).
  virtual void run(void* args) = 0;
  /// The kernel's address, where the launch named it through a pointer (else null).
  virtual const void* function() const = 0;
};

template <class F, class... A>
class KernelBodyOf final : public KernelBody {
 public:
  explicit KernelBodyOf(F f, const A&... a) : f_(f) {
    std::memset(storage_, 0, sizeof storage_);
    place_args(pack(), a...);
  }
  void* args() override { return storage_; }
  std::size_t args_size() const override { return sizeof storage_; }
  ArgLayout layout() const override {
    ArgLayout out;
    arg_layout(*std::launder(reinterpret_cast<const ArgPack<A...>*>(storage_)), storage_, out);
    return out;
  }
  void run(void* a) override { apply_arg_pack(f_, *std::launder(static_cast<ArgPack<A...>*>(a))); }
  const void* function() const override {
    if constexpr (sizeof(F) == sizeof(void (*)())) {
      const void* p = nullptr;
      std::memcpy(&p, &f_, sizeof p);
      return p;
    } else {
      return nullptr;
    }
  }

 private:
  ArgPack<A...>& pack() { return *std::launder(reinterpret_cast<ArgPack<A...>*>(storage_)); }
  F f_;
  alignas(ArgPack<A...>) unsigned char storage_[sizeof(ArgPack<A...>)];
};

struct LaunchConfig {
  const char* kernel;  // as written at the launch
  const char* file;
  int line;
  dim3 grid, block;
  std::size_t shared;
  cudaStream_t stream;
};

/// Checks the configuration and queues the kernel on its stream; a bad configuration sets the
/// calling thread's last error (cudaGetLastError), as a failed <<<...>>> does.
void launch_kernel(const LaunchConfig& config, std::unique_ptr<KernelBody> body);

template <class F>
struct BoundLaunch {
  LaunchConfig config;
  F f;
  template <class... A>
  void operator()(A&&... a) const {
    static_assert(
        (std::is_trivially_copyable_v<std::decay_t<A>> && ...),
        "a kernel's arguments must be trivially copyable (CUDA copies them at the launch)");
    launch_kernel(config, std::make_unique<KernelBodyOf<F, std::decay_t<A>...>>(
                              f, static_cast<std::decay_t<A>>(std::forward<A>(a))...));
  }
};

struct Launcher {
  LaunchConfig config;
  template <class F>
  BoundLaunch<F> body(F f) const {
    return {config, f};
  }
};

}  // namespace seqpar::emu

#define CUDA_EMULATED_LAUNCH(kernel, grid, block, shared, stream)                             \
  ::seqpar::emu::Launcher{{#kernel, __FILE__, __LINE__, (grid), (block), (shared), (stream)}} \
      .body([=](auto&... seqpar_emu_args) { kernel(seqpar_emu_args...); })

// ---- barriers and warp intrinsics --------------------------------------------------------

inline void __syncthreads(std::source_location site = std::source_location::current()) {
  seqpar::emu::block_barrier(site);
}

inline void __syncwarp(unsigned mask = 0xffffffffu,
                       std::source_location site = std::source_location::current()) {
  (void)seqpar::emu::warp_collective(seqpar::emu::WarpOp::sync, mask, 0, 0, warpSize, site);
}

namespace seqpar::emu {
template <class T>
T shuffle(WarpOp op, unsigned mask, T var, int arg, int width, const std::source_location& site) {
  static_assert(sizeof(T) <= sizeof(std::uint64_t) && std::is_trivially_copyable_v<T>,
                "a shuffled value has at most 8 bytes");
  std::uint64_t v = 0;
  std::memcpy(&v, &var, sizeof(T));
  const std::uint64_t r = warp_collective(op, mask, v, arg, width, site);
  T out;
  std::memcpy(&out, &r, sizeof(T));
  return out;
}
}  // namespace seqpar::emu

template <class T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize,
              std::source_location site = std::source_location::current()) {
  return seqpar::emu::shuffle(seqpar::emu::WarpOp::shfl_idx, mask, var, src_lane, width, site);
}
template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                 std::source_location site = std::source_location::current()) {
  return seqpar::emu::shuffle(seqpar::emu::WarpOp::shfl_up, mask, var, static_cast<int>(delta),
                              width, site);
}
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                   std::source_location site = std::source_location::current()) {
  return seqpar::emu::shuffle(seqpar::emu::WarpOp::shfl_down, mask, var, static_cast<int>(delta),
                              width, site);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize,
                  std::source_location site = std::source_location::current()) {
  return seqpar::emu::shuffle(seqpar::emu::WarpOp::shfl_xor, mask, var, lane_mask, width, site);
}
inline unsigned __ballot_sync(unsigned mask, int predicate,
                              std::source_location site = std::source_location::current()) {
  return static_cast<unsigned>(seqpar::emu::warp_collective(seqpar::emu::WarpOp::ballot, mask,
                                                            predicate != 0, 0, warpSize, site));
}
inline int __any_sync(unsigned mask, int predicate,
                      std::source_location site = std::source_location::current()) {
  return static_cast<int>(seqpar::emu::warp_collective(seqpar::emu::WarpOp::any, mask,
                                                       predicate != 0, 0, warpSize, site));
}
inline int __all_sync(unsigned mask, int predicate,
                      std::source_location site = std::source_location::current()) {
  return static_cast<int>(seqpar::emu::warp_collective(seqpar::emu::WarpOp::all, mask,
                                                       predicate != 0, 0, warpSize, site));
}

// ---- integer and floating-point intrinsics -----------------------------------------------

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
// Rounded once and never contracted into a neighbouring add (nvcc's guarantee): an opaque
// step between the product and whatever uses it.
inline float __fmul_rn(float a, float b) {
  float p = a * b;
  asm("" : "+x"(p));
  return p;
}
inline float __fadd_rn(float a, float b) {
  float s = a + b;
  asm("" : "+x"(s));
  return s;
}
inline float __fmaf_rn(float a, float b, float c) { return __builtin_fmaf(a, b, c); }

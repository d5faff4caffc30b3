// The emulated CUDA runtime: configuration, errors, device memory, pinned host memory, copies,
// streams, events and the lazy execution of queued work (machine.hpp).
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>

#include "machine.hpp"

namespace seqpar::emu {

std::string site_text(const std::source_location& site) {
  std::string file = site.file_name();
  // The last three parts of the path are enough to find it and keep messages short.
  std::size_t cut = std::string::npos;
  for (int parts = 0; parts < 3; ++parts) {
    cut = file.rfind('/', cut == std::string::npos ? std::string::npos : cut - 1);
    if (cut == std::string::npos || cut == 0) break;
  }
  if (cut != std::string::npos && cut > 0) file = file.substr(cut + 1);
  return file + ":" + std::to_string(site.line());
}

// ---- configuration ----------------------------------------------------------------------

namespace {

long env_long(const char* name, long fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end) {
    std::fprintf(stderr, "seqpar emulated CUDA: %s=%s is not a number\n", name, v);
    std::abort();
  }
  return x;
}

Config read_config() {
  Config c;
  c.devices = static_cast<int>(env_long("SEQPAR_EMU_DEVICES", c.devices));
  c.device_bytes = static_cast<std::size_t>(env_long("SEQPAR_EMU_DEVICE_MIB", 2048)) << 20;
  c.order_checks = env_long("SEQPAR_EMU_ORDER_CHECKS", c.order_checks);
  c.hang_seconds = static_cast<double>(env_long("SEQPAR_EMU_HANG_S", 120));
  c.seed = static_cast<std::uint64_t>(env_long("SEQPAR_EMU_SEED", 1));
  c.strict_nccl_sync = env_long("SEQPAR_EMU_NCCL_SYNC_CHECK", 1) != 0;
  if (const char* d = std::getenv("SEQPAR_EMU_DRIVER"); d && std::string(d) == "insufficient")
    c.insufficient_driver = true;
  if (const char* o = std::getenv("SEQPAR_EMU_ORDERS"); o && *o) {
    c.orders.clear();
    std::stringstream in(o);
    std::string word;
    while (std::getline(in, word, ',')) {
      if (word == "forward")
        c.orders.push_back(0);
      else if (word == "reverse")
        c.orders.push_back(1);
      else if (word == "random")
        c.orders.push_back(2);
      else {
        std::fprintf(stderr,
                     "seqpar emulated CUDA: SEQPAR_EMU_ORDERS takes forward, reverse and random, "
                     "not %s\n",
                     word.c_str());
        std::abort();
      }
    }
  }
  if (c.devices < 0 || c.orders.empty()) {
    std::fprintf(stderr, "seqpar emulated CUDA: a count of devices and one order are needed\n");
    std::abort();
  }
  return c;
}

}  // namespace

const Config& config() {
  static const Config c = read_config();
  return c;
}

// ---- the machine --------------------------------------------------------------------------

void install_fault_handler();  // faults.cpp

Machine& machine() {
  static Machine* m = [] {
    auto* mm = new Machine;  // never destroyed: threads' CUDA state may outlive static objects
    const Config& c = config();
    // Room for the allocations, their guard pages and freed spans not yet reused.
    mm->span = (c.device_bytes * 2 + (std::size_t{64} << 20)) / page_bytes * page_bytes;
    const std::size_t total = mm->span * static_cast<std::size_t>(std::max(c.devices, 1));
    // Device addresses far from where the host's stack, heap and mappings usually are, so that
    // no other value in a kernel's class arguments is taken for one.
    void* dev = mmap(reinterpret_cast<void*>(std::uintptr_t{0x200000000000}), total, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (dev == MAP_FAILED)
      dev = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    void* emu = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (dev == MAP_FAILED || emu == MAP_FAILED) {
      std::fprintf(stderr, "seqpar emulated CUDA: cannot reserve %zu bytes of address space\n",
                   total);
      std::abort();
    }
    mm->dev_base = reinterpret_cast<std::uintptr_t>(dev);
    mm->emu_base = reinterpret_cast<std::uintptr_t>(emu);
    mm->devices.resize(static_cast<std::size_t>(c.devices));
    for (int d = 0; d < c.devices; ++d) {
      Device& device = mm->devices[static_cast<std::size_t>(d)];
      device.index = d;
      device.dev_base = mm->dev_base + static_cast<std::size_t>(d) * mm->span;
      device.emu_base = mm->emu_base + static_cast<std::size_t>(d) * mm->span;
      device.capacity = c.device_bytes;
      device.next = device.dev_base + page_bytes;  // a guard page first
      device.legacy = std::make_shared<Stream>();
      device.legacy->device = d;
      device.legacy->legacy = true;
      device.legacy->id = 0;
      device.streams.push_back(device.legacy);
    }
    install_fault_handler();
    return mm;
  }();
  return *m;
}

namespace {
// The machine (and its fault handler) from the start of the program: a test framework's own
// handlers, installed later, then pass the emulation's faults on to it.
[[maybe_unused]] const bool machine_at_start = (machine(), true);
}  // namespace

int& current_device() {
  thread_local int device = 0;
  return device;
}

std::string Stream::name() const {
  if (legacy) return "the legacy default stream of device " + std::to_string(device);
  return "stream " + std::to_string(id) + " of device " + std::to_string(device) +
         (destroyed ? " (destroyed)" : "");
}

// ---- errors ---------------------------------------------------------------------------------

namespace {

struct ThreadErrors {
  cudaError_t last = cudaSuccess;
  cudaError_t detail_code = cudaSuccess;
  std::string detail;
  std::string text;  // what cudaGetErrorString returned last
};
// Leaked when a thread ends: calls may come from other thread-local objects' destructors.
ThreadErrors& thread_errors() {
  thread_local ThreadErrors* e = nullptr;
  if (!e) e = new ThreadErrors;
  return *e;
}

const char* error_name(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidPitchValue: return "cudaErrorInvalidPitchValue";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorUnknown: return "cudaErrorUnknown";
  }
  return "cudaErrorUnknown";
}

const char* error_text(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidPitchValue: return "invalid pitch argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInsufficientDriver:
      return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorUnknown: return "unknown error";
  }
  return "unknown error";
}

}  // namespace

cudaError_t fail(cudaError_t e, const std::string& detail) {
  ThreadErrors& t = thread_errors();
  t.last = e;
  t.detail_code = e;
  t.detail = detail;
  std::fprintf(stderr, "seqpar emulated CUDA: %s: %s\n", error_name(e), detail.c_str());
  return e;
}

void fail_device(int device, cudaError_t e, const std::string& detail) {
  Device& d = machine().devices[static_cast<std::size_t>(device)];
  if (d.sticky == cudaSuccess) {
    d.sticky = e;
    d.sticky_detail = detail;
    std::fprintf(stderr, "seqpar emulated CUDA: device %d: %s (sticky): %s\n", device,
                 error_name(e), detail.c_str());
  }
}

[[noreturn]] void fatal(const std::string& detail) {
  std::fprintf(stderr, "seqpar emulated CUDA: fatal: %s\n%s", detail.c_str(),
               describe_streams().c_str());
  std::fflush(stderr);
  std::abort();
}

std::string describe_streams() {
  std::string out;
  for (const Device& d : machine().devices) {
    for (const auto& s : d.streams) {
      if (s->ops.empty()) continue;
      out += "  " + s->name() + ": " + std::to_string(s->ops.size()) + " queued";
      int shown = 0;
      for (const Op& op : s->ops) {
        if (shown++ == 3) {
          out += "\n      ...";
          break;
        }
        std::string what = op.what;
        if (op.kind == Op::Kind::comm && op.comm) what = op.comm->describe();
        out += "\n    - " + what;
      }
      out += "\n";
    }
  }
  return out.empty() ? "  (no queued work)\n" : "queued work:\n" + out;
}

namespace {

// The calling thread's sticky error of device d, as its last error (or cudaSuccess).
cudaError_t sticky_of(int d) {
  const Device& dev = machine().devices[static_cast<std::size_t>(d)];
  if (dev.sticky == cudaSuccess) return cudaSuccess;
  ThreadErrors& t = thread_errors();
  t.detail_code = dev.sticky;
  t.detail = dev.sticky_detail;
  return dev.sticky;
}

}  // namespace

// ---- memory -----------------------------------------------------------------------------------

bool is_device_address(const void* p) {
  const Machine& m = machine();
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  return a >= m.dev_base && a < m.dev_base + m.span * m.devices.size();
}

namespace {
int device_of_address(std::uintptr_t a) {
  const Machine& m = machine();
  return static_cast<int>((a - m.dev_base) / m.span);
}
}  // namespace

const Allocation* find_allocation(const void* p, std::size_t bytes) {
  if (!is_device_address(p)) return nullptr;
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  const Device& d = machine().devices[static_cast<std::size_t>(device_of_address(a))];
  auto it = d.allocations.upper_bound(a);
  if (it == d.allocations.begin()) return nullptr;
  --it;
  const Allocation& x = it->second;
  if (a < x.address || a - x.address > x.bytes || bytes > x.bytes - (a - x.address)) return nullptr;
  if (bytes == 0 ? a > x.address + x.bytes : a >= x.address + x.bytes) return nullptr;
  return &x;
}

const Allocation* nearest_allocation(const void* p) {
  if (!is_device_address(p)) return nullptr;
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  const Device& d = machine().devices[static_cast<std::size_t>(device_of_address(a))];
  if (d.allocations.empty()) return nullptr;
  auto it = d.allocations.upper_bound(a);
  const Allocation* best = nullptr;
  std::uintptr_t best_gap = ~std::uintptr_t{0};
  if (it != d.allocations.end()) {
    best = &it->second;
    best_gap = it->second.address - a;
  }
  if (it != d.allocations.begin()) {
    --it;
    const std::uintptr_t end = it->second.address + it->second.bytes;
    const std::uintptr_t gap = a >= end ? a - end : 0;
    if (gap <= best_gap) best = &it->second;
  }
  return best;
}

void* to_emu(const void* p) {
  const Machine& m = machine();
  return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(p) - m.dev_base + m.emu_base);
}

const void* from_emu(const void* p) {
  const Machine& m = machine();
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  if (a < m.emu_base || a >= m.emu_base + m.span * m.devices.size()) return nullptr;
  return reinterpret_cast<const void*>(a - m.emu_base + m.dev_base);
}

const PinnedBlock* find_pinned(const void* p, std::size_t bytes) {
  const Machine& m = machine();
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  auto it = m.pinned.upper_bound(a);
  if (it == m.pinned.begin()) return nullptr;
  --it;
  if (a - it->first >= it->second.bytes || bytes > it->second.bytes - (a - it->first))
    return nullptr;
  return &it->second;
}

std::string describe_allocation(const Allocation& x) {
  return "allocation #" + std::to_string(x.id) + " of " + std::to_string(x.bytes) +
         " bytes on device " + std::to_string(x.device) + " (cudaMalloc at " + x.site + ")";
}

std::string describe_address(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  std::string out = buf;
  if (!is_device_address(p)) {
    if (const PinnedBlock* b = find_pinned(p))
      return out + " (pinned host memory from " + b->site + ")";
    return out + " (host memory)";
  }
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  if (const Allocation* x = find_allocation(p)) {
    return out + ": byte " + std::to_string(a - x->address) + " of " + describe_allocation(*x);
  }
  if (const Allocation* x = nearest_allocation(p)) {
    if (a >= x->address + x->bytes)
      return out + ": " + std::to_string(a - (x->address + x->bytes)) + " bytes past the end of " +
             describe_allocation(*x);
    return out + ": " + std::to_string(x->address - a) + " bytes before the start of " +
           describe_allocation(*x);
  }
  return out + ": device memory of device " + std::to_string(device_of_address(a)) +
         " that no live allocation holds";
}

std::string check_canaries(const Allocation& x) {
  const auto* span = static_cast<const unsigned char*>(to_emu(reinterpret_cast<void*>(x.span)));
  const std::size_t total = x.pages * page_bytes;
  const std::size_t begin = x.address - x.span, end = begin + x.bytes;
  for (std::size_t i = 0; i < total; ++i) {
    if (i == begin) i = end;
    if (i >= total) break;
    if (span[i] != 0xff) {
      return i < begin ? std::to_string(begin - i) + " bytes before the start of " +
                             describe_allocation(x) + " were written"
                       : "byte " + std::to_string(i - end) + " past the end of " +
                             describe_allocation(x) + " was written";
    }
  }
  return "";
}

namespace {

// Pages for an allocation of `bytes` placed at the end of them, on a 256-byte boundary.
std::size_t pages_for(std::size_t bytes) {
  const std::size_t rounded = (bytes + device_alignment - 1) / device_alignment * device_alignment;
  return std::max<std::size_t>(1, (rounded + page_bytes - 1) / page_bytes);
}

// Device address of a free span of `pages` pages (followed by a guard page), or 0.
std::uintptr_t take_span(Device& d, std::size_t pages) {
  const std::uintptr_t end = d.dev_base + machine().span;
  if (d.next + (pages + 1) * page_bytes <= end) {
    const std::uintptr_t s = d.next;
    d.next += (pages + 1) * page_bytes;
    return s;
  }
  // Freed spans are reused only when fresh addresses run out, so that a stale pointer faults.
  for (auto it = d.freed.begin(); it != d.freed.end(); ++it) {
    if (it->second < pages) continue;
    const std::uintptr_t s = it->first;
    if (it->second > pages + 1) {
      it->first += (pages + 1) * page_bytes;
      it->second -= pages + 1;
    } else {
      d.freed.erase(it);
    }
    return s;
  }
  return 0;
}

}  // namespace

// ---- queues ----------------------------------------------------------------------------------

std::shared_ptr<Stream> stream_of(cudaStream_t s) {
  Machine& m = machine();
  if (s == nullptr || s == cudaStreamLegacy)
    return m.devices[static_cast<std::size_t>(current_device())].legacy;
  for (Device& d : m.devices)
    for (const auto& x : d.streams)
      if (reinterpret_cast<cudaStream_t>(x.get()) == s && !x->destroyed) return x;
  return nullptr;
}

void enqueue(const std::shared_ptr<Stream>& s, Op op) {
  Device& d = machine().devices[static_cast<std::size_t>(s->device)];
  // The legacy default stream and the blocking streams of a device wait for each other.
  auto wait_on = [&](const std::shared_ptr<Stream>& other) {
    if (other.get() == s.get() || other->completed == other->enqueued) return;
    Op w;
    w.kind = Op::Kind::wait;
    w.wait_stream = other;
    w.wait_seq = other->enqueued;
    w.what = "implicit wait for " + other->name();
    w.seq = ++s->enqueued;
    s->ops.push_back(std::move(w));
  };
  if (s->legacy) {
    for (const auto& other : d.streams)
      if (other->blocking && !other->legacy) wait_on(other);
  } else if (s->blocking) {
    wait_on(d.legacy);
  }
  op.seq = ++s->enqueued;
  s->ops.push_back(std::move(op));
  machine().progress.notify_all();
}

namespace {
std::uint64_t completions = 0;  // guarded by the machine lock: any progress resets a hang's clock

struct Advancing {
  Stream& s;
  explicit Advancing(Stream& x) : s(x) { s.advancing = true; }
  ~Advancing() { s.advancing = false; }
};
}  // namespace

Progress advance(Stream& s, std::uint64_t target) {
  if (s.completed >= target) return Progress::done;
  if (s.advancing)
    fatal("deadlock: " + s.name() +
          " must run further to let work it waits for complete (a cycle of waits between "
          "streams and NCCL peers)");
  Advancing mark(s);
  Device& d = machine().devices[static_cast<std::size_t>(s.device)];
  while (s.completed < target && !s.ops.empty()) {
    Op& op = s.ops.front();
    if (d.sticky == cudaSuccess) {
      switch (op.kind) {
        case Op::Kind::task: (void)op.run(); break;
        case Op::Kind::wait:
          if (advance(*op.wait_stream, op.wait_seq) == Progress::blocked) return Progress::blocked;
          break;
        case Op::Kind::comm:
          if (!op.comm->done) {
            if (op.comm->joining)
              fatal("deadlock: " + op.comm->describe() +
                    " is needed to complete the work that completes it");
            if (op.comm->advance() == CommOp::Result::blocked) return Progress::blocked;
          }
          break;
        case Op::Kind::marker: *op.stamp = std::chrono::steady_clock::now(); break;
      }
    }
    // A failed device drops its queued work (what the program reads is undefined anyway).
    s.ops.pop_front();
    ++s.completed;
    ++completions;
  }
  return s.completed >= target ? Progress::done : Progress::blocked;
}

Progress advance_device(int device) {
  Device& d = machine().devices[static_cast<std::size_t>(device)];
  for (std::size_t i = 0; i < d.streams.size(); ++i) {
    const std::shared_ptr<Stream> s = d.streams[i];
    if (advance(*s, s->enqueued) == Progress::blocked) return Progress::blocked;
  }
  std::erase_if(d.streams, [](const auto& s) { return s->destroyed && s->ops.empty(); });
  return Progress::done;
}

void wait_for(Lock& lock, const std::function<Progress()>& attempt, const std::string& what) {
  auto last_progress = std::chrono::steady_clock::now();
  std::uint64_t seen = completions;
  for (;;) {
    if (attempt() == Progress::done) return;
    const auto now = std::chrono::steady_clock::now();
    if (completions != seen) {
      seen = completions;
      last_progress = now;
    }
    if (std::chrono::duration<double>(now - last_progress).count() > config().hang_seconds)
      fatal(what + " waited " + std::to_string(static_cast<int>(config().hang_seconds)) +
            " s without any progress of the device (SEQPAR_EMU_HANG_S): the work it waits for "
            "needs work nobody queued (an NCCL peer that never came?)");
    machine().progress.wait_for(lock, std::chrono::milliseconds(5));
  }
}

void note_progress() { ++completions; }

cudaError_t check_nccl_quiet(int device, const std::string& call) {
  if (!config().strict_nccl_sync) return cudaSuccess;
  const std::string pending = pending_nccl_on(device);
  if (pending.empty()) return cudaSuccess;
  return fail(cudaErrorLaunchFailure,
              call + " synchronises device " + std::to_string(device) + " while " + pending +
                  " is queued there and not complete: NCCL's kernels wait for their peers, so a "
                  "device-wide wait can deadlock ranks that wait for each other on other "
                  "communicators (NCCL documentation, \"Using multiple NCCL communicators "
                  "concurrently\")");
}

}  // namespace seqpar::emu

// ---- the API ------------------------------------------------------------------------------------

using namespace seqpar::emu;

namespace {

std::string call_at(const char* call, const seqpar_emu_site& site) {
  return std::string(call) + " at " + site_text(site);
}

cudaError_t check_device(int d) {
  if (d < 0 || d >= static_cast<int>(machine().devices.size())) return cudaErrorInvalidDevice;
  return cudaSuccess;
}

enum class Where { device, pinned, pageable };

Where where_is(const void* p, std::size_t bytes) {
  if (is_device_address(p)) return Where::device;
  return find_pinned(p, bytes) ? Where::pinned : Where::pageable;
}

const char* kind_name(cudaMemcpyKind k) {
  switch (k) {
    case cudaMemcpyHostToHost: return "cudaMemcpyHostToHost";
    case cudaMemcpyHostToDevice: return "cudaMemcpyHostToDevice";
    case cudaMemcpyDeviceToHost: return "cudaMemcpyDeviceToHost";
    case cudaMemcpyDeviceToDevice: return "cudaMemcpyDeviceToDevice";
    case cudaMemcpyDefault: return "cudaMemcpyDefault";
  }
  return "an unknown cudaMemcpyKind";
}

// A copy: checks its pointers against its kind and queues it; `sync` waits for it.
cudaError_t copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                 cudaStream_t stream, bool legacy_sync, const char* call,
                 const seqpar_emu_site& site) {
  Lock lock(machine().mutex);
  const std::string at = call_at(call, site);
  if (bytes == 0) return cudaSuccess;
  if (!dst || !src) return fail(cudaErrorInvalidValue, at + ": a null pointer");
  const std::shared_ptr<Stream> s = stream_of(stream);
  if (!s) return fail(cudaErrorInvalidResourceHandle, at + ": not a live stream");
  if (const cudaError_t e = sticky_of(s->device)) return e;
  const Where from = where_is(src, bytes), to = where_is(dst, bytes);
  for (const auto& [p, role] :
       {std::pair{src, "source"}, std::pair<const void*, const char*>{dst, "destination"}}) {
    if (is_device_address(p) && !find_allocation(p, bytes))
      return fail(cudaErrorInvalidValue, at + ": the " + role + " [" + describe_address(p) + ", +" +
                                             std::to_string(bytes) +
                                             " bytes) is not inside one live device allocation");
  }
  const bool src_dev = from == Where::device, dst_dev = to == Where::device;
  bool ok = true;
  switch (kind) {
    case cudaMemcpyHostToHost: ok = !src_dev && !dst_dev; break;
    case cudaMemcpyHostToDevice: ok = !src_dev && dst_dev; break;
    case cudaMemcpyDeviceToHost: ok = src_dev && !dst_dev; break;
    case cudaMemcpyDeviceToDevice: ok = src_dev && dst_dev; break;
    case cudaMemcpyDefault: break;
    default: return fail(cudaErrorInvalidMemcpyDirection, at + ": kind " + std::to_string(kind));
  }
  if (!ok)
    return fail(cudaErrorInvalidValue, at + ": " + kind_name(kind) + " from " +
                                           describe_address(src) + " to " + describe_address(dst) +
                                           ": the pointers are not what the kind says");
  Op op;
  op.what = std::string(call) + " of " + std::to_string(bytes) + " bytes at " + site_text(site);
  bool wait = legacy_sync;
  if (!src_dev && from == Where::pageable && dst_dev) {
    // Pageable to device: staged at the call, the device's copy later (the host may reuse src).
    auto staged = std::make_shared<std::vector<unsigned char>>(
        static_cast<const unsigned char*>(src), static_cast<const unsigned char*>(src) + bytes);
    void* d = to_emu(dst);
    op.run = [staged, d] {
      std::memcpy(d, staged->data(), staged->size());
      return cudaSuccess;
    };
  } else {
    // Device memory, pinned memory: read and written when the copy runs. Pageable
    // destinations (and host to host): the call returns once the copy is done.
    void* d = dst_dev ? to_emu(dst) : dst;
    const void* sp = src_dev ? to_emu(src) : src;
    op.run = [d, sp, bytes] {
      std::memmove(d, sp, bytes);
      return cudaSuccess;
    };
    if (!dst_dev && (to == Where::pageable || !src_dev)) wait = true;
  }
  if (legacy_sync && src_dev && dst_dev) wait = false;  // cudaMemcpy device to device
  enqueue(s, std::move(op));
  if (!wait) return cudaSuccess;
  const std::uint64_t target = s->enqueued;
  wait_for(
      lock, [&] { return advance(*s, target); }, at);
  return sticky_of(s->device);
}

cudaError_t memset_on(void* ptr, int value, std::size_t bytes, cudaStream_t stream,
                      const char* call, const seqpar_emu_site& site) {
  Lock lock(machine().mutex);
  const std::string at = call_at(call, site);
  if (bytes == 0) return cudaSuccess;
  const std::shared_ptr<Stream> s = stream_of(stream);
  if (!s) return fail(cudaErrorInvalidResourceHandle, at + ": not a live stream");
  if (const cudaError_t e = sticky_of(s->device)) return e;
  if (!find_allocation(ptr, bytes))
    return fail(cudaErrorInvalidValue, at + ": [" + describe_address(ptr) + ", +" +
                                           std::to_string(bytes) +
                                           " bytes) is not inside one live device allocation");
  Op op;
  op.what = std::string(call) + " of " + std::to_string(bytes) + " bytes at " + site_text(site);
  void* d = to_emu(ptr);
  op.run = [d, value, bytes] {
    std::memset(d, value, bytes);
    return cudaSuccess;
  };
  enqueue(s, std::move(op));
  return cudaSuccess;
}

struct EventHandles {
  std::map<const void*, std::shared_ptr<EventState>> events;
};
EventHandles& event_handles() {
  static auto* h = new EventHandles;  // guarded by the machine lock; never destroyed
  return *h;
}

}  // namespace

const char* cudaGetErrorName(cudaError_t error) { return error_name(error); }

const char* cudaGetErrorString(cudaError_t error) {
  ThreadErrors& t = thread_errors();
  t.text = error_text(error);
  if (error != cudaSuccess && error == t.detail_code && !t.detail.empty())
    t.text += "; emulated device: " + t.detail;
  return t.text.c_str();
}

cudaError_t cudaGetLastError() {
  Lock lock(machine().mutex);
  if (const cudaError_t e = sticky_of(current_device())) return e;
  ThreadErrors& t = thread_errors();
  const cudaError_t e = t.last;
  t.last = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() {
  Lock lock(machine().mutex);
  if (const cudaError_t e = sticky_of(current_device())) return e;
  return thread_errors().last;
}

cudaError_t cudaGetDeviceCount(int* count, seqpar_emu_site site) {
  *count = 0;
  if (config().insufficient_driver)
    return fail(cudaErrorInsufficientDriver,
                call_at("cudaGetDeviceCount", site) + ": SEQPAR_EMU_DRIVER=insufficient");
  if (machine().devices.empty())
    return fail(cudaErrorNoDevice, call_at("cudaGetDeviceCount", site) + ": SEQPAR_EMU_DEVICES=0");
  *count = static_cast<int>(machine().devices.size());
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device, seqpar_emu_site) {
  (void)machine();
  *device = current_device();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device, seqpar_emu_site site) {
  if (check_device(device) != cudaSuccess)
    return fail(cudaErrorInvalidDevice, call_at("cudaSetDevice", site) + ": device " +
                                            std::to_string(device) + " of " +
                                            std::to_string(machine().devices.size()));
  current_device() = device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device, seqpar_emu_site site) {
  if (check_device(device) != cudaSuccess)
    return fail(cudaErrorInvalidDevice, call_at("cudaGetDeviceProperties", site));
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "seqpar emulated CUDA device %d", device);
  // The same device has the same UUID in every process of the machine, as a GPU has.
  std::snprintf(prop->uuid.bytes, sizeof prop->uuid.bytes, "emu-gpu-%03u",
                static_cast<unsigned>(device) % 1000u);
  prop->totalGlobalMem = machine().devices[static_cast<std::size_t>(device)].capacity;
  prop->sharedMemPerBlock = 48 << 10;
  prop->sharedMemPerBlockOptin = 227 << 10;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7fffffff;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 132;
  prop->unifiedAddressing = 1;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(seqpar_emu_site site) {
  Lock lock(machine().mutex);
  const int d = current_device();
  if (const cudaError_t e = check_nccl_quiet(d, call_at("cudaDeviceSynchronize", site))) return e;
  wait_for(
      lock, [&] { return advance_device(d); }, call_at("cudaDeviceSynchronize", site));
  return sticky_of(d);
}

cudaError_t cudaDeviceReset(seqpar_emu_site) {
  // The emulation's reset clears the sticky error and drops queued work; memory survives.
  Lock lock(machine().mutex);
  Device& d = machine().devices[static_cast<std::size_t>(current_device())];
  for (const auto& s : d.streams) {
    s->completed += s->ops.size();
    s->ops.clear();
  }
  d.sticky = cudaSuccess;
  d.sticky_detail.clear();
  thread_errors() = ThreadErrors{};
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(std::size_t* free, std::size_t* total, seqpar_emu_site) {
  Lock lock(machine().mutex);
  const Device& d = machine().devices[static_cast<std::size_t>(current_device())];
  *total = d.capacity;
  *free = d.capacity - d.used;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, std::size_t bytes, seqpar_emu_site site) {
  Lock lock(machine().mutex);
  *ptr = nullptr;
  const int dn = current_device();
  if (const cudaError_t e = sticky_of(dn)) return e;
  if (bytes == 0) return cudaSuccess;
  Device& d = machine().devices[static_cast<std::size_t>(dn)];
  const std::string at = call_at("cudaMalloc", site);
  if (bytes > d.capacity - d.used)
    return fail(cudaErrorMemoryAllocation, at + ": " + std::to_string(bytes) + " bytes, " +
                                               std::to_string(d.capacity - d.used) +
                                               " free on device " + std::to_string(dn));
  const std::size_t pages = pages_for(bytes);
  const std::uintptr_t span = take_span(d, pages);
  if (span == 0)
    return fail(cudaErrorMemoryAllocation,
                at + ": " + std::to_string(bytes) + " bytes: device " + std::to_string(dn) +
                    "'s address range is used up (freed ranges too fragmented)");
  void* view = to_emu(reinterpret_cast<void*>(span));
  if (mprotect(view, pages * page_bytes, PROT_READ | PROT_WRITE) != 0)
    return fail(cudaErrorMemoryAllocation, at + ": mprotect failed: " + std::strerror(errno));
  std::memset(view, 0xff, pages * page_bytes);  // NaN in every float type; the canaries
  Allocation x;
  x.span = span;
  x.pages = pages;
  x.bytes = bytes;
  x.device = dn;
  x.id = machine().next_allocation++;
  x.site = site_text(site);
  const std::size_t rounded = (bytes + device_alignment - 1) / device_alignment * device_alignment;
  x.address = span + pages * page_bytes - rounded;
  d.used += bytes;
  *ptr = reinterpret_cast<void*>(x.address);
  d.allocations.emplace(x.address, std::move(x));
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr, seqpar_emu_site site) {
  Lock lock(machine().mutex);
  if (!ptr) return cudaSuccess;
  const std::string at = call_at("cudaFree", site);
  const auto a = reinterpret_cast<std::uintptr_t>(ptr);
  if (!is_device_address(ptr))
    return fail(cudaErrorInvalidValue, at + ": " + describe_address(ptr) + " is not device memory");
  const int dn = device_of_address(a);
  Device& d = machine().devices[static_cast<std::size_t>(dn)];
  auto it = d.allocations.find(a);
  if (it == d.allocations.end())
    return fail(cudaErrorInvalidValue, at + ": " + describe_address(ptr) +
                                           " is not the start of a live allocation (freed twice?)");
  // cudaFree synchronises the device first.
  if (const cudaError_t e = check_nccl_quiet(dn, at)) return e;
  wait_for(
      lock, [&] { return advance_device(dn); }, at);
  it = d.allocations.find(a);
  if (it == d.allocations.end()) return cudaSuccess;
  Allocation& x = it->second;
  if (const std::string overwritten = check_canaries(x); !overwritten.empty())
    fail_device(dn, cudaErrorIllegalAddress, "at its cudaFree (" + at + "): " + overwritten);
  void* view = to_emu(reinterpret_cast<void*>(x.span));
  (void)madvise(view, x.pages * page_bytes, MADV_DONTNEED);
  (void)mprotect(view, x.pages * page_bytes, PROT_NONE);
  d.freed.emplace_back(x.span, x.pages + 1);
  d.used -= x.bytes;
  d.allocations.erase(it);
  return sticky_of(dn);
}

cudaError_t cudaHostAlloc(void** ptr, std::size_t bytes, unsigned, seqpar_emu_site site) {
  Lock lock(machine().mutex);
  const std::size_t rounded =
      std::max<std::size_t>(page_bytes, (bytes + page_bytes - 1) / page_bytes * page_bytes);
  void* p = std::aligned_alloc(page_bytes, rounded);
  if (!p) return fail(cudaErrorMemoryAllocation, call_at("cudaHostAlloc", site));
  std::memset(p, 0xff, rounded);  // fresh: NaN until something is written
  machine().pinned.emplace(reinterpret_cast<std::uintptr_t>(p),
                           PinnedBlock{bytes, site_text(site)});
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, std::size_t bytes, seqpar_emu_site site) {
  return cudaHostAlloc(ptr, bytes, cudaHostAllocDefault, site);
}

cudaError_t cudaFreeHost(void* ptr, seqpar_emu_site site) {
  Lock lock(machine().mutex);
  if (!ptr) return cudaSuccess;
  const std::string at = call_at("cudaFreeHost", site);
  auto it = machine().pinned.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == machine().pinned.end())
    return fail(cudaErrorInvalidValue,
                at + ": " + describe_address(ptr) + " is not from cudaMallocHost / cudaHostAlloc");
  // Queued copies may still read or write it: the devices are synchronised first.
  for (const Device& d : machine().devices)
    if (const cudaError_t e = check_nccl_quiet(d.index, at)) return e;
  wait_for(
      lock,
      [&] {
        for (const Device& d : machine().devices)
          if (advance_device(d.index) == Progress::blocked) return Progress::blocked;
        return Progress::done;
      },
      at);
  machine().pinned.erase(it);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr,
                                     seqpar_emu_site site) {
  Lock lock(machine().mutex);
  *attributes = cudaPointerAttributes{};
  attributes->device = -2;
  if (is_device_address(ptr)) {
    const Allocation* x = find_allocation(ptr);
    if (!x)
      return fail(cudaErrorInvalidValue,
                  call_at("cudaPointerGetAttributes", site) + ": " + describe_address(ptr));
    attributes->type = cudaMemoryTypeDevice;
    attributes->device = x->device;
    attributes->devicePointer = const_cast<void*>(ptr);
    return cudaSuccess;
  }
  if (find_pinned(ptr)) {
    attributes->type = cudaMemoryTypeHost;
    attributes->device = current_device();
    attributes->devicePointer = const_cast<void*>(ptr);
    attributes->hostPointer = const_cast<void*>(ptr);
    return cudaSuccess;
  }
  attributes->type = cudaMemoryTypeUnregistered;
  attributes->hostPointer = const_cast<void*>(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                       seqpar_emu_site site) {
  return copy(dst, src, bytes, kind, nullptr, true, "cudaMemcpy", site);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream, seqpar_emu_site site) {
  return copy(dst, src, bytes, kind, stream, false, "cudaMemcpyAsync", site);
}

cudaError_t cudaMemset(void* ptr, int value, std::size_t bytes, seqpar_emu_site site) {
  return memset_on(ptr, value, bytes, nullptr, "cudaMemset", site);
}

cudaError_t cudaMemsetAsync(void* ptr, int value, std::size_t bytes, cudaStream_t stream,
                            seqpar_emu_site site) {
  return memset_on(ptr, value, bytes, stream, "cudaMemsetAsync", site);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags, seqpar_emu_site) {
  Lock lock(machine().mutex);
  Device& d = machine().devices[static_cast<std::size_t>(current_device())];
  auto s = std::make_shared<Stream>();
  s->device = d.index;
  s->blocking = (flags & cudaStreamNonBlocking) == 0;
  s->id = machine().next_stream++;
  d.streams.push_back(s);
  *stream = reinterpret_cast<cudaStream_t>(s.get());
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream, seqpar_emu_site site) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault, site);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream, seqpar_emu_site site) {
  Lock lock(machine().mutex);
  const std::shared_ptr<Stream> s = stream_of(stream);
  if (!s || s->legacy)
    return fail(cudaErrorInvalidResourceHandle, call_at("cudaStreamDestroy", site));
  // Its queued work still runs (when something waits for the device).
  s->destroyed = true;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream, seqpar_emu_site site) {
  Lock lock(machine().mutex);
  const std::shared_ptr<Stream> s = stream_of(stream);
  if (!s) return fail(cudaErrorInvalidResourceHandle, call_at("cudaStreamSynchronize", site));
  const std::uint64_t target = s->enqueued;
  wait_for(
      lock, [&] { return advance(*s, target); }, call_at("cudaStreamSynchronize", site));
  return sticky_of(s->device);
}

cudaError_t cudaStreamQuery(cudaStream_t stream, seqpar_emu_site site) {
  Lock lock(machine().mutex);
  const std::shared_ptr<Stream> s = stream_of(stream);
  if (!s) return fail(cudaErrorInvalidResourceHandle, call_at("cudaStreamQuery", site));
  if (advance(*s, s->enqueued) == Progress::blocked) {
    if (const cudaError_t e = sticky_of(s->device)) return e;
    return cudaErrorNotReady;
  }
  return sticky_of(s->device);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned,
                                seqpar_emu_site site) {
  Lock lock(machine().mutex);
  const std::shared_ptr<Stream> s = stream_of(stream);
  auto it = event_handles().events.find(event);
  if (!s || it == event_handles().events.end())
    return fail(cudaErrorInvalidResourceHandle, call_at("cudaStreamWaitEvent", site));
  const EventState& e = *it->second;
  if (!e.stream) return cudaSuccess;  // never recorded: nothing to wait for
  Op op;
  op.kind = Op::Kind::wait;
  op.wait_stream = e.stream;
  op.wait_seq = e.seq;
  op.what = "cudaStreamWaitEvent at " + site_text(site) + " (for " + e.stream->name() + ")";
  enqueue(s, std::move(op));
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags, seqpar_emu_site) {
  Lock lock(machine().mutex);
  auto e = std::make_shared<EventState>();
  e->timing = (flags & cudaEventDisableTiming) == 0;
  *event = reinterpret_cast<cudaEvent_t>(e.get());
  event_handles().events.emplace(e.get(), e);
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event, seqpar_emu_site site) {
  return cudaEventCreateWithFlags(event, cudaEventDefault, site);
}

cudaError_t cudaEventDestroy(cudaEvent_t event, seqpar_emu_site site) {
  Lock lock(machine().mutex);
  if (event_handles().events.erase(event) != 1)
    return fail(cudaErrorInvalidResourceHandle, call_at("cudaEventDestroy", site));
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream, seqpar_emu_site site) {
  Lock lock(machine().mutex);
  const std::shared_ptr<Stream> s = stream_of(stream);
  auto it = event_handles().events.find(event);
  if (!s || it == event_handles().events.end())
    return fail(cudaErrorInvalidResourceHandle, call_at("cudaEventRecord", site));
  EventState& e = *it->second;
  Op op;
  op.kind = Op::Kind::marker;
  op.stamp = std::make_shared<std::chrono::steady_clock::time_point>();
  op.what = "cudaEventRecord at " + site_text(site);
  e.stamp = op.stamp;
  enqueue(s, std::move(op));
  e.stream = s;
  e.seq = s->enqueued;
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event, seqpar_emu_site site) {
  Lock lock(machine().mutex);
  auto it = event_handles().events.find(event);
  if (it == event_handles().events.end())
    return fail(cudaErrorInvalidResourceHandle, call_at("cudaEventSynchronize", site));
  const std::shared_ptr<EventState> e = it->second;
  if (!e->stream) return cudaSuccess;
  wait_for(
      lock, [&] { return advance(*e->stream, e->seq); }, call_at("cudaEventSynchronize", site));
  return sticky_of(e->stream->device);
}

cudaError_t cudaEventQuery(cudaEvent_t event, seqpar_emu_site site) {
  Lock lock(machine().mutex);
  auto it = event_handles().events.find(event);
  if (it == event_handles().events.end())
    return fail(cudaErrorInvalidResourceHandle, call_at("cudaEventQuery", site));
  const EventState& e = *it->second;
  if (!e.stream) return cudaSuccess;
  if (advance(*e.stream, e.seq) == Progress::blocked) return cudaErrorNotReady;
  return sticky_of(e.stream->device);
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end,
                                 seqpar_emu_site site) {
  Lock lock(machine().mutex);
  auto a = event_handles().events.find(start), b = event_handles().events.find(end);
  if (a == event_handles().events.end() || b == event_handles().events.end() ||
      !a->second->timing || !b->second->timing || !a->second->stream || !b->second->stream)
    return fail(cudaErrorInvalidResourceHandle, call_at("cudaEventElapsedTime", site));
  if (a->second->stream->completed < a->second->seq ||
      b->second->stream->completed < b->second->seq)
    return cudaErrorNotReady;
  *ms = std::chrono::duration<float, std::milli>(*b->second->stamp - *a->second->stamp).count();
  return cudaSuccess;
}

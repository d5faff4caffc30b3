// Kernels on the emulated device: each thread of a block is a fiber (Boost.Context) of the
// host thread that runs the launch; a thread runs until it waits (__syncthreads, a warp
// intrinsic) or ends, then the next one. Between the points where threads wait for each
// other they run in an order (forward, reverse or seeded random, over the blocks and the
// threads of each block), and a launch runs once per configured order from the same memory:
// a result that depends on the order (a missing barrier, a race) fails the launch.
#include <cxxabi.h>
#include <dlfcn.h>
#include <signal.h>
#include <sys/mman.h>

#include <algorithm>
#include <boost/context/detail/fcontext.hpp>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "machine.hpp"

namespace seqpar::emu {

namespace bc = boost::context::detail;

namespace {

constexpr std::size_t fiber_stack_bytes = std::size_t{256} << 10;

// A fiber: its context and its stack (whose lowest page is a guard page). A fiber runs the
// threads of a block one after the other, as plain calls, until one of them waits; that
// thread keeps the fiber, and the next thread gets another. So a block whose threads never
// wait costs one fiber, and one with a barrier one fiber a thread.
struct Fiber {
  bc::fcontext_t ctx = nullptr;
  char* stack = nullptr;
};

void fiber_main(bc::transfer_t t);

// Stacks of threads that ended, for any thread's next fibers.
struct SpareStacks {
  std::mutex mutex;
  std::vector<char*> stacks;
};
SpareStacks& spare_stacks() {
  static auto* s = new SpareStacks;  // never destroyed: threads end after static objects do
  return *s;
}

// The calling host thread's idle fibers (kept for the next block and launch) and spare stacks.
// A fiber stays on the host thread that made it.
class FiberPool {
 public:
  Fiber* take() {
    if (!idle_.empty()) {
      Fiber* f = idle_.back();
      idle_.pop_back();
      return f;
    }
    auto* f = new Fiber;
    f->stack = new_stack();
    f->ctx =
        bc::make_fcontext(f->stack + fiber_stack_bytes, fiber_stack_bytes - page_bytes, fiber_main);
    return f;
  }
  void idle(Fiber* f) { idle_.push_back(f); }
  // A fiber whose thread was abandoned (a failed launch): its stack is reused, cleanly.
  void drop(Fiber* f) {
    stacks_.push_back(f->stack);
    delete f;
  }
  bool owns_guard(const void* a) const {
    for (const Fiber* f : idle_)
      if (a >= f->stack && a < f->stack + page_bytes) return true;
    return false;
  }
  ~FiberPool() {
    for (Fiber* f : idle_) stacks_.push_back(f->stack), delete f;
    SpareStacks& spare = spare_stacks();
    std::lock_guard lock(spare.mutex);
    spare.stacks.insert(spare.stacks.end(), stacks_.begin(), stacks_.end());
  }

 private:
  char* new_stack() {
    if (!stacks_.empty()) {
      char* s = stacks_.back();
      stacks_.pop_back();
      return s;
    }
    {
      SpareStacks& spare = spare_stacks();
      std::lock_guard lock(spare.mutex);
      if (!spare.stacks.empty()) {
        char* s = spare.stacks.back();
        spare.stacks.pop_back();
        return s;
      }
    }
    void* p = mmap(nullptr, fiber_stack_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) fatal("no memory for a kernel thread's stack");
    (void)mprotect(p, page_bytes, PROT_NONE);
    return static_cast<char*>(p);
  }
  std::vector<Fiber*> idle_;
  std::vector<char*> stacks_;
};

// The host thread's pool, made on first use. Work may run while the thread's other objects
// end (a CUDA context synchronising its stream from its destructor): the pool is given back
// when the thread ends, and one made after that is given back after each launch.
struct ThreadFibers {
  FiberPool* pool = nullptr;
  bool ended = false;
};
thread_local ThreadFibers thread_fibers;
struct FiberReaper {
  ~FiberReaper() {
    delete thread_fibers.pool;
    thread_fibers.pool = nullptr;
    thread_fibers.ended = true;
  }
};
thread_local FiberReaper fiber_reaper;

FiberPool& fibers() {
  if (!thread_fibers.pool) {
    thread_fibers.pool = new FiberPool;
    if (!thread_fibers.ended) static_cast<void>(fiber_reaper);  // ends the pool with the thread
  }
  return *thread_fibers.pool;
}

void after_launch() {
  if (thread_fibers.ended && thread_fibers.pool) {
    delete thread_fibers.pool;
    thread_fibers.pool = nullptr;
  }
}

enum class State { fresh, runnable, barrier, warp, done };

struct ThreadSlot {
  State state = State::fresh;
  Fiber* fiber = nullptr;  // while it waits: the fiber it runs on
  uint3 idx{0, 0, 0};
  int linear = 0;
  // What it waits at.
  std::source_location site;
  WarpOp op = WarpOp::sync;
  unsigned mask = 0;
  std::uint64_t value = 0, result = 0;
  int arg = 0, width = 32;
};

struct BlockRun {
  const std::string* name = nullptr;  // the kernel's
  KernelBody* body = nullptr;
  void* args = nullptr;
  std::vector<ThreadSlot> slots;
  std::vector<int> perm;   // the order of this block's threads
  std::size_t cursor = 0;  // the next position of perm a round visits
  bc::fcontext_t scheduler = nullptr;
  ThreadSlot* running = nullptr;
  Fiber* entering = nullptr;  // the fiber the scheduler jumps into
  enum class Back { blocked, idle } back = Back::idle;
  Fiber* back_fiber = nullptr;
  std::string error;  // a violation: the block stops
};

thread_local BlockRun* current_block = nullptr;

// Runs the fresh threads from the cursor on, in order, until a thread that waits elsewhere (the
// scheduler resumes it) or the end of the round.
void run_fresh_threads(BlockRun*& b, Fiber* self) {
  for (;;) {
    ThreadSlot* slot = nullptr;
    while (b->cursor < b->perm.size()) {
      ThreadSlot& t = b->slots[static_cast<std::size_t>(b->perm[b->cursor])];
      if (t.state == State::runnable) return;
      if (t.state == State::fresh) {
        slot = &t;
        break;
      }
      ++b->cursor;
    }
    if (!slot) return;
    ++b->cursor;
    slot->state = State::runnable;
    slot->fiber = self;
    b->running = slot;
    threadIdx = slot->idx;
    b->body->run(b->args);
    slot->state = State::done;
    slot->fiber = nullptr;
  }
}

void fiber_main(bc::transfer_t t) {
  auto* b = static_cast<BlockRun*>(t.data);
  b->scheduler = t.fctx;
  Fiber* self = b->entering;
  for (;;) {
    run_fresh_threads(b, self);
    b->back = BlockRun::Back::idle;
    b->back_fiber = self;
    const bc::transfer_t r = bc::jump_fcontext(b->scheduler, nullptr);
    b = static_cast<BlockRun*>(r.data);
    b->scheduler = r.fctx;
  }
}

// A thread waits: back to the scheduler, which resumes it when it may go on.
void yield_to_scheduler(BlockRun& b) {
  b.back = BlockRun::Back::blocked;
  const bc::transfer_t r = bc::jump_fcontext(b.scheduler, nullptr);
  b.scheduler = r.fctx;
}

void jump_into(BlockRun& b, Fiber* f, bc::fcontext_t ctx) {
  b.entering = f;
  const bc::transfer_t r = bc::jump_fcontext(ctx, &b);
  if (b.back == BlockRun::Back::idle) {
    b.back_fiber->ctx = r.fctx;
    fibers().idle(b.back_fiber);
  } else {
    b.running->fiber->ctx = r.fctx;
  }
}

// A fiber from the pool runs the fresh threads from the cursor.
void run_fresh(BlockRun& b) {
  Fiber* f = fibers().take();
  jump_into(b, f, f->ctx);
}

// A waiting thread that may go on.
void resume(BlockRun& b, ThreadSlot& t) {
  Fiber* f = t.fiber;
  b.running = &t;
  threadIdx = t.idx;
  jump_into(b, f, f->ctx);
}

std::string thread_name(const ThreadSlot& t) {
  if (blockDim.y == 1 && blockDim.z == 1) return "thread " + std::to_string(t.idx.x);
  return "thread (" + std::to_string(t.idx.x) + "," + std::to_string(t.idx.y) + "," +
         std::to_string(t.idx.z) + ")";
}

const char* op_name(WarpOp op) {
  switch (op) {
    case WarpOp::sync: return "__syncwarp";
    case WarpOp::shfl_idx: return "__shfl_sync";
    case WarpOp::shfl_up: return "__shfl_up_sync";
    case WarpOp::shfl_down: return "__shfl_down_sync";
    case WarpOp::shfl_xor: return "__shfl_xor_sync";
    case WarpOp::ballot: return "__ballot_sync";
    case WarpOp::any: return "__any_sync";
    case WarpOp::all: return "__all_sync";
  }
  return "a warp intrinsic";
}

std::string hex(unsigned mask) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", mask);
  return buf;
}

std::string waits_at(const ThreadSlot& t) {
  if (t.state == State::barrier) return "__syncthreads (" + site_text(t.site) + ")";
  if (t.state == State::warp)
    return std::string(op_name(t.op)) + " with mask " + hex(t.mask) + " (" + site_text(t.site) +
           ")";
  if (t.state == State::done) return "its end (exited)";
  return "nothing";
}

// A list of thread names, the first few of them.
std::string some_threads(const std::vector<const ThreadSlot*>& ts) {
  std::string out;
  for (std::size_t i = 0; i < ts.size() && i < 4; ++i) out += (i ? ", " : "") + thread_name(*ts[i]);
  if (ts.size() > 4) out += " and " + std::to_string(ts.size() - 4) + " more";
  return out;
}

// Where every thread that did not finish waits: the block cannot go on.
std::string describe_stuck(const BlockRun& b) {
  std::map<std::string, std::vector<const ThreadSlot*>> groups;
  for (const ThreadSlot& t : b.slots) groups[waits_at(t)].push_back(&t);
  std::string out = "no thread of the block can go on:";
  for (const auto& [what, ts] : groups) {
    out += ' ';
    out += std::to_string(ts.size());
    out += " at ";
    out += what;
    out += " (";
    out += some_threads(ts);
    out += ");";
  }
  return out;
}

bool same_wait(const ThreadSlot& a, const ThreadSlot& b) {
  return a.op == b.op && a.mask == b.mask && a.site.line() == b.site.line() &&
         a.site.column() == b.site.column() &&
         (a.site.file_name() == b.site.file_name() ||
          std::strcmp(a.site.file_name(), b.site.file_name()) == 0);
}

// Completes the warp ops whose lanes have all arrived; a lane reading one that takes no part
// is an error. Returns whether any lane can go on.
bool resolve_warps(BlockRun& b) {
  bool released = false;
  const int n = static_cast<int>(b.slots.size());
  for (int w0 = 0; w0 < n; w0 += 32) {
    const int lanes = std::min(32, n - w0);
    unsigned tried = 0;  // lanes whose wait was looked at already (by a lane waiting alike)
    for (int l = 0; l < lanes; ++l) {
      ThreadSlot& first = b.slots[static_cast<std::size_t>(w0 + l)];
      if (first.state != State::warp || ((tried >> l) & 1u)) continue;
      for (int k = l; k < lanes; ++k)
        if (b.slots[static_cast<std::size_t>(w0 + k)].state == State::warp &&
            same_wait(b.slots[static_cast<std::size_t>(w0 + k)], first))
          tried |= 1u << k;
      // The lanes of its mask that have not exited must all wait at the same op.
      unsigned part = 0;
      bool complete = true;
      for (int k = 0; k < lanes; ++k) {
        if (!((first.mask >> k) & 1u)) continue;
        const ThreadSlot& o = b.slots[static_cast<std::size_t>(w0 + k)];
        if (o.state == State::done) continue;
        if (o.state != State::warp || !same_wait(o, first)) {
          complete = false;
          break;
        }
        part |= 1u << k;
      }
      if (!complete) continue;
      const int width = first.width;
      for (int k = 0; k < lanes; ++k) {
        if (!((part >> k) & 1u)) continue;
        ThreadSlot& t = b.slots[static_cast<std::size_t>(w0 + k)];
        switch (t.op) {
          case WarpOp::sync: t.result = 0; break;
          case WarpOp::ballot:
          case WarpOp::any:
          case WarpOp::all: {
            unsigned votes = 0;
            for (int j = 0; j < lanes; ++j)
              if (((part >> j) & 1u) && b.slots[static_cast<std::size_t>(w0 + j)].value)
                votes |= 1u << j;
            t.result = t.op == WarpOp::ballot ? votes
                       : t.op == WarpOp::any  ? (votes != 0)
                                              : (votes == part);
            break;
          }
          default: {
            const int seg = k & ~(width - 1), in_seg = k & (width - 1);
            int src = k;
            if (t.op == WarpOp::shfl_idx) src = seg + (t.arg & (width - 1));
            if (t.op == WarpOp::shfl_up && in_seg >= t.arg) src = k - t.arg;
            if (t.op == WarpOp::shfl_down && in_seg + t.arg < width) src = k + t.arg;
            if (t.op == WarpOp::shfl_xor) {
              const int x = k ^ t.arg;
              if (x < 32 && (x & ~(width - 1)) <= seg) src = x;
            }
            if (!((part >> src) & 1u)) {
              const ThreadSlot& s = b.slots[static_cast<std::size_t>(std::min(w0 + src, n - 1))];
              b.error =
                  thread_name(t) + " reads lane " + std::to_string(src) + " in " + op_name(t.op) +
                  " (" + site_text(t.site) + ", mask " + hex(t.mask) +
                  "), which takes no part in it (" +
                  (src >= lanes || !((t.mask >> src) & 1u)
                       ? std::string("outside the mask")
                       : "it " + std::string(s.state == State::done ? "exited" : "is elsewhere")) +
                  "): its value is undefined";
              return false;
            }
            t.result = b.slots[static_cast<std::size_t>(w0 + src)].value;
          }
        }
      }
      for (int k = 0; k < lanes; ++k)
        if ((part >> k) & 1u) b.slots[static_cast<std::size_t>(w0 + k)].state = State::runnable;
      released = true;
    }
  }
  return released;
}

// The order threads (or blocks) run in: forward, reverse, or a seeded shuffle.
void order_of(std::vector<int>& perm, int n, int order, std::uint64_t seed) {
  perm.resize(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  if (order == 1) std::reverse(perm.begin(), perm.end());
  if (order == 2) {
    std::mt19937_64 rng(seed);
    std::shuffle(perm.begin(), perm.end(), rng);
  }
}

void run_block(BlockRun& b, int order, std::uint64_t seed) {
  const int n = static_cast<int>(b.slots.size());
  order_of(b.perm, n, order, seed);
  for (;;) {
    b.cursor = 0;
    while (b.cursor < b.perm.size()) {
      ThreadSlot& t = b.slots[static_cast<std::size_t>(b.perm[b.cursor])];
      if (t.state == State::fresh) {
        run_fresh(b);
      } else if (t.state == State::runnable) {
        ++b.cursor;
        resume(b, t);
      } else {
        ++b.cursor;
        continue;
      }
      if (!b.error.empty()) return;
    }
    int done = 0, barrier = 0;
    for (const ThreadSlot& t : b.slots) {
      done += t.state == State::done;
      barrier += t.state == State::barrier;
    }
    if (done == n) return;
    if (resolve_warps(b)) continue;
    if (!b.error.empty()) return;
    if (barrier > 0 && barrier + done == n) {
      const ThreadSlot* first = nullptr;
      std::vector<const ThreadSlot*> exited, elsewhere;
      for (const ThreadSlot& t : b.slots) {
        if (t.state == State::done) {
          exited.push_back(&t);
        } else if (!first) {
          first = &t;
        } else if (!same_wait(t, *first)) {
          elsewhere.push_back(&t);
        }
      }
      if (!exited.empty()) {
        b.error = "__syncthreads (" + site_text(first->site) +
                  ") is reached by part of the block: " + std::to_string(barrier) +
                  " threads wait there while " + std::to_string(exited.size()) + " exited (" +
                  some_threads(exited) + ")";
        return;
      }
      if (!elsewhere.empty()) {
        b.error =
            "the threads of the block wait at different __syncthreads: " + thread_name(*first) +
            " at " + site_text(first->site) + ", " + some_threads(elsewhere) + " at " +
            site_text(elsewhere.front()->site);
        return;
      }
      for (ThreadSlot& t : b.slots) t.state = State::runnable;
      continue;
    }
    b.error = describe_stuck(b);
    return;
  }
}

void abandon(BlockRun& b) {
  for (ThreadSlot& t : b.slots)
    if (t.fiber && t.state != State::done) {
      fibers().drop(t.fiber);
      t.fiber = nullptr;
    }
}

// The kernel's name: its symbol when the launch named it through a pointer, else as written.
std::string kernel_name(const LaunchConfig& c, const KernelBody& body) {
  if (const void* f = body.function()) {
    Dl_info info{};
    if (dladdr(f, &info) && info.dli_sname) {
      int status = 0;
      char* d = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
      std::string name = status == 0 && d ? d : info.dli_sname;
      std::free(d);
      return name;
    }
  }
  return c.kernel;
}

std::string dims(const dim3& d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

// An alternate signal stack for this host thread, so that a kernel thread's stack overflow
// is reported rather than faulting again in the handler.
void ensure_signal_stack() {
  thread_local bool done = false;
  if (done) return;
  done = true;
  const std::size_t bytes = std::size_t{64} << 10;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return;
  stack_t ss{};
  ss.ss_sp = p;
  ss.ss_size = bytes;
  (void)sigaltstack(&ss, nullptr);
}

struct Referenced {
  const Allocation* allocation;
  std::vector<unsigned char> before;  // its bytes before the launch (order checks)
  std::vector<unsigned char> after;   // after the first order's run
};

std::string value_text(const unsigned char* p, std::size_t offset) {
  const std::size_t aligned = offset & ~std::size_t{3};
  float f;
  std::uint32_t u;
  std::memcpy(&f, p + aligned, 4);
  std::memcpy(&u, p + aligned, 4);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g (0x%08" PRIx32 " as a float)", static_cast<double>(f), u);
  return buf;
}

}  // namespace

void block_barrier(const std::source_location& site) {
  BlockRun* b = current_block;
  if (!b) fatal("__syncthreads (" + site_text(site) + ") called outside a kernel");
  ThreadSlot& t = *b->running;
  t.state = State::barrier;
  t.site = site;
  yield_to_scheduler(*b);
}

std::uint64_t warp_collective(WarpOp op, unsigned mask, std::uint64_t value, int arg, int width,
                              const std::source_location& site) {
  BlockRun* b = current_block;
  if (!b) fatal(std::string(op_name(op)) + " (" + site_text(site) + ") called outside a kernel");
  ThreadSlot& t = *b->running;
  const int lane = t.linear % 32;
  if (!((mask >> lane) & 1u)) {
    b->error = thread_name(t) + " (lane " + std::to_string(lane) + ") calls " + op_name(op) + " (" +
               site_text(site) + ") with mask " + hex(mask) + ", which does not name it";
    t.state = State::barrier;  // stopped; the scheduler reports the error
    yield_to_scheduler(*b);
  }
  if (width < 1 || width > 32 || (width & (width - 1)) != 0) {
    b->error = thread_name(t) + " calls " + op_name(op) + " (" + site_text(site) + ") with width " +
               std::to_string(width) + ", not a power of two up to 32";
    t.state = State::barrier;
    yield_to_scheduler(*b);
  }
  t.state = State::warp;
  t.op = op;
  t.mask = mask;
  t.value = value;
  t.arg = arg;
  t.width = width;
  t.site = site;
  yield_to_scheduler(*b);
  return t.result;
}

namespace {
cudaError_t run_launch(const LaunchConfig& c, KernelBody& body, int device) {
  ensure_signal_stack();
  Machine& m = machine();
  const std::string name = kernel_name(c, body);
  const std::string launched = "kernel " + name + "<<<" + dims(c.grid) + ", " + dims(c.block) +
                               ">>> launched at " + c.file + ":" + std::to_string(c.line);
  // The arguments with their device addresses translated; the allocations they name. A pointer
  // argument must hold device memory of this device (or be null); in a class argument, a word
  // that points into a live allocation is taken for a pointer.
  const std::size_t size = body.args_size();
  std::vector<std::uint64_t> args((size + 7) / 8 + 1);
  std::memcpy(args.data(), body.args(), size);
  auto* bytes = reinterpret_cast<unsigned char*>(args.data());
  std::vector<Referenced> refs;
  std::set<std::uint64_t> seen;
  const auto translate = [&](std::size_t offset, bool exact) {
    void* p = nullptr;
    std::memcpy(&p, bytes + offset, sizeof p);
    if (!p || !is_device_address(p)) return true;
    const Allocation* x = find_allocation(p, 0);
    if (!x) {
      if (!exact) return true;
      fail_device(device, cudaErrorIllegalAddress,
                  launched + ": an argument is the device address " + describe_address(p) +
                      ", which no live allocation holds");
      return false;
    }
    if (x->device != device) {
      fail_device(device, cudaErrorIllegalAddress,
                  launched + " on device " + std::to_string(device) + ": an argument points into " +
                      describe_address(p) + " (peer access is not enabled)");
      return false;
    }
    void* view = to_emu(p);
    std::memcpy(bytes + offset, &view, sizeof view);
    if (seen.insert(x->id).second) refs.push_back({x, {}, {}});
    return true;
  };
  const ArgLayout layout = body.layout();
  for (const std::size_t offset : layout.pointers)
    if (!translate(offset, true)) return cudaErrorIllegalAddress;
  for (const auto& [offset, length] : layout.records)
    for (std::size_t o = (offset + 7) / 8 * 8; o + 8 <= offset + length; o += 8)
      if (!translate(o, false)) return cudaErrorIllegalAddress;
  // Which orders this launch runs in.
  const std::string key = std::string(c.file) + ":" + std::to_string(c.line) + " " + name;
  const long count = m.launches_by_site[key]++;
  const Config& cfg = config();
  std::vector<int> orders = cfg.orders;
  if (cfg.order_checks >= 0 && count >= cfg.order_checks)
    orders = {cfg.orders[static_cast<std::size_t>(count) % cfg.orders.size()]};
  const auto bytes_of = [](const Allocation& x) {
    return static_cast<unsigned char*>(to_emu(reinterpret_cast<void*>(x.address)));
  };
  if (orders.size() > 1)
    for (Referenced& r : refs)
      r.before.assign(bytes_of(*r.allocation), bytes_of(*r.allocation) + r.allocation->bytes);

  const unsigned threads = c.block.x * c.block.y * c.block.z;
  const std::uint64_t blocks = std::uint64_t{c.grid.x} * c.grid.y * c.grid.z;
  BlockRun b;
  b.name = &name;
  b.body = &body;
  b.args = args.data();
  b.slots.resize(threads);
  BlockRun* const outer = current_block;
  current_block = &b;
  blockDim = c.block;
  gridDim = c.grid;
  std::vector<int> block_order;
  for (std::size_t pass = 0; pass < orders.size(); ++pass) {
    const int order = orders[pass];
    const std::uint64_t seed = cfg.seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(count);
    if (pass > 0)
      for (Referenced& r : refs)
        std::memcpy(bytes_of(*r.allocation), r.before.data(), r.before.size());
    if (blocks > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
      fatal(launched + ": too many blocks for the emulation");
    order_of(block_order, static_cast<int>(blocks), order, seed);
    for (const int lin : block_order) {
      const auto l = static_cast<unsigned>(lin);
      blockIdx = {l % c.grid.x, l / c.grid.x % c.grid.y, l / (c.grid.x * c.grid.y)};
      for (unsigned i = 0; i < threads; ++i) {
        ThreadSlot& t = b.slots[i];
        t = ThreadSlot{};
        t.linear = static_cast<int>(i);
        t.idx = {i % c.block.x, i / c.block.x % c.block.y, i / (c.block.x * c.block.y)};
      }
      run_block(b, order, seed ^ (static_cast<std::uint64_t>(lin) * 0xBF58476D1CE4E5B9ull));
      if (!b.error.empty()) {
        abandon(b);
        current_block = outer;
        fail_device(device, cudaErrorLaunchFailure,
                    launched + ", block " + dims(dim3(blockIdx)) + ": " + b.error);
        return cudaErrorLaunchFailure;
      }
    }
    if (pass == 0 && orders.size() > 1) {
      for (Referenced& r : refs)
        r.after.assign(bytes_of(*r.allocation), bytes_of(*r.allocation) + r.allocation->bytes);
    } else if (pass > 0) {
      for (const Referenced& r : refs) {
        const unsigned char* now = bytes_of(*r.allocation);
        if (std::memcmp(now, r.after.data(), r.after.size()) == 0) continue;
        std::size_t i = 0;
        while (now[i] == r.after[i]) ++i;
        static const char* names[] = {"forward", "reverse", "random"};
        current_block = outer;
        fail_device(device, cudaErrorLaunchFailure,
                    launched +
                        ": the result depends on the order the threads run in (a missing "
                        "__syncthreads, or a race): byte " +
                        std::to_string(i) + " of " + "allocation #" +
                        std::to_string(r.allocation->id) + " (" +
                        std::to_string(r.allocation->bytes) + " bytes, cudaMalloc at " +
                        r.allocation->site + ") is " + value_text(r.after.data(), i) + " in " +
                        names[orders[0]] + " order and " + value_text(now, i) + " in " +
                        names[order] + " order");
        return cudaErrorLaunchFailure;
      }
    }
  }
  current_block = outer;
  for (const Referenced& r : refs)
    if (const std::string bad = check_canaries(*r.allocation); !bad.empty()) {
      fail_device(device, cudaErrorIllegalAddress, launched + ": " + bad);
      return cudaErrorIllegalAddress;
    }
  return cudaSuccess;
}
}  // namespace

cudaError_t run_kernel(const LaunchConfig& c, KernelBody& body, int device) {
  const cudaError_t e = run_launch(c, body, device);
  after_launch();
  return e;
}

/// The kernel running on this host thread, its block and thread (for the fault handler).
std::string running_kernel_thread() {
  const BlockRun* b = current_block;
  if (!b || !b->running) return "";
  return "kernel " + *b->name + ", block " + dims(dim3(blockIdx)) + ", " + thread_name(*b->running);
}

/// Whether address a is in the guard page of one of this thread's fiber stacks.
bool in_fiber_stack_guard(const void* a) {
  const BlockRun* b = current_block;
  if (!b) return false;
  for (const ThreadSlot& t : b->slots)
    if (t.fiber && a >= t.fiber->stack && a < t.fiber->stack + page_bytes) return true;
  return fibers().owns_guard(a);
}

void launch_kernel(const LaunchConfig& c, std::unique_ptr<KernelBody> body) {
  Machine& m = machine();
  Lock lock(m.mutex);
  const std::string at = std::string(c.file) + ":" + std::to_string(c.line);
  const std::shared_ptr<Stream> s = stream_of(c.stream);
  if (!s) {
    (void)fail(cudaErrorInvalidResourceHandle, "kernel " + std::string(c.kernel) + " launched at " +
                                                   at + " on a stream that is not live");
    return;
  }
  if (s->device != current_device()) {
    (void)fail(cudaErrorInvalidResourceHandle,
               "kernel " + std::string(c.kernel) + " launched at " + at + " on " + s->name() +
                   " while the calling thread's device is " + std::to_string(current_device()));
    return;
  }
  const Device& d = m.devices[static_cast<std::size_t>(s->device)];
  if (d.sticky != cudaSuccess) {
    (void)fail(d.sticky, "an earlier kernel failed: " + d.sticky_detail);
    return;
  }
  const std::uint64_t threads = std::uint64_t{c.block.x} * c.block.y * c.block.z;
  std::string bad;
  if (c.grid.x == 0 || c.grid.y == 0 || c.grid.z == 0 || threads == 0)
    bad = "an empty grid or block";
  else if (c.block.x > 1024 || c.block.y > 1024 || c.block.z > 64 || threads > 1024)
    bad = "more than 1024 threads a block (or block dimensions over 1024, 1024, 64)";
  else if (c.grid.x > 0x7fffffffu || c.grid.y > 65535 || c.grid.z > 65535)
    bad = "grid dimensions over 2^31 - 1, 65535, 65535";
  else if (c.shared > (std::size_t{48} << 10))
    bad = std::to_string(c.shared) + " bytes of dynamic shared memory (48 KiB without opting in)";
  if (!bad.empty()) {
    (void)fail(cudaErrorInvalidConfiguration, "kernel " + std::string(c.kernel) + "<<<" +
                                                  dims(c.grid) + ", " + dims(c.block) +
                                                  ">>> launched at " + at + ": " + bad);
    return;
  }
  Op op;
  op.what = "kernel " + std::string(c.kernel) + " launched at " + at;
  std::shared_ptr<KernelBody> shared(std::move(body));
  const int device = s->device;
  op.run = [c, shared, device] { return run_kernel(c, *shared, device); };
  enqueue(s, std::move(op));
}

}  // namespace seqpar::emu

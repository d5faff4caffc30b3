#pragma once
// The emulated machine: its devices (memory, streams, the sticky error), the one lock under
// which all device work runs, and what the parts of the emulation share. Internal to the
// emulation library.
//
// Device memory: each device has a range of "device addresses" (what cudaMalloc returns, never
// mapped: the host touching one faults) and a range of the same size where the bytes are (the
// emulation's view, reached only by kernels, copies, cuBLAS and NCCL through translation). A
// kernel's arguments are scanned for device addresses and translated before its threads see
// them. Each allocation sits at the end of its own pages, inside inaccessible guard pages; the
// bytes between its end and the next 256-byte boundary, and before its start on its first page,
// are a canary checked after each kernel that was given the allocation, and at its free.
//
// Streams: asynchronous work is queued and runs only when something waits for it (a
// synchronize, an event, a blocking copy, a query), in the order the streams and events allow,
// by the waiting host thread, one piece of work at a time in the whole process.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <source_location>
#include <string>
#include <vector>

#include "seqpar_emulation/device_code.hpp"
#include "seqpar_emulation/runtime_api.hpp"

namespace seqpar::emu {

std::string site_text(const std::source_location& site);

// ---- configuration (environment variables, read once) ---------------------------------

struct Config {
  int devices = 8;                                  // SEQPAR_EMU_DEVICES
  std::size_t device_bytes = std::size_t{2} << 30;  // SEQPAR_EMU_DEVICE_MIB
  std::vector<int> orders{0, 1, 2};                 // SEQPAR_EMU_ORDERS: forward, reverse, random
  long order_checks = 3;  // SEQPAR_EMU_ORDER_CHECKS: launches a site runs in every order (-1: all)
  double hang_seconds = 120;         // SEQPAR_EMU_HANG_S
  std::uint64_t seed = 1;            // SEQPAR_EMU_SEED
  bool strict_nccl_sync = true;      // SEQPAR_EMU_NCCL_SYNC_CHECK
  bool insufficient_driver = false;  // SEQPAR_EMU_DRIVER=insufficient: a broken setup
};
const Config& config();

// ---- memory -------------------------------------------------------------------------------

inline constexpr std::size_t page_bytes = 4096;
inline constexpr std::size_t device_alignment = 256;

struct Allocation {
  std::uintptr_t address = 0;  // device address
  std::size_t bytes = 0;
  int device = 0;
  std::uint64_t id = 0;
  std::uintptr_t span = 0;  // device address of its first page
  std::size_t pages = 0;    // its pages (the guard page after them excluded)
  std::string site;         // where it was made
};

struct PinnedBlock {
  std::size_t bytes = 0;
  std::string site;
};

struct Stream;
struct CommOp;

// ---- streams and events -----------------------------------------------------------------

struct Op {
  enum class Kind { task, wait, comm, marker } kind = Kind::task;
  std::uint64_t seq = 0;                // position in its stream, from 1
  std::string what;                     // for diagnostics: what it is and who queued it
  std::function<cudaError_t()> run;     // task
  std::shared_ptr<Stream> wait_stream;  // wait: until that stream reaches wait_seq
  std::uint64_t wait_seq = 0;
  std::shared_ptr<CommOp> comm;                                  // comm
  std::shared_ptr<std::chrono::steady_clock::time_point> stamp;  // marker: when it ran
};

struct Stream {
  int device = 0;
  bool blocking = true;  // waits for (and is waited for by) the legacy default stream
  bool legacy = false;
  bool destroyed = false;
  std::uint64_t id = 0;
  std::deque<Op> ops;  // queued, not yet run
  std::uint64_t enqueued = 0, completed = 0;
  bool advancing = false;  // somewhere up the call stack, this stream is being run
  std::string name() const;
};

struct EventState {
  std::shared_ptr<Stream> stream;  // null: never recorded (it has happened)
  std::uint64_t seq = 0;
  bool timing = true;
  std::shared_ptr<std::chrono::steady_clock::time_point> stamp;
};

// A collective or point-to-point operation of the emulated NCCL, queued on a stream. Running
// it may need other streams (its peers') to reach their part first.
struct CommOp {
  virtual ~CommOp() = default;
  enum class Result { done, blocked };
  /// Tries to complete this operation (with its peers' parts, which it completes too).
  virtual Result advance() = 0;
  virtual std::string describe() const = 0;
  bool done = false;
  bool joining = false;  // being completed further up the call stack
};

// ---- devices and the machine ----------------------------------------------------------------

struct Device {
  int index = 0;
  std::uintptr_t dev_base = 0, emu_base = 0;
  std::size_t capacity = 0, used = 0;
  std::uintptr_t next = 0;                           // the next fresh page (device address)
  std::map<std::uintptr_t, Allocation> allocations;  // by address
  std::vector<std::pair<std::uintptr_t, std::size_t>> freed;  // spans (address, pages) to reuse
  std::shared_ptr<Stream> legacy;
  std::vector<std::shared_ptr<Stream>> streams;  // created and not yet gone (legacy first)
  cudaError_t sticky = cudaSuccess;
  std::string sticky_detail;
};

struct Machine {
  std::mutex mutex;
  std::condition_variable progress;  // notified whenever work is queued or completed
  std::uintptr_t dev_base = 0, emu_base = 0, span = 0;  // span: bytes of one device's range
  std::vector<Device> devices;
  std::map<std::uintptr_t, PinnedBlock> pinned;  // host address -> block
  std::uint64_t next_allocation = 1, next_stream = 1;
  std::map<std::string, long> launches_by_site;  // how many launches each site made (order checks)
};

/// The machine (made on first use, with its devices' address ranges).
Machine& machine();
using Lock = std::unique_lock<std::mutex>;

/// The calling host thread's current device.
int& current_device();

// ---- errors -------------------------------------------------------------------------------

/// Records `e` as the calling thread's last error, with what the emulation saw, printed to
/// stderr; returns e.
cudaError_t fail(cudaError_t e, const std::string& detail);
/// Makes `e` sticky on `device` (a kernel's fault): every later call on it fails.
void fail_device(int device, cudaError_t e, const std::string& detail);
/// Prints `detail` and the state of every stream, then aborts: a program that cannot go on
/// (a deadlock, a fault inside a kernel).
[[noreturn]] void fatal(const std::string& detail);
/// The queues of every device, for a diagnostic.
std::string describe_streams();

// ---- memory queries (machine lock held) ---------------------------------------------------

bool is_device_address(const void* p);
/// The live allocation holding [p, p + bytes), or null.
const Allocation* find_allocation(const void* p, std::size_t bytes = 1);
/// The live allocation nearest to p (for a diagnostic), or null.
const Allocation* nearest_allocation(const void* p);
/// Where the bytes of device address p are.
void* to_emu(const void* p);
/// The device address of an emulation-view address (or null when it is not one).
const void* from_emu(const void* p);
/// The pinned block holding [p, p + bytes), or null.
const PinnedBlock* find_pinned(const void* p, std::size_t bytes = 1);
/// Checks the canaries around an allocation; a description of what was overwritten, or "".
std::string check_canaries(const Allocation& a);
std::string describe_address(const void* p);

// ---- queues (machine lock held) ------------------------------------------------------------

/// The stream a call names (null: the legacy default stream of the current device); null
/// when the handle is not a live stream.
std::shared_ptr<Stream> stream_of(cudaStream_t s);
/// Queues an op on s (with the legacy stream's implicit waits) and wakes the waiters.
void enqueue(const std::shared_ptr<Stream>& s, Op op);

enum class Progress { done, blocked };
/// Runs the ops of s until it has completed `target` of them (or everything that can run).
Progress advance(Stream& s, std::uint64_t target);
/// Counts a completion (a hang is a wait during which nothing completes).
void note_progress();
/// Runs every stream of a device to its end.
Progress advance_device(int device);

/// Waits (running device work) until attempt() says done; a wait that makes no progress for
/// SEQPAR_EMU_HANG_S seconds is reported as a hang and aborts. `what` names the waiting call.
void wait_for(Lock& lock, const std::function<Progress()>& attempt, const std::string& what);

/// A device-synchronising call (cudaFree, cudaFreeHost, cudaDeviceSynchronize): fails when an
/// NCCL operation is queued on the device and not complete (NCCL's documentation: such a call
/// waits for the NCCL kernels, which wait for peers that may be waiting in turn).
cudaError_t check_nccl_quiet(int device, const std::string& call);
/// Whether an unfinished NCCL operation is queued on a device (nccl.cpp).
std::string pending_nccl_on(int device);

/// Runs a queued kernel (kernels.cpp); returns cudaSuccess or the error it made sticky.
cudaError_t run_kernel(const LaunchConfig& config, KernelBody& body, int device);

}  // namespace seqpar::emu

// Faults on the emulated device. Host code that touches device memory (a device address: that
// range is never mapped) and a kernel thread that reads or writes outside its allocations (the
// guard pages of the emulation's view) stop the program with a message that names the
// address's allocation and, inside a kernel, the kernel, block and thread. Other faults go to
// the handler that was there before.
#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "machine.hpp"

namespace seqpar::emu {

std::string running_kernel_thread();       // kernels.cpp
bool in_fiber_stack_guard(const void* a);  // kernels.cpp

namespace {

struct sigaction previous_segv, previous_bus;

void write_err(const std::string& s) {
  const char* p = s.data();
  std::size_t left = s.size();
  while (left > 0) {
    const ssize_t w = ::write(2, p, left);
    if (w <= 0) return;
    p += w;
    left -= static_cast<std::size_t>(w);
  }
}

void on_fault(int sig, siginfo_t* info, void* context) {
  const void* addr = info->si_addr;
  const std::string kernel = running_kernel_thread();
  std::string what;
  if (!kernel.empty() && in_fiber_stack_guard(addr)) {
    what = "a kernel thread overflowed its stack (" + kernel + ")";
  } else if (!kernel.empty() && from_emu(addr)) {
    what = "a kernel thread (" + kernel + ") touched " + describe_address(from_emu(addr)) +
           ", outside its allocation";
  } else if (!kernel.empty() && is_device_address(addr)) {
    what = "a kernel thread (" + kernel + ") touched the untranslated device address " +
           describe_address(addr) + " (a device pointer read from memory, not an argument)";
  } else if (is_device_address(addr)) {
    what = "host code touched device memory at " + describe_address(addr) +
           ": device pointers may be used only by kernels, copies and libraries";
  } else {
    // Not the emulation's: the handler that was there before.
    const struct sigaction& prev = sig == SIGSEGV ? previous_segv : previous_bus;
    if (prev.sa_flags & SA_SIGINFO && prev.sa_sigaction) {
      prev.sa_sigaction(sig, info, context);
      return;
    }
    if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN && prev.sa_handler) {
      prev.sa_handler(sig);
      return;
    }
    signal(sig, SIG_DFL);
    return;  // the access faults again, by default
  }
  write_err("seqpar emulated CUDA: " + what + "\n");
  void* frames[32];
  const int n = backtrace(frames, 32);
  write_err("the host thread's stack:\n");
  backtrace_symbols_fd(frames, n, 2);
  std::abort();
}

}  // namespace

void install_fault_handler() {
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &previous_segv);
  sigaction(SIGBUS, &sa, &previous_bus);
}

}  // namespace seqpar::emu

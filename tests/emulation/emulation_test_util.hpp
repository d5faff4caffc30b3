#pragma once
// Helpers of the emulation's own tests: device arrays over the runtime API, and a device whose
// sticky error a test reads and then clears (the emulation's cudaDeviceReset drops the failed
// work and keeps memory), so that one program checks many failures.
#include <cuda_runtime.h>
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <functional>
#include <string>
#include <vector>

namespace emu_test {

/// How a child process that ran a function ended: the signal that stopped it (0: it exited, with
/// `status`) and what it wrote to stderr.
struct Death {
  int signal = 0;
  int status = 0;
  std::string output;
};

/// Runs f in a child process (a fault stops the whole program: the emulation's message is what
/// a test reads).
inline Death run_to_death(const std::function<void()>& f) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    f();
    _exit(0);
  }
  close(fds[1]);
  Death d;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;)
    d.output.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) d.signal = WTERMSIG(status);
  if (WIFEXITED(status)) d.status = WEXITSTATUS(status);
  return d;
}

/// The current device, reset when the test ends (its sticky error and queued work dropped).
class EmulatedDevice {
 public:
  explicit EmulatedDevice(int device = 0) {
    REQUIRE(cudaSetDevice(device) == cudaSuccess);
    (void)cudaDeviceReset();
  }
  ~EmulatedDevice() { (void)cudaDeviceReset(); }
  EmulatedDevice(const EmulatedDevice&) = delete;
  EmulatedDevice& operator=(const EmulatedDevice&) = delete;

  /// What a device synchronisation reports ("" when it succeeds): the error's name and the
  /// emulation's message.
  static std::string sync_error() {
    const cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess) return "";
    return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
  }
};

/// n elements of device memory (fresh: NaN bytes), or a copy of `host`.
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t n) : n_(n) {
    REQUIRE(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)) == cudaSuccess);
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { upload(host); }
  ~DeviceArray() { (void)cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* data() const { return p_; }
  std::size_t size() const { return n_; }
  void upload(const std::vector<T>& host) {
    REQUIRE(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    REQUIRE(cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return host;
  }

 private:
  T* p_ = nullptr;
  std::size_t n_;
};

}  // namespace emu_test

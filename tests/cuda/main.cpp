// The doctest main of the CUDA test programs, compiled once for all of them. Without
// a usable CUDA device it says why and exits with 77, which CTest counts as skipped, unless a
// GPU is expected here: SEQPAR_REQUIRE_GPU=1, or, when that is unset, a machine with the
// NVIDIA driver (/proc/driver/nvidia/version). There a broken setup (no device found, an
// insufficient driver, any error of the runtime) fails the program (exit 1) instead of
// passing for a machine without a GPU. Queries (--list-test-cases, --help, ...) need no
// device.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

namespace {
bool query_only(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a.starts_with("--dt-")) a.remove_prefix(5);
    while (a.starts_with("-")) a.remove_prefix(1);
    if (a.starts_with("list") || a == "lt" || a == "ltc" || a == "lts" || a == "lr" || a == "h" ||
        a == "help" || a == "?" || a == "v" || a == "version" || a.starts_with("count") || a == "c")
      return true;
  }
  return false;
}

// Whether this machine should have a usable GPU.
bool gpu_expected() {
  if (const char* v = std::getenv("SEQPAR_REQUIRE_GPU"); v && *v) return std::string_view(v) != "0";
  std::error_code ignored;
  return std::filesystem::exists("/proc/driver/nvidia/version", ignored);
}

// The program's name (test_cuda, test_nccl, ...), for its messages.
std::string program_name(const char* argv0) {
  return argv0 && *argv0 ? std::filesystem::path(argv0).filename().string() : "test_cuda";
}
}  // namespace

int main(int argc, char** argv) {
  if (query_only(argc, argv)) return doctest::Context(argc, argv).run();
  const std::string program = program_name(argc > 0 ? argv[0] : nullptr);
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    const char* why = e != cudaSuccess ? cudaGetErrorString(e) : "none found";
    if (gpu_expected()) {
      std::fprintf(stderr,
                   "%s: no usable CUDA device (%s: %s) where one is expected "
                   "(SEQPAR_REQUIRE_GPU=1, or the NVIDIA driver is installed): failed\n",
                   program.c_str(), e != cudaSuccess ? cudaGetErrorName(e) : "0 devices", why);
      return 1;
    }
    std::printf("%s: no CUDA device (%s): skipped\n", program.c_str(), why);
    return 77;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
    int runtime = 0, driver = 0;
    (void)cudaRuntimeGetVersion(&runtime);
    (void)cudaDriverGetVersion(&driver);
    std::printf("%s: %d device(s); device 0: %s, sm_%d%d, %.1f GiB; runtime %d, driver %d\n",
                program.c_str(), count, prop.name, prop.major, prop.minor,
                static_cast<double>(prop.totalGlobalMem) / (1u << 30), runtime, driver);
  }
  doctest::Context context(argc, argv);
  return context.run();
}

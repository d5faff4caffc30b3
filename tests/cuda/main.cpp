// The doctest main of test_cuda and test_nccl (SEQPAR_TEST_PROGRAM names the program):
// without a CUDA device it says so and exits with 77, which CTest counts as skipped.
// Queries (--list-test-cases, --help, ...) need no device.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <string_view>

#ifndef SEQPAR_TEST_PROGRAM
#define SEQPAR_TEST_PROGRAM "test_cuda"
#endif

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
}  // namespace

int main(int argc, char** argv) {
  if (query_only(argc, argv)) return doctest::Context(argc, argv).run();
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    std::printf(SEQPAR_TEST_PROGRAM ": no CUDA device (%s): skipped\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    return 77;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
    int runtime = 0, driver = 0;
    (void)cudaRuntimeGetVersion(&runtime);
    (void)cudaDriverGetVersion(&driver);
    std::printf(SEQPAR_TEST_PROGRAM
                ": %d device(s); device 0: %s, sm_%d%d, %.1f GiB; runtime %d, driver %d\n",
                count, prop.name, prop.major, prop.minor,
                static_cast<double>(prop.totalGlobalMem) / (1u << 30), runtime, driver);
  }
  doctest::Context context(argc, argv);
  return context.run();
}

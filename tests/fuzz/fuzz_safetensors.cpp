// libFuzzer target: a safetensors image parsed in memory (header JSON, dtypes, shapes,
// offsets, metadata), then every tensor it accepts read element by element, so that an
// accepted span past the end of the image shows under AddressSanitizer.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_util.hpp"
#include "seqpar/io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  seqpar::fuzz::expect_clean([&] {
    const auto bytes = std::as_bytes(std::span(data, size));
    const auto index = seqpar::detail::safetensors::parse(bytes, "fuzz.safetensors");
    unsigned sum = 0;
    for (const auto& e : index.entries)
      for (const std::byte b : e.bytes) sum += std::to_integer<unsigned>(b);
    for (const auto& [k, v] : index.metadata) sum += static_cast<unsigned>(k.size() + v.size());
    volatile unsigned sink = sum;
    (void)sink;
  });
  return 0;
}

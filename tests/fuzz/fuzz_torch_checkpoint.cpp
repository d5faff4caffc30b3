// libFuzzer target: a PyTorch checkpoint (torch.save zip archive with its pickle, or the
// legacy format's refusal) indexed in memory, then every tensor it accepts read byte by
// byte, so that an accepted storage span past the end of the archive shows under ASan.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_util.hpp"
#include "seqpar/io/torch_checkpoint.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  seqpar::fuzz::expect_clean([&] {
    const auto bytes = std::as_bytes(std::span(data, size));
    const auto index = seqpar::detail::index_torch_checkpoint(bytes, "fuzz.bin");
    unsigned sum = 0;
    for (const auto& e : index.entries)
      for (const std::byte b : e.bytes) sum += std::to_integer<unsigned>(b);
    volatile unsigned sink = sum;
    (void)sink;
  });
  return 0;
}

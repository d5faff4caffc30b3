// What the CRC-32C checksums cost on a SeqGPT-560M-sized file: write_safetensors and
// SafetensorsFile with and without them, side by side in one run, for the weights (F32,
// 2.2 GB) and for a training checkpoint (weights and both AdamW moments, 6.7 GB; the three
// kinds share one buffer here, the bytes written are the same). The file goes to --dir
// (default: the system temp folder) and is removed after each measurement. Also the CRC
// pass alone, by the SSE4.2 path and the table path.
//
//   bench_checksums [--dir DIR] [--repeat N] [--weights-only]
//
// A write includes the fsync and the rename (write_safetensors is atomic). A load opens the
// file and reads every tensor as float, as a load of weights does; with checksums the open
// has read every byte once before (from the page cache here: the file was just written).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "seqpar/config/bloom.hpp"
#include "seqpar/config/units.hpp"
#include "seqpar/core/crc32c.hpp"
#include "seqpar/io/safetensors.hpp"
#include "seqpar/io/tensor_source.hpp"

namespace {
using namespace seqpar;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct State {
  std::vector<std::vector<float>> values;  // one per parameter
  std::vector<TensorToWrite> weights, checkpoint;
  std::uint64_t weight_bytes = 0;
};

State make_state() {
  State s;
  for (const auto& u : bloom_units<SeqGPT560M>(1, 0))
    for (const auto& p : u.params) {
      auto& v = s.values.emplace_back(static_cast<std::size_t>(p.real_rows * p.cols));
      std::uint32_t x = static_cast<std::uint32_t>(s.values.size()) * 2654435761u;
      for (auto& f : v) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        f = static_cast<float>(static_cast<std::int32_t>(x)) * 0x1p-40f;
      }
      const std::vector<std::int64_t> shape = p.vector
                                                  ? std::vector<std::int64_t>{p.real_rows}
                                                  : std::vector<std::int64_t>{p.real_rows, p.cols};
      const auto bytes = std::as_bytes(std::span<const float>(v));
      s.weight_bytes += bytes.size();
      s.weights.push_back({"transformer." + p.name, DType::f32, shape, bytes});
      for (const char* kind :
           {"transformer.", "optimizer.m.transformer.", "optimizer.v.transformer."})
        s.checkpoint.push_back({kind + p.name, DType::f32, shape, bytes});
    }
  return s;
}

struct Row {
  double write_s = 0, load_s = 0;
};

Row measure(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
            Checksums sums) {
  Row r;
  auto t0 = Clock::now();
  write_safetensors(path, tensors, {{"format", "pt"}}, sums);
  r.write_s = since(t0);
  t0 = Clock::now();
  {
    // what a load does in any case: every tensor read into memory as float, once
    const SafetensorsFile f(path, sums);
    std::vector<float> into;
    for (const auto& e : f.entries()) {
      into.resize(static_cast<std::size_t>(e.numel()));
      read_tensor<float>(e, std::span<float>(into));
    }
  }
  r.load_s = since(t0);
  std::filesystem::remove(path);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::filesystem::path dir = std::filesystem::temp_directory_path();
  int repeat = 3;
  bool weights_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc) dir = argv[++i];
    if (a == "--repeat" && i + 1 < argc) repeat = std::stoi(argv[++i]);
    if (a == "--weights-only") weights_only = true;
  }
  const State s = make_state();
  std::printf("SeqGPT-560M: %zu tensors, %.2f GB of F32 weights; CRC-32C path: %s\n",
              s.weights.size(), static_cast<double>(s.weight_bytes) / 1e9,
              detail::castagnoli::hardware_available() ? "SSE4.2" : "table");

  // The CRC pass alone over the weights, by each path.
  for (const bool hw : {true, false}) {
    if (hw && !detail::castagnoli::hardware_available()) continue;
    const auto t0 = Clock::now();
    std::uint32_t x = 0;
    for (const auto& t : s.weights) {
      const auto* p = reinterpret_cast<const unsigned char*>(t.bytes.data());
      x ^= hw ? detail::castagnoli::hardware(~0u, p, t.bytes.size())
              : detail::castagnoli::portable(~0u, p, t.bytes.size());
    }
    const double secs = since(t0);
    std::printf("crc32c %-6s %.3f s  %.2f GB/s  (%08x)\n", hw ? "SSE4.2" : "table", secs,
                static_cast<double>(s.weight_bytes) / secs / 1e9, static_cast<unsigned>(x));
  }

  std::printf("%-10s %-9s %10s %10s %10s %10s\n", "file", "checksums", "write s", "load s",
              "write GB/s", "load GB/s");
  for (const bool ckpt : {false, true}) {
    if (ckpt && weights_only) break;
    const auto& tensors = ckpt ? s.checkpoint : s.weights;
    const double gb = static_cast<double>(s.weight_bytes) * (ckpt ? 3 : 1) / 1e9;
    for (int k = 0; k < repeat; ++k)
      for (const Checksums c : {Checksums::none, Checksums::crc32c}) {
        const Row r = measure(dir / "bench_checksums.safetensors", tensors, c);
        std::printf("%-10s %-9s %10.2f %10.2f %10.2f %10.2f\n", ckpt ? "checkpoint" : "weights",
                    c == Checksums::crc32c ? "crc32c" : "none", r.write_s, r.load_s, gb / r.write_s,
                    gb / r.load_s);
        std::fflush(stdout);
      }
  }
}

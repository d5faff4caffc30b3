// How fast does seqpar's Tokenizer load tokenizer.json, encode and decode?
//
// BM_TokenizerEncode encodes a fixed mixed corpus (Chinese, English, mixed,
// emoji, numbers, code; tests/fixtures/tokenizer/bench_corpus.json) text by
// text with the 3000-token BLOOM-layout fixture tokenizer, and reports bytes/s
// and tokens/s. tools/bench_tokenizer.py runs the same corpus through Hugging
// Face tokenizers and prints both side by side.
//
// Flags (before the Google Benchmark ones):
//   --tokenizer=PATH  tokenizer.json to encode with (default: the bpe3000 fixture)
//   --corpus=PATH     JSON array of texts (default: the bench_corpus fixture)
//   --load=PATH       tokenizer.json that BM_TokenizerLoad loads (default: --tokenizer),
//                     e.g. one of BLOOM's size made by tools/make_tokenizer_fixtures.py --large

#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/io/tokenizer.hpp"

namespace {

namespace fs = std::filesystem;

fs::path fixture_dir() {
#ifdef SEQPAR_TEST_DIR
  return fs::path(SEQPAR_TEST_DIR) / "fixtures" / "tokenizer";
#else
  return fs::path(__FILE__).parent_path().parent_path() / "tests" / "fixtures" / "tokenizer";
#endif
}

struct Options {
  fs::path tokenizer = fixture_dir() / "bpe3000.json";
  fs::path corpus = fixture_dir() / "bench_corpus.json";
  fs::path load;
};

Options& options() {
  static Options o;
  return o;
}

std::vector<std::string> read_corpus(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open the corpus " + p.string());
  return nlohmann::json::parse(in).get<std::vector<std::string>>();
}

void BM_TokenizerEncode(benchmark::State& state) {
  const auto tok = seqpar::Tokenizer::from_file(options().tokenizer);
  const auto corpus = read_corpus(options().corpus);
  std::size_t bytes = 0;
  for (const auto& t : corpus) bytes += t.size();
  std::size_t tokens = 0;
  double id_sum = 0;
  for (const auto& t : corpus)
    for (const std::int32_t id : tok.encode(t)) {
      ++tokens;
      id_sum += id;
    }
  for (auto _ : state) {
    for (const auto& t : corpus) {
      auto ids = tok.encode(t);
      benchmark::DoNotOptimize(ids.data());
    }
  }
  const auto iters = static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(tokens) * iters, benchmark::Counter::kIsRate);
  // Per pass over the corpus; tools/bench_tokenizer.py checks them against tokenizers.
  state.counters["texts"] = static_cast<double>(corpus.size());
  state.counters["tokens"] = static_cast<double>(tokens);
  state.counters["id_sum"] = id_sum;
}
BENCHMARK(BM_TokenizerEncode)->Unit(benchmark::kMillisecond);

void BM_TokenizerDecode(benchmark::State& state) {
  const auto tok = seqpar::Tokenizer::from_file(options().tokenizer);
  const auto corpus = read_corpus(options().corpus);
  std::vector<std::vector<std::int32_t>> ids;
  std::size_t bytes = 0, tokens = 0;
  for (const auto& t : corpus) {
    ids.push_back(tok.encode(t));
    bytes += t.size();
    tokens += ids.back().size();
  }
  for (auto _ : state) {
    for (const auto& v : ids) {
      auto text = tok.decode(v);
      benchmark::DoNotOptimize(text.data());
    }
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(tokens) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}
BENCHMARK(BM_TokenizerDecode)->Unit(benchmark::kMillisecond);

void BM_TokenizerLoad(benchmark::State& state) {
  const fs::path path = options().load.empty() ? options().tokenizer : options().load;
  std::size_t vocab = 0;
  for (auto _ : state) {
    auto tok = seqpar::Tokenizer::from_file(path);
    vocab = tok.vocab_size();
    benchmark::DoNotOptimize(vocab);
  }
  state.counters["vocab"] = static_cast<double>(vocab);
  state.counters["file_MB"] = static_cast<double>(fs::file_size(path)) / 1e6;
}
BENCHMARK(BM_TokenizerLoad)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  // Take this benchmark's own flags out before Google Benchmark sees argv.
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const auto value = [&](std::string_view flag) { return std::string(a.substr(flag.size())); };
    if (a.starts_with("--tokenizer=")) {
      options().tokenizer = value("--tokenizer=");
    } else if (a.starts_with("--corpus=")) {
      options().corpus = value("--corpus=");
    } else if (a.starts_with("--load=")) {
      options().load = value("--load=");
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

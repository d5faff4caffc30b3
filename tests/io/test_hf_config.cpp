// read_bloom_config on config.json files as the published BLOOM models spell them, each
// found among seqpar's published shapes (their model cards' parameter counts), and a shape
// no published BLOOM has found among none.
#include <doctest/doctest.h>

#include <string>

#include "../support/files.hpp"
#include "seqpar/config/bloom.hpp"
#include "seqpar/io/hf_config.hpp"

using namespace seqpar;

TEST_CASE("published BLOOM config.json files are the published shapes") {
  const test::TempDir dir;
  struct Published {
    const char* name;
    const char* fields;  // as the hub's config.json spells them
    std::int64_t parameters;
  };
  const Published published[] = {
      {"bloom-560m", R"("n_embed": 1024, "n_layer": 24, "num_attention_heads": 16)", 559214592},
      {"bloom-1b1", R"("n_embed": 1536, "n_layer": 24, "num_attention_heads": 16)", 1065314304},
      {"bloom-1b7", R"("hidden_size": 2048, "n_layer": 24, "n_head": 16)", 1722408960},
      {"bloom-3b", R"("n_embed": 2560, "n_layer": 30, "num_attention_heads": 32)", 3002557440},
      {"bloom-7b1", R"("hidden_size": 4096, "n_layer": 30, "n_head": 32)", 7069016064}};
  for (const Published& p : published) {
    CAPTURE(p.name);
    const auto path = dir.write(
        std::string(p.name) + ".json",
        std::string(R"({"architectures": ["BloomForCausalLM"], "model_type": "bloom", )") +
            p.fields + R"(, "vocab_size": 250880, "layer_norm_epsilon": 1e-05})");
    const BloomConfig c = read_bloom_config(path);
    const PublishedBloom* b = find_published_bloom(c);
    REQUIRE(b != nullptr);
    CHECK(b->name == p.name);
    CHECK(b->parameter_count == p.parameters);
  }
  CHECK(find_published_bloom(BloomConfig{.hidden = 2048, .layers = 24, .heads = 32}) == nullptr);
  CHECK(find_published_bloom(BloomConfig{.vocab_size = 250680, .hidden = 2048}) == nullptr);
  CHECK(shape_words(Bloom1B7::config) == "hidden 2048, 24 layers, 16 heads");
}

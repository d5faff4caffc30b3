// TorchCheckpoint on the committed fixtures of tools/make_torch_fixtures.py: values are
// recomputed here from the fixture formula and cross-checked with safetensors copies.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "seqpar/io/torch_checkpoint.hpp"
#include "test_torch_checkpoint_util.hpp"

using namespace seqpar;
using namespace seqpar::test_torch;

namespace {

using Shape = std::vector<std::int64_t>;

std::vector<std::pair<std::string, Shape>> bloom_tiny_names() {
  std::vector<std::pair<std::string, Shape>> out = {
      {"transformer.word_embeddings.weight", {40, 8}},
      {"transformer.word_embeddings_layernorm.weight", {8}},
      {"transformer.word_embeddings_layernorm.bias", {8}},
  };
  for (int l = 0; l < 2; ++l) {
    const std::string h = "transformer.h." + std::to_string(l) + ".";
    out.push_back({h + "input_layernorm.weight", {8}});
    out.push_back({h + "input_layernorm.bias", {8}});
    out.push_back({h + "self_attention.query_key_value.weight", {24, 8}});
    out.push_back({h + "self_attention.query_key_value.bias", {24}});
    out.push_back({h + "self_attention.dense.weight", {8, 8}});
    out.push_back({h + "self_attention.dense.bias", {8}});
    out.push_back({h + "post_attention_layernorm.weight", {8}});
    out.push_back({h + "post_attention_layernorm.bias", {8}});
    out.push_back({h + "mlp.dense_h_to_4h.weight", {32, 8}});
    out.push_back({h + "mlp.dense_h_to_4h.bias", {32}});
    out.push_back({h + "mlp.dense_4h_to_h.weight", {8, 32}});
    out.push_back({h + "mlp.dense_4h_to_h.bias", {8}});
  }
  out.push_back({"transformer.ln_f.weight", {8}});
  out.push_back({"transformer.ln_f.bias", {8}});
  out.push_back({"lm_head.weight", {40, 8}});
  return out;
}

// Every element equals the fixture formula of `formula_name` (row-major index).
void check_float_formula(const TensorEntry& e, const std::string& formula_name) {
  std::vector<double> v(static_cast<std::size_t>(e.numel()));
  read_tensor<double>(e, v);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i] != formula_float(formula_name, static_cast<std::int64_t>(i))) ++bad;
  CHECK_MESSAGE(bad == 0, e.name, ": ", bad, " of ", v.size(), " elements differ");
}

std::string error_of(const std::filesystem::path& path) {
  try {
    TorchCheckpoint ck(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("torch fixture bloom_tiny_f16.bin: published BLOOM names, shapes and fp16 values") {
  const TorchCheckpoint ck(fixture("bloom_tiny_f16.bin"));
  const auto expected = bloom_tiny_names();
  const auto names = ck.names();
  REQUIRE(names.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(expected[i].first);
    CHECK(names[i] == expected[i].first);  // the pickle's order
    const TensorEntry& e = ck.at(expected[i].first);
    CHECK(e.dtype == DType::f16);
    CHECK(e.shape == expected[i].second);
    CHECK(e.strides == contiguous_strides(expected[i].second));
    CHECK(e.file == fixture("bloom_tiny_f16.bin").string());
    const std::string source =
        e.name == "lm_head.weight" ? "transformer.word_embeddings.weight" : e.name;
    check_float_formula(e, source);
  }
  CHECK(ck.path() == fixture("bloom_tiny_f16.bin"));
}

TEST_CASE("torch fixture bloom_tiny_f16.bin: lm_head.weight shares the embedding's storage") {
  const TorchCheckpoint ck(fixture("bloom_tiny_f16.bin"));
  const TensorEntry& emb = ck.at("transformer.word_embeddings.weight");
  const TensorEntry& head = ck.at("lm_head.weight");
  CHECK(head.bytes.data() == emb.bytes.data());
  CHECK(head.bytes.size() == emb.bytes.size());
  CHECK(emb.bytes.size() == 40 * 8 * 2);
  // Untied tensors each have their own storage.
  const TensorEntry& norm = ck.at("transformer.ln_f.weight");
  CHECK(norm.bytes.data() != emb.bytes.data());
  CHECK(norm.bytes.size() == 8 * 2);
}

TEST_CASE("torch fixture bloom_tiny_f16.bin matches its safetensors copy byte for byte") {
  const TorchCheckpoint ck(fixture("bloom_tiny_f16.bin"));
  const auto st = read_safetensors(fixture("bloom_tiny_f16.safetensors"));
  CHECK(st.size() == ck.names().size());
  for (const auto& [name, t] : st) {
    CAPTURE(name);
    const TensorEntry* e = ck.find(name);
    REQUIRE(e != nullptr);
    CHECK(t.dtype == "F16");
    CHECK(t.shape == e->shape);
    CHECK(gather_bytes(*e) == t.bytes);
  }
}

TEST_CASE("torch fixture dtypes.bin: every dtype read exactly") {
  const TorchCheckpoint ck(fixture("dtypes.bin"));
  const std::vector<std::pair<std::string, DType>> floats = {
      {"f16", DType::f16},    {"bf16", DType::bf16}, {"f32", DType::f32},  {"f64", DType::f64},
      {"scalar", DType::f32}, {"empty", DType::f32}, {"param", DType::f32}};
  for (const auto& [name, dtype] : floats) {
    CAPTURE(name);
    const TensorEntry& e = ck.at(name);
    CHECK(e.dtype == dtype);
    check_float_formula(e, name);
  }
  CHECK(ck.at("f16").shape == Shape{3, 5});
  CHECK(ck.at("bf16").shape == Shape{4, 3});
  CHECK(ck.at("f32").shape == Shape{2, 3, 4});
  CHECK(ck.at("f32").strides == Shape{12, 4, 1});
  CHECK(ck.at("scalar").shape.empty());
  CHECK(ck.at("scalar").numel() == 1);
  CHECK(ck.at("empty").shape == Shape{0, 3});
  CHECK(ck.at("empty").numel() == 0);

  const std::vector<std::pair<std::string, DType>> ints = {
      {"i64", DType::i64}, {"i32", DType::i32}, {"i16", DType::i16},
      {"i8", DType::i8},   {"u8", DType::u8},   {"bool", DType::boolean}};
  for (const auto& [name, dtype] : ints) {
    CAPTURE(name);
    const TensorEntry& e = ck.at(name);
    REQUIRE(e.dtype == dtype);
    const auto offs = element_offsets(e);
    for (std::size_t i = 0; i < offs.size(); ++i)
      CHECK(load_int(e, offs[i]) == formula_int(dtype, name, static_cast<std::int64_t>(i)));
  }
  // The int64 values need more than 32 bits.
  CHECK(load_int(ck.at("i64"), 1) == formula_k("i64", 1) - 30 + (std::int64_t{1} << 40));
  // Integer tensors are not converted to floats.
  std::vector<double> sink(6);
  CHECK_THROWS_AS(read_tensor<double>(ck.at("i64"), sink), Error);
}

TEST_CASE("torch fixture dtypes.bin: f16 and bf16 edge values keep their exact bits") {
  const TorchCheckpoint ck(fixture("dtypes.bin"));
  auto bits = [](const TensorEntry& e) {
    std::vector<std::uint16_t> out(static_cast<std::size_t>(e.numel()));
    std::memcpy(out.data(), e.bytes.data(), out.size() * 2);
    return out;
  };
  const TensorEntry& h = ck.at("f16_special");
  const auto hb = bits(h);
  REQUIRE(hb.size() == 7);
  CHECK(hb[0] == 0x7bff);  // 65504
  CHECK(hb[1] == 0x0400);  // 2^-14
  CHECK(hb[2] == 0x0001);  // 2^-24
  CHECK(hb[3] == 0x8000);  // -0
  CHECK(hb[4] == 0x7c00);  // inf
  CHECK(hb[5] == 0xc100);  // -2.5
  std::vector<double> hv(7);
  read_tensor<double>(h, hv);
  CHECK(hv[0] == 65504.0);
  CHECK(hv[1] == std::ldexp(1.0, -14));
  CHECK(hv[2] == std::ldexp(1.0, -24));
  CHECK((hv[3] == 0.0 && std::signbit(hv[3])));
  CHECK(hv[4] == INFINITY);
  CHECK(hv[5] == -2.5);
  CHECK(std::isnan(hv[6]));

  const TensorEntry& b = ck.at("bf16_special");
  const auto bb = bits(b);
  REQUIRE(bb.size() == 6);
  CHECK(bb[0] == 0x7f7f);
  CHECK(bb[1] == 0x0080);
  CHECK(bb[2] == 0x0001);
  CHECK(bb[3] == 0xbfc0);
  CHECK(bb[4] == 0xff80);
  CHECK(bb[5] == 0x3f81);
  std::vector<double> bv(6);
  read_tensor<double>(b, bv);
  CHECK(bv[0] == 3.3895313892515355e38);
  CHECK(bv[1] == std::ldexp(1.0, -126));
  CHECK(bv[2] == std::ldexp(1.0, -133));
  CHECK(bv[3] == -1.5);
  CHECK(bv[4] == -INFINITY);
  CHECK(bv[5] == 1.0 + std::ldexp(1.0, -7));
}

TEST_CASE("torch fixture views.bin: storage offsets and strides of views read right") {
  const TorchCheckpoint ck(fixture("views.bin"));
  CHECK(ck.names() == std::vector<std::string>{"slice", "transposed", "strided", "expanded", "last",
                                               "base", "b_rows", "b_cols"});
  struct View {
    const char* name;
    const char* storage;
    std::int64_t offset;
    Shape shape, strides;
  };
  // As torch defines them for the slices in tools/make_torch_fixtures.py.
  const View views[] = {
      {"slice", "base", 7, {12}, {1}},
      {"transposed", "base", 0, {6, 5}, {1, 6}},
      {"strided", "base", 5, {3, 3}, {10, 2}},
      {"expanded", "base", 3, {4, 3}, {0, 1}},
      {"last", "base", 39, {}, {}},
      {"base", "base", 0, {40}, {1}},
      {"b_rows", "b_rows", 12, {2, 6}, {6, 1}},
      {"b_cols", "b_rows", 1, {4, 2}, {6, 3}},
  };
  const TensorEntry& base = ck.at("base");
  const TensorEntry& b_rows = ck.at("b_rows");
  const std::byte* base_start = base.bytes.data();
  const std::byte* base_end = base.bytes.data() + base.bytes.size();
  const std::byte* b_start = b_rows.bytes.data() - 12 * 2;
  const std::byte* b_end = b_rows.bytes.data() + b_rows.bytes.size();
  CHECK(base.bytes.size() == 40 * 4);
  CHECK(b_end - b_start == 24 * 2);
  for (const View& v : views) {
    CAPTURE(v.name);
    const TensorEntry& e = ck.at(v.name);
    const bool in_base = std::string(v.storage) == "base";
    CHECK(e.dtype == (in_base ? DType::f32 : DType::bf16));
    CHECK(e.shape == v.shape);
    CHECK(e.strides == v.strides);
    // The bytes start at the first element and run to the end of the shared storage.
    const std::byte* start = in_base ? base_start : b_start;
    const std::byte* end = in_base ? base_end : b_end;
    const auto esize = static_cast<std::int64_t>(dtype_size(e.dtype));
    CHECK(e.bytes.data() == start + v.offset * esize);
    CHECK(e.bytes.data() + e.bytes.size() == end);
    // Element (i, j) is storage element offset + i * stride0 + j * stride1, by the formula.
    std::vector<double> got(static_cast<std::size_t>(e.numel()));
    read_tensor<double>(e, got);
    std::size_t k = 0;
    const std::int64_t rows = v.shape.empty() ? 1 : v.shape[0];
    const std::int64_t cols = v.shape.size() < 2 ? 1 : v.shape[1];
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j) {
        std::int64_t s = v.offset;
        if (!v.shape.empty()) s += i * v.strides[0];
        if (v.shape.size() > 1) s += j * v.strides[1];
        CHECK(got[k++] == formula_float(in_base ? "base" : "bbase", s));
      }
  }
}

TEST_CASE("torch fixture views.bin matches its contiguous safetensors copy") {
  const TorchCheckpoint ck(fixture("views.bin"));
  const auto st = read_safetensors(fixture("views.safetensors"));
  CHECK(st.size() == 8);
  for (const auto& [name, t] : st) {
    CAPTURE(name);
    const TensorEntry& e = ck.at(name);
    CHECK(t.shape == e.shape);
    CHECK(gather_bytes(e) == t.bytes);
  }
}

TEST_CASE("torch fixture zip64.bin (zip64 sizes, offsets and end record) reads as dtypes.bin") {
  const TorchCheckpoint plain(fixture("dtypes.bin"));
  const TorchCheckpoint z64(fixture("zip64.bin"));
  REQUIRE(z64.names() == plain.names());
  for (const auto& name : plain.names()) {
    CAPTURE(name);
    const TensorEntry& a = plain.at(name);
    const TensorEntry& b = z64.at(name);
    CHECK(a.dtype == b.dtype);
    CHECK(a.shape == b.shape);
    CHECK(a.strides == b.strides);
    CHECK(a.bytes.size() == b.bytes.size());
    CHECK(std::memcmp(a.bytes.data(), b.bytes.data(), a.bytes.size()) == 0);
  }
}

TEST_CASE("torch fixture proto4.bin: pickle protocol 4 (FRAME, MEMOIZE, STACK_GLOBAL)") {
  const TorchCheckpoint ck(fixture("proto4.bin"));
  CHECK(ck.names() == std::vector<std::string>{"a", "b", "b_tail"});
  check_float_formula(ck.at("a"), "a");
  check_float_formula(ck.at("b"), "b");
  const TensorEntry& tail = ck.at("b_tail");
  CHECK(tail.bytes.data() == ck.at("b").bytes.data() + 2);
  std::vector<float> v(3);
  read_tensor<float>(tail, v);
  for (int i = 0; i < 3; ++i) CHECK(v[i] == static_cast<float>(formula_float("b", i + 1)));
}

TEST_CASE("torch fixture nested.bin: tensors one dict down are named 'outer.inner'") {
  const TorchCheckpoint ck(fixture("nested.bin"));
  // Numbers, strings, None, lists and dicts two levels down are skipped.
  CHECK(ck.names() == std::vector<std::string>{"model.embed.weight", "model.norm.bias",
                                               "model.head.weight", "optimizer.scale", "top"});
  check_float_formula(ck.at("model.embed.weight"), "model.embed.weight");
  check_float_formula(ck.at("model.norm.bias"), "model.norm.bias");
  check_float_formula(ck.at("optimizer.scale"), "optimizer.scale");
  check_float_formula(ck.at("top"), "top");
  CHECK(ck.at("model.head.weight").bytes.data() == ck.at("model.embed.weight").bytes.data());
  CHECK(ck.find("optimizer.state.0.exp_avg") == nullptr);
  CHECK(ck.find("embed.weight") == nullptr);
  // A name without its outer key is pointed to the nested one.
  const std::string msg = [&] {
    try {
      (void)ck.at("norm.bias");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  CHECK(msg.find(fixture("nested.bin").string()) != std::string::npos);
  CHECK(msg.find("'norm.bias'") != std::string::npos);
  CHECK(msg.find("did you mean 'model.norm.bias'") != std::string::npos);
}

TEST_CASE("torch checkpoint find, at and a moved-from checkpoint") {
  TorchCheckpoint ck(fixture("bloom_tiny_f16.bin"));
  CHECK(ck.find("transformer.h.2.input_layernorm.weight") == nullptr);
  CHECK(ck.find("") == nullptr);
  const std::string file = fixture("bloom_tiny_f16.bin").string();
  try {
    (void)ck.at("transformer.h.9.mlp.dense_h_to_4h.weight");
    FAIL("at() of an absent tensor did not throw");
  } catch (const Error& e) {
    const std::string msg = e.what();
    CHECK(msg.find(file) != std::string::npos);
    CHECK(msg.find("'transformer.h.9.mlp.dense_h_to_4h.weight'") != std::string::npos);
  }
  const TensorEntry* before = ck.find("lm_head.weight");
  const TorchCheckpoint moved(std::move(ck));
  CHECK(moved.find("lm_head.weight") == before);  // the mapping stays where it was
  check_float_formula(moved.at("lm_head.weight"), "transformer.word_embeddings.weight");
}

TEST_CASE("torch fixtures with disallowed globals are refused, naming the file and the global") {
  const std::pair<std::string, std::string> cases[] = {
      {"custom_object.bin", "'__main__.CustomObject'"},
      {"builtins_eval.bin", "eval'"},  // protocol 2 spells builtins as __builtin__
      {"os_system.bin", "'os.system'"},
  };
  for (const auto& [file, global] : cases) {
    CAPTURE(file);
    const std::string msg = error_of(fixture(file));
    CHECK(msg.find(fixture(file).string()) != std::string::npos);
    CHECK(msg.find(global) != std::string::npos);
    CHECK(msg.find("is not allowed") != std::string::npos);
  }
}

TEST_CASE("torch fixture legacy.bin is refused with a re-save message") {
  const std::string msg = error_of(fixture("legacy.bin"));
  CHECK(msg.find(fixture("legacy.bin").string()) != std::string::npos);
  CHECK(msg.find("legacy PyTorch format") != std::string::npos);
  CHECK(msg.find("save it again with a current torch") != std::string::npos);
}

TEST_CASE("torch fixture compressed.bin (records deflated by re-zipping) is refused") {
  const std::string msg = error_of(fixture("compressed.bin"));
  CHECK(msg.find(fixture("compressed.bin").string()) != std::string::npos);
  CHECK(msg.find("is compressed (method 8)") != std::string::npos);
}

TEST_CASE("torch fixture float8.bin: a dtype outside DType is refused by name") {
  const std::string msg = error_of(fixture("float8.bin"));
  CHECK(msg.find(fixture("float8.bin").string()) != std::string::npos);
  CHECK(msg.find("'torch._utils._rebuild_tensor_v3'") != std::string::npos);
  CHECK(msg.find("a dtype that is not supported") != std::string::npos);
}

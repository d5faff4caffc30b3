// The checkpoint reader on damaged and foreign files: Trainer::load_checkpoint and
// load_weights refuse every damage with a seqpar::Error naming the file (and the tensor or
// field), never a crash or a read out of bounds. A program of its own (test_checkpoint_reader)
// so that CI's ASan stage runs it without the rest of test_train.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "../support/files.hpp"
#include "../support/plans.hpp"
#include "../support/sweep.hpp"
#include "../support/weights.hpp"

using namespace seqpar;
using test::Small;
using Single = Trainer<Small, Replicated<1>>;

namespace {

// A checkpoint after two steps, once per process.
const std::vector<std::byte>& saved_checkpoint() {
  static const std::vector<std::byte> bytes = [] {
    const auto path = test::temp_path("reader_base.safetensors");
    Single t(test::plan_options());
    for (int s = 0; s < 2; ++s) t.step(test::plan_batch(s));
    t.save_checkpoint(path, {{"data.position", "2"}});
    auto b = test::read_bytes(path);
    std::filesystem::remove(path);
    return b;
  }();
  return bytes;
}

// Copies the checkpoint as F32 tensors, letting `edit` change tensors and metadata, and
// writes it to `to` (with fresh checksums unless `sums` is Checksums::none).
template <class Edit>
void rewrite(const std::filesystem::path& to, Edit edit, Checksums sums = Checksums::crc32c) {
  const test::TempDir dir;
  test::write_bytes(dir / "base.safetensors", saved_checkpoint());
  std::map<std::string, std::vector<float>> values;
  std::map<std::string, std::vector<std::int64_t>> shapes;
  std::map<std::string, std::string> meta;
  {
    const SafetensorsFile f(dir / "base.safetensors");
    for (const auto& e : f.entries()) {
      values[e.name].resize(static_cast<std::size_t>(e.numel()));
      read_tensor<float>(e, values[e.name]);
      shapes[e.name] = e.shape;
    }
    meta = f.metadata();
  }
  edit(values, meta);
  std::vector<TensorToWrite> tensors;
  for (const auto& [n, v] : values)
    tensors.push_back({n, DType::f32, shapes.at(n), std::as_bytes(std::span(v))});
  write_safetensors(to, tensors, meta, sums);
}

// What loading `path` into `t` throws ("<loaded>" when it loads).
std::string load_error(Single& t, const std::filesystem::path& path) {
  try {
    t.load_checkpoint(path);
    return "<loaded>";
  } catch (const Error& e) {
    return e.what();
  }
}

}  // namespace

TEST_CASE("a checkpoint loads whole, and as written by another writer (no checksums)") {
  const test::TempDir dir;
  test::write_bytes(dir / "ckpt.safetensors", saved_checkpoint());
  rewrite(
      dir / "plain.safetensors", [](auto&, auto&) {}, Checksums::none);
  Single ref(test::plan_options());
  for (int s = 0; s < 2; ++s) ref.step(test::plan_batch(s));
  const std::vector<float> weights = test::all_weights(ref);
  const double next_loss = ref.step(test::plan_batch(2)).loss;
  for (const char* name : {"ckpt.safetensors", "plain.safetensors"}) {
    CAPTURE(name);
    auto o = test::plan_options();
    o.seed = 99;  // the checkpoint, not the seed, decides the state
    Single t(o);
    const auto meta = t.load_checkpoint(dir / name);
    CHECK(meta.at("data.position") == "2");
    CHECK(t.steps_taken() == 2);
    CHECK(test::all_weights(t) == weights);
    CHECK(t.step(test::plan_batch(2)).loss == next_loss);
  }
}

TEST_CASE("damaged bytes and truncations anywhere are refused naming the file") {
  const test::TempDir dir;
  const auto& original = saved_checkpoint();
  const auto path = dir / "damaged.safetensors";
  const std::size_t n = original.size(), stride = test::sweep_stride();
  std::uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = header << 8 | std::to_integer<std::uint64_t>(original[i]);
  // every 16th header byte and 400 places in the data (a stride-th of them in CI's ASan stage)
  std::vector<std::size_t> places;
  for (std::size_t at = 0; at < 8 + header; at += 16 * stride) places.push_back(at);
  const std::size_t in_data = 400 / stride;
  for (std::size_t k = 0; k < in_data; ++k)
    places.push_back(8 + header + k * (n - 8 - header) / in_data);
  Single t(test::plan_options());
  int refused = 0;
  for (const std::size_t at : places) {
    auto bytes = original;
    bytes[at] ^= std::byte{0x10};
    test::write_bytes(path, bytes);
    const std::string m = load_error(t, path);
    CAPTURE(at);
    CAPTURE(m);
    CHECK(m.find(path.string()) != std::string::npos);
    refused += m != "<loaded>";
  }
  CHECK(refused == static_cast<int>(places.size()));
  for (std::size_t len = 0; len < n; len += n / 50 * stride) {
    test::write_bytes(path, std::span(original).first(len));
    CAPTURE(len);
    CHECK(load_error(t, path).find(path.string()) != std::string::npos);
  }
}

TEST_CASE("consistent files with wrong contents are refused naming the field or tensor") {
  const test::TempDir dir;
  const auto path = dir / "edited.safetensors";
  const std::string moment = "optimizer.m.transformer.h.1.mlp.dense_h_to_4h.weight";
  struct Case {
    std::string what;
    std::function<void(std::map<std::string, std::vector<float>>&,
                       std::map<std::string, std::string>&)>
        edit;
  };
  const std::vector<Case> cases = {
      {"metadata seqpar.step", [](auto&, auto& m) { m["seqpar.step"] = "2x"; }},
      {"hidden = 48; this trainer's model has 32",
       [](auto&, auto& m) { m["seqpar.hidden"] = "48"; }},
      {"metadata 'seqpar.layers' is missing", [](auto&, auto& m) { m.erase("seqpar.layers"); }},
      {"tensor '" + moment + "' is missing", [&](auto& v, auto&) { v.erase(moment); }},
      {"tensor '" + moment + "' holds nan",
       [&](auto& v, auto&) { v[moment][5] = std::numeric_limits<float>::quiet_NaN(); }},
      {"tensor 'transformer.ln_f.weight' holds inf",
       [](auto& v, auto&) { v["transformer.ln_f.weight"][0] = INFINITY; }},
  };
  Single t(test::plan_options());
  for (const auto& c : cases) {
    CAPTURE(c.what);
    rewrite(path, c.edit);
    const std::string m = load_error(t, path);
    CAPTURE(m);
    CHECK(m.find(path.string()) != std::string::npos);
    CHECK(m.find(c.what) != std::string::npos);
  }
}

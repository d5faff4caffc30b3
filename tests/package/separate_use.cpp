// The unit of test_package_separate that uses seqpar's input/output code. Built with
// SEQPAR_SEPARATE_COMPILATION, it sees declarations only: its object file holds no definition
// of that code (package.separate.declarations_only reads its symbols), and
// separate_compiled.cpp, the program's one other unit, holds them all.
#include <seqpar/data/char_tokenizer.hpp>
#include <seqpar/data/classification_task.hpp>
#include <seqpar/data/cluener.hpp>
#include <seqpar/data/conll.hpp>
#include <seqpar/data/json_records.hpp>
#include <seqpar/data/predictions.hpp>
#include <seqpar/seqpar.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "separate: %s\n", what.c_str());
    ++failures;
  }
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
  expect(fs::file_size(path) == text.size(), "wrote " + path.string());
}

std::vector<float> floats(const seqpar::TensorEntry& e) {
  std::vector<float> v(static_cast<std::size_t>(e.numel()));
  seqpar::read_tensor(e, std::span<float>(v));
  return v;
}

}  // namespace

int main() {
  char pattern[] = "/tmp/seqpar_separate_XXXXXX";
  const char* made = mkdtemp(pattern);
  if (made == nullptr) {
    std::fprintf(stderr, "separate: cannot make a scratch folder\n");
    return 1;
  }
  const fs::path dir = made;

  // safetensors: written here, read back by both readers.
  const std::vector<float> values = {1.5f, -2.0f, 0.25f, 8.0f, 0.0f, -0.5f};
  const seqpar::TensorToWrite t{
      "w", seqpar::DType::f32, {2, 3}, std::as_bytes(std::span<const float>(values))};
  seqpar::write_safetensors(dir / "w.safetensors", std::span(&t, 1), {{"step", "7"}});
  const seqpar::SafetensorsFile st(dir / "w.safetensors");
  expect(st.size() == 1 && floats(st.at("w")) == values, "safetensors round trip");
  expect(st.metadata().at("step") == "7", "safetensors metadata");
  const seqpar::TensorFile tf(dir / "w.safetensors");
  expect(tf.find("w") != nullptr && floats(*tf.find("w")) == values, "TensorFile (safetensors)");

  // pytorch_model.bin against the same tensors saved as safetensors.
  const fs::path fixtures = fs::path(SEQPAR_TEST_DIR) / "fixtures" / "torch";
  const seqpar::TensorFile bin(fixtures / "bloom_tiny_f16.bin");
  const seqpar::TensorFile ref(fixtures / "bloom_tiny_f16.safetensors");
  expect(!bin.names().empty(), "the torch checkpoint has tensors");
  for (const auto& name : ref.names()) {
    const seqpar::TensorEntry* e = bin.find(name);
    expect(e != nullptr && floats(*e) == floats(*ref.find(name)), "torch tensor " + name);
  }

  // config.json
  write_text(dir / "config.json",
             R"({"vocab_size": 512, "hidden_size": 64, "n_layer": 2, "n_head": 4})");
  const seqpar::BloomConfig c = seqpar::read_bloom_config(dir / "config.json");
  expect(c.vocab_size == 512 && c.hidden == 64 && c.layers == 2 && c.heads == 4, "config.json");

  // The data readers.
  write_text(dir / "train.jsonl", R"({"text": "张三在北京", "label": {"name": {"张三": [[0, 1]]}}})"
                                  "\n");
  const seqpar::NerDataset cluener = seqpar::read_cluener(dir / "train.jsonl");
  expect(cluener.records.size() == 1 && cluener.records[0].spans.size() == 1 &&
             cluener.records[0].spans[0].text == "张三",
         "read_cluener");
  seqpar::write_conll(dir / "train.bio", cluener.records);
  const seqpar::NerDataset conll = seqpar::read_conll(dir / "train.bio");
  expect(conll.records.size() == 1 && conll.records[0].text == "张三在北京" &&
             conll.records[0].spans.size() == 1 && conll.records[0].spans[0].label == "name",
         "write_conll, read_conll");

  // The records of another task, and predictions written back as JSON lines.
  write_text(dir / "classes.jsonl", R"({"id": 7, "text": "国足战平叙利亚", "label": "体育"})"
                                    "\n");
  const seqpar::ClassDataset classes = seqpar::read_classification(dir / "classes.jsonl");
  expect(classes.task() == "classification" && classes.records.size() == 1 &&
             classes.records[0].id.number == 7 && classes.records[0].label == "体育",
         "read_classification");
  const auto task = seqpar::ClassificationTask::of(classes, {});
  const auto predictions = task.predict(
      seqpar::texts_of(classes.records),
      [](std::span<const std::string> p) { return std::vector<std::string>(p.size(), "体育"); });
  seqpar::write_predictions(dir / "predictions.jsonl", task, predictions);
  std::ifstream written(dir / "predictions.jsonl");
  std::string line;
  std::getline(written, line);
  expect(line.find(R"("id":7,"task":"classification")") != std::string::npos &&
             line.find(R"("label":"体育")") != std::string::npos,
         "write_predictions (got '" + line + "')");

#if defined(SEQPAR_WITH_ONIGURUMA)
  const std::vector<std::string> texts = {"张三在北京", "hello world"};
  seqpar::write_char_tokenizer(dir / "tokenizer.json", texts);
  const seqpar::Tokenizer tok = seqpar::Tokenizer::from_file(dir / "tokenizer.json");
  for (const auto& text : texts)
    expect(tok.decode(tok.encode(text)) == text, "tokenizer round trip of '" + text + "'");
#endif

  // An error raised in the compiled unit reaches this one as seqpar::Error, naming the file.
  std::string caught;
  try {
    seqpar::SafetensorsFile bad(dir / "config.json");
  } catch (const seqpar::Error& e) {
    caught = e.what();
  }
  expect(caught.find("config.json") != std::string::npos,
         "a bad file is refused naming it (got '" + caught + "')");

  fs::remove_all(dir);
  if (failures == 0) std::printf("separate: every check passed\n");
  return failures == 0 ? 0 : 1;
}

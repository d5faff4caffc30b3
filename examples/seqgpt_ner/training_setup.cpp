// What training needs that depends on neither the model nor the plan: reading the data,
// the tokenizer and the example caches, taking the output folder, rotating checkpoints,
// appending metrics. Built in one unit with commands.cpp (CMakeLists.txt): its own unit
// would parse the library's headers once more for little code.
#include "run.hpp"

namespace ner {

Prepared prepare_training(const Options& o, std::int64_t model_vocab, bool writer) {
  Prepared d;
  fs::create_directories(o.out_dir);
  d.train_file = find_split(o.data_dir, "train");
  d.dev_file = find_split(o.data_dir, "dev");
  std::printf("data\n");
  ReadOptions ro;
  ro.labels = o.labels;
  ro.max_chars = o.max_chars;
  d.train = read_split(d.train_file, ro);
  d.labels = o.labels.empty() ? d.train.labels() : o.labels;
  SEQPAR_CHECK(!d.labels.empty(), d.train_file.string(),
               ": no labelled mention; cannot choose a label set");
  ro.labels = d.labels;
  d.dev = read_split(d.dev_file, ro);
  print_report(d.train.report);
  print_report(d.dev.report);
  std::printf("  labels (%zu, %zu prompt(s) per sentence): %s\n", d.labels.size(),
              chunk_labels(d.labels).size(), joined(d.labels).c_str());
  std::vector<std::string> texts;
  for (const auto& r : d.train.records) texts.push_back(r.text);
  d.tokenizer_file = tokenizer_path(o, texts, d.labels, model_vocab, writer);
  d.tok = load_tokenizer(d.tokenizer_file, model_vocab);
  d.tokenizer_id = file_hash(d.tokenizer_file);
  std::printf("  tokenizer %s: %zu ids\n", d.tokenizer_file.string().c_str(), d.tok->vocab_size());
  ExampleReport tr, dr;
  d.train_ex =
      cached_examples(o, "train", d.train_file, d.train, d.labels, *d.tok, d.tokenizer_id, tr);
  d.dev_ex = cached_examples(o, "dev", d.dev_file, d.dev, d.labels, *d.tok, d.tokenizer_id, dr);
  d.max_new_tokens = o.max_new_tokens > 0 ? o.max_new_tokens : tr.max_answer_tokens + 16;
  return d;
}

std::optional<fs::path> take_output_folder(const Options& o, std::optional<RunLock>& lock) {
  fs::create_directories(o.out_dir);
  lock.emplace(o.out_dir);  // before anything is written into the folder
  for (const auto& f : remove_stale_temporaries(o.out_dir))
    std::printf("removed %s, left by an interrupted save\n", f.c_str());
  const Checkpoints checkpoints{o.out_dir};
  std::optional<fs::path> resume_from;
  if (!o.resume) {
    // Left in place, an earlier run's checkpoints would outrank this run's own in the
    // rotation and in a later --resume; they are deleted only when the user says so.
    if (const auto earlier = checkpoints.steps(); !earlier.empty() && !o.overwrite_output_dir)
      seqpar::detail::fail(
          o.out_dir.string(), ": holds checkpoints of an earlier run (",
          checkpoints.path(earlier.front()).filename().string(),
          "); --resume continues that run, --overwrite-output-dir deletes them and starts afresh");
    for (const auto& f : checkpoints.remove_all())
      std::printf("removed %s of an earlier run (a fresh run; --resume continues one)\n",
                  f.c_str());
  } else {
    resume_from = checkpoints.newest_complete(true);
    // Folders written before checkpoints rotated hold one checkpoint.safetensors.
    if (!resume_from && fs::exists(o.out_dir / "checkpoint.safetensors"))
      resume_from = o.out_dir / "checkpoint.safetensors";
    SEQPAR_CHECK(resume_from.has_value(), o.out_dir.string(),
                 ": no checkpoint step-N.safetensors to resume from");
  }
  return resume_from;
}

void rotate_checkpoints(const fs::path& dir, std::int64_t keep) { Checkpoints{dir}.rotate(keep); }

void MetricsLog::append(nlohmann::json j) {
  j["time"] =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::ofstream f(path_, std::ios::app);
  SEQPAR_CHECK(f.is_open(), path_.string(), ": cannot be opened for appending metrics");
  f << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  f.close();
  SEQPAR_CHECK(!f.fail(), path_.string(), ": writing the metrics failed (a full disk?)");
}

}  // namespace ner

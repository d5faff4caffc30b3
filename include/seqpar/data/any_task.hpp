#pragma once
// AnyTask: a task chosen at run time (by name, or by what a training file's records are),
// erased once at a program's edge as AnyTrainer erases plans; AnyRecords: the records of one
// task's file, erased with it. TaskMenu<Ts...> is the list of tasks a program offers.

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/data/examples.hpp"
#include "seqpar/data/predictions.hpp"
#include "seqpar/data/record.hpp"
#include "seqpar/data/sample.hpp"
#include "seqpar/data/task.hpp"
#include "seqpar/data/tasks.hpp"
#include "seqpar/data/token_cache.hpp"

namespace seqpar::inline v0 {

/// The records of one file, of the task that read them (AnyTask::read).
class AnyRecords {
 public:
  AnyRecords() = default;

  /// The records of `d`, erased.
  template <class R>
  static AnyRecords of(Dataset<R> d) {
    AnyRecords a;
    a.report_ = d.report;
    a.texts_.assign(d.records.begin(), d.records.end());
    a.records_ = std::make_shared<const Holder<R>>(std::move(d.records));
    return a;
  }

  const ReadReport& report() const { return report_; }
  std::size_t size() const { return texts_.size(); }
  /// Each record's text, id and line.
  const std::vector<TextRecord>& texts() const { return texts_; }
  /// The records as `R`; throws when they are another task's.
  template <class R>
  std::span<const R> as() const {
    const auto* r = dynamic_cast<const Holder<R>*>(records_.get());
    SEQPAR_CHECK(r, report_.file, ": its records are ", report_.task,
                 "'s; the task asked for them reads others");
    return r->records;
  }

  /// A seeded sample of `n` of the records stratified by label (stratified_sample; n = 0:
  /// all), and which records it took.
  std::pair<AnyRecords, RecordSample> sample(std::size_t n, std::uint64_t seed) const {
    std::vector<std::vector<std::string>> labels;
    if (records_) labels = records_->labels();
    labels.resize(texts_.size());
    RecordSample s = stratified_sample(labels, n, seed);
    AnyRecords a;
    a.report_ = report_;
    for (const std::size_t i : s.indices) a.texts_.push_back(texts_[i]);
    if (records_) a.records_ = records_->subset(s.indices);
    return {std::move(a), std::move(s)};
  }

 private:
  struct Base {
    virtual ~Base() = default;
    virtual std::vector<std::vector<std::string>> labels() const = 0;
    virtual std::shared_ptr<const Base> subset(const std::vector<std::size_t>& at) const = 0;
  };
  template <class R>
  struct Holder : Base {
    explicit Holder(std::vector<R> r) : records(std::move(r)) {}
    std::vector<std::vector<std::string>> labels() const override {
      std::vector<std::vector<std::string>> out;
      for (const auto& r : records) out.push_back(record_labels(r));
      return out;
    }
    std::shared_ptr<const Base> subset(const std::vector<std::size_t>& at) const override {
      std::vector<R> some;
      for (const std::size_t i : at) some.push_back(records[i]);
      return std::make_shared<const Holder>(std::move(some));
    }
    std::vector<R> records;
  };
  ReadReport report_;
  std::vector<TextRecord> texts_;
  std::shared_ptr<const Base> records_;
};

/// A task's predictions, erased: their JSON lines, and the predictions for the task's own
/// files (AnyTask::write_submission).
struct AnyPredictions {
  std::vector<std::string> lines;     // prediction_json of each, in record order
  std::shared_ptr<const void> typed;  // the task's std::vector<Prediction>
};

/// A task's evaluation, erased: its predictions and its score as the task words them.
struct AnyEvaluation {
  AnyPredictions predictions;
  std::vector<std::vector<std::string>> answers;  // each record's answers
  std::int64_t records = 0, prompts = 0, garbled = 0;
  std::string summary, headline, details, json;  // the score's
};

namespace detail {

// Whether task T has a submission file: a write_submission(path, task, predictions) found
// here or by ADL (a task of another namespace may have its own). Looked up outside AnyTask,
// whose own write_submission would hide it.
template <class T>
concept HasSubmission = requires(const std::filesystem::path& p, const T& t,
                                 std::span<const typename T::Prediction> s) {
  write_submission(p, t, s);
};

// Whether task T can be kept without its training data: t.state() as JSON, and
// T::from_state(json) the same task back (what prediction from a model directory needs).
template <class T>
concept HasState = requires(const T& t, const nlohmann::json& j) {
  { t.state() } -> std::convertible_to<nlohmann::json>;
  { T::from_state(j) } -> std::same_as<T>;
};

template <HasSubmission T>
void submit(const std::filesystem::path& p, const T& t, std::span<const typename T::Prediction> s) {
  write_submission(p, t, s);
}

}  // namespace detail

/// A task chosen at run time: any NluTask, its operations on AnyRecords of its own.
class AnyTask {
 public:
  /// No task yet: assign one before any other call.
  AnyTask() = default;
  template <NluTask T>
  explicit AnyTask(T task) : self_(std::make_shared<const Model<T>>(std::move(task))) {}

  std::string_view name() const { return self_->name(); }
  std::vector<std::string> labels() const { return self_->labels(); }
  std::string describe() const { return self_->describe(); }
  std::string overview() const { return self_->overview(); }
  std::vector<std::string> prompt_words() const { return self_->prompt_words(); }
  std::int64_t max_prompts() const { return self_->max_prompts(); }

  /// The records of `path` in the task's formats.
  AnyRecords read(const std::filesystem::path& path, const ReadOptions& options) const {
    return self_->read(path, options);
  }

  /// The examples of `records` (this task's) through the cache at `path`
  /// (cached_prompt_examples).
  template <TextEncoder Enc>
  ExampleSet cached_examples(const std::filesystem::path& path, const std::string& source_hash,
                             const AnyRecords& records, const ExampleOptions& options,
                             const Enc& tok, const std::string& tokenizer_id,
                             CacheStatus* status = nullptr, ExampleReport* report = nullptr) const {
    return cached_prompt_examples(
        path, source_hash, describe(), [&] { return self_->prompts(records); }, options, tok,
        tokenizer_id, status, report);
  }

  /// The examples of `records` (this task's) made with `tok`, in memory.
  template <TextEncoder Enc>
  ExampleSet make_examples(const AnyRecords& records, const ExampleOptions& options, const Enc& tok,
                           ExampleReport* report = nullptr) const {
    const std::vector<std::vector<TaskPrompt>> p = self_->prompts(records);
    return seqpar::make_examples(std::span<const std::vector<TaskPrompt>>(p), options, tok, report);
  }

  /// The cache key of this task's examples made from a source (by its hash) with a tokenizer.
  std::string cache_key(const std::string& source_hash, const std::string& tokenizer_id,
                        const ExampleOptions& options) const {
    return example_cache_key(source_hash, tokenizer_id, describe(), options);
  }

  /// The predictions of `texts` (answered by `answer`).
  AnyPredictions predict(std::span<const TextRecord> texts, const AnswerFn& answer) const {
    return self_->predict(texts, answer);
  }

  /// The first `limit` (0: all) of `gold` (this task's, annotated) predicted and scored.
  AnyEvaluation evaluate(const AnyRecords& gold, std::size_t limit, const AnswerFn& answer) const {
    return self_->evaluate(gold, limit, answer);
  }

  /// What the task is without its training data, {"task": name, "state": ...}: TaskMenu::
  /// restore makes it again. Throws for a task that cannot be kept so (no state()).
  nlohmann::json state() const { return self_->state(); }

  /// Whether the task has a submission file (write_submission(path, task, predictions)).
  bool has_submission() const { return self_->has_submission(); }
  void write_submission(const std::filesystem::path& path, const AnyPredictions& p) const {
    self_->write_submission(path, p);
  }

 private:
  struct Concept {
    virtual ~Concept() = default;
    virtual std::string_view name() const = 0;
    virtual std::vector<std::string> labels() const = 0;
    virtual std::string describe() const = 0;
    virtual std::string overview() const = 0;
    virtual std::vector<std::string> prompt_words() const = 0;
    virtual std::int64_t max_prompts() const = 0;
    virtual AnyRecords read(const std::filesystem::path&, const ReadOptions&) const = 0;
    virtual std::vector<std::vector<TaskPrompt>> prompts(const AnyRecords&) const = 0;
    virtual AnyPredictions predict(std::span<const TextRecord>, const AnswerFn&) const = 0;
    virtual AnyEvaluation evaluate(const AnyRecords&, std::size_t, const AnswerFn&) const = 0;
    virtual bool has_submission() const = 0;
    virtual void write_submission(const std::filesystem::path&, const AnyPredictions&) const = 0;
    virtual nlohmann::json state() const = 0;
  };

  template <NluTask T>
  struct Model final : Concept {
    using Predictions = std::vector<typename T::Prediction>;
    static constexpr bool submits = detail::HasSubmission<T>;

    explicit Model(T t) : task(std::move(t)) {}
    std::string_view name() const override { return T::name; }
    std::vector<std::string> labels() const override { return task.labels(); }
    std::string describe() const override { return task.describe(); }
    std::string overview() const override { return task.overview(); }
    std::vector<std::string> prompt_words() const override { return task.prompt_words(); }
    std::int64_t max_prompts() const override { return task.max_prompts(); }
    AnyRecords read(const std::filesystem::path& path, const ReadOptions& o) const override {
      return AnyRecords::of(T::read(path, o));
    }
    std::vector<std::vector<TaskPrompt>> prompts(const AnyRecords& r) const override {
      return task_prompts(task, r.as<typename T::Record>());
    }
    AnyPredictions erase(Predictions p) const {
      AnyPredictions a;
      for (const auto& one : p) a.lines.push_back(task.prediction_json(one));
      a.typed = std::make_shared<const Predictions>(std::move(p));
      return a;
    }
    AnyPredictions predict(std::span<const TextRecord> texts,
                           const AnswerFn& answer) const override {
      return erase(task.predict(texts, answer));
    }
    AnyEvaluation evaluate(const AnyRecords& gold, std::size_t limit,
                           const AnswerFn& answer) const override {
      auto records = gold.as<typename T::Record>();
      if (limit > 0 && limit < records.size()) records = records.first(limit);
      Predictions p = task.predict(texts_of(records), answer);
      const typename T::Score s = task.score(records, p);
      AnyEvaluation e;
      for (const auto& one : p) e.answers.push_back(one.answers);
      e.records = s.records;
      e.prompts = s.prompts;
      e.garbled = s.errors.total();
      e.summary = s.summary();
      e.headline = s.headline();
      e.details = s.details();
      e.json = s.json();
      e.predictions = erase(std::move(p));
      return e;
    }
    bool has_submission() const override { return submits; }
    nlohmann::json state() const override {
      if constexpr (detail::HasState<T>)
        return {{"task", T::name}, {"state", task.state()}};
      else
        detail::fail("the task ", T::name, " has no state() to be kept without its training data");
    }
    void write_submission(const std::filesystem::path& path,
                          const AnyPredictions& p) const override {
      if constexpr (submits)
        detail::submit(path, task,
                       std::span<const typename T::Prediction>(
                           *static_cast<const Predictions*>(p.typed.get())));
      else
        detail::fail(path.string(), ": the task ", T::name, " has no submission format");
    }

    T task;
  };

  std::shared_ptr<const Concept> self_;
};

/// The tasks a program offers, chosen by name at run time.
template <NluTask... Ts>
struct TaskMenu {
  /// "ner, classification or relation".
  static std::string names() {
    const std::vector<std::string_view> n{Ts::name...};
    std::string s;
    for (std::size_t i = 0; i < n.size(); ++i)
      s += std::string(i == 0 ? "" : i + 1 == n.size() ? " or " : ", ") + std::string(n[i]);
    return s;
  }

  /// Whether one of the tasks is called `name`.
  static bool has(std::string_view name) { return ((Ts::name == name) || ...); }

  /// The task AnyTask::state() kept; `what` (a file) names it in a refusal.
  static AnyTask restore(const nlohmann::json& kept, std::string_view what) {
    SEQPAR_CHECK(kept.is_object() && kept.contains("task") && kept["task"].is_string() &&
                     kept.contains("state"),
                 what, ": expected {\"task\": name, \"state\": {...}}");
    const auto name = kept["task"].get<std::string>();
    std::optional<AnyTask> out;
    try {
      (void)((Ts::name == name && (out.emplace(restored<Ts>(kept["state"], what)), true)) || ...);
    } catch (const nlohmann::json::exception& e) {
      detail::fail(what, ": the ", name, " task's state is not as written (", e.what(), ")");
    }
    if (!out) detail::fail(what, ": task '", name, "' is not one of ", names());
    return std::move(*out);
  }

  /// The records of `path` read by the task called `name`, with the task that training set
  /// defines (labels: `labels`, else the set's own). `what` names where the name came from.
  static std::pair<AnyTask, AnyRecords> train(std::string_view name,
                                              const std::filesystem::path& path,
                                              const ReadOptions& options,
                                              const std::vector<std::string>& labels,
                                              std::string_view what = "task") {
    std::optional<std::pair<AnyTask, AnyRecords>> out;
    // One comparison per offered task: the name is turned into a type here, once.
    (void)((Ts::name == name && (out.emplace(of<Ts>(path, options, labels)), true)) || ...);
    if (!out) detail::fail(what, ": '", name, "' is not a task; expected ", names());
    return std::move(*out);
  }

 private:
  template <NluTask T>
  static AnyTask restored(const nlohmann::json& state, std::string_view what) {
    if constexpr (detail::HasState<T>)
      return AnyTask(T::from_state(state));
    else
      detail::fail(what, ": the task ", T::name, " cannot be made without its training data");
  }

  template <NluTask T>
  static std::pair<AnyTask, AnyRecords> of(const std::filesystem::path& path,
                                           const ReadOptions& options,
                                           const std::vector<std::string>& labels) {
    auto d = T::read(path, options);
    T task = T::of(d, labels);
    return {AnyTask(std::move(task)), AnyRecords::of(std::move(d))};
  }
};

/// The library's tasks.
using StandardTasks = TaskMenu<NerTask, ClassificationTask, RelationTask>;

}  // namespace seqpar::inline v0

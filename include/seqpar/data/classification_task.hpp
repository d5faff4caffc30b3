#pragma once
// ClassificationTask: one 分类 prompt over every class, the answer one class; scored by
// accuracy and macro-F1 beside the training set's majority class answered every time.
// Its JSON (score and prediction lines): data/impl/classification_task.hpp
// (core/separate_compilation.hpp).

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/core/separate_compilation.hpp"
#include "seqpar/data/classification.hpp"
#include "seqpar/data/json_records.hpp"
#include "seqpar/data/task.hpp"
#include "seqpar/data/task_json.hpp"

namespace seqpar::inline v0 {

/// Classification (intent, topic) over a set of classes.
class ClassificationTask {
 public:
  using Record = ClassRecord;

  /// The class the answer names; empty when it is garbled.
  struct Prediction : PredictionBase {
    std::string label;
  };

  /// Accuracy, macro-F1 and per-class counts, and the majority class's.
  struct Score : ScoreBase {
    ClassificationScore classes;
    ClassificationScore baseline;  // the majority class answered every time
    std::string majority_label;

    std::string summary() const {
      return "classification: " + classes.summary() +
             (majority_label.empty()
                  ? std::string()
                  : "; majority class '" + majority_label + "' " + baseline.summary()) +
             "; " + counts();
    }
    std::string headline() const { return summary(); }
    std::string details() const { return classes.table(); }
    std::string json() const;
  };

  static constexpr std::string_view name = "classification";

  /// The task of `labels` (in prompt order); `majority` is the baseline's class (may be empty).
  explicit ClassificationTask(std::vector<std::string> labels, std::string majority = {})
      : labels_(std::move(labels)), majority_(std::move(majority)) {
    check_label_list(labels_, "ClassificationTask: labels");
  }

  /// Classification JSON records.
  static ClassDataset read(const std::filesystem::path& path, const ReadOptions& options) {
    return read_classification(path, options);
  }

  /// The task of training set `train`: `labels`, else its classes (sorted), and its majority.
  static ClassificationTask of(const ClassDataset& train, std::vector<std::string> labels) {
    labels = training_labels(train, std::move(labels), "no label to train (classification)");
    return ClassificationTask(std::move(labels), majority_label(train.records));
  }

  const std::vector<std::string>& labels() const { return labels_; }
  /// The training set's most frequent class (the baseline); empty for a task made from a
  /// state that does not record one.
  const std::string& majority() const { return majority_; }

  /// The task without its training data (AnyTask::state: the labels and the majority class,
  /// so that a task made from its state scores the baseline too), and back; a state without
  /// "majority" makes a task without a baseline.
  nlohmann::json state() const { return {{"labels", labels_}, {"majority", majority_}}; }
  static ClassificationTask from_state(const nlohmann::json& j) {
    return ClassificationTask(j.at("labels").get<std::vector<std::string>>(),
                              j.value("majority", std::string()));
  }

  /// "task=classification;labels=a,b" (part of a token cache's key).
  std::string describe() const {
    std::string s = "task=classification;labels=";
    for (std::size_t i = 0; i < labels_.size(); ++i) s += (i ? "," : "") + labels_[i];
    return s;
  }
  std::string overview() const {
    std::string s = "  task classification, classes (" + std::to_string(labels_.size()) + "): ";
    for (std::size_t i = 0; i < labels_.size(); ++i) s += (i ? "," : "") + labels_[i];
    return s +
           (majority_.empty() ? std::string() : "\n  majority class (the baseline): " + majority_) +
           "\n";
  }
  std::vector<std::string> prompt_words() const { return labels_; }
  std::int64_t max_prompts() const { return 1; }

  /// The 分类 prompt, the record's class the answer.
  std::vector<TaskPrompt> prompts(const ClassRecord& r) const {
    detail::require_annotation(r);
    SEQPAR_CHECK(std::find(labels_.begin(), labels_.end(), r.label) != labels_.end(), "record ",
                 r.id.text(), " (line ", r.line, "): class '", r.label,
                 "' is not one of the task's labels; a class answer names one of them");
    return {{classification_prompt(r.text, labels_), r.label, 0}};
  }

  /// One step: the 分类 prompt of every record; a garbled answer names no class.
  std::vector<Prediction> predict(std::span<const TextRecord> records,
                                  const AnswerFn& answer) const {
    std::vector<std::string> prompts;
    for (const auto& r : records) prompts.push_back(classification_prompt(r.text, labels_));
    const std::vector<std::string> answers = detail::ask(answer, prompts);
    std::vector<Prediction> out;
    for (std::size_t i = 0; i < records.size(); ++i) {
      Prediction p;
      static_cast<PredictionBase&>(p) = detail::unanswered(records.subspan(i, 1))[0];
      p.answers = {answers[i]};
      const ClassAnswer a = parse_class_answer(answers[i], labels_);
      p.label = a.label;
      p.errors += a.errors;
      out.push_back(std::move(p));
    }
    return out;
  }

  Score score(std::span<const ClassRecord> gold, std::span<const Prediction> predictions) const {
    detail::check_scored_sizes(gold.size(), predictions.size());
    Score s;
    s.majority_label = majority_;
    for (std::size_t i = 0; i < gold.size(); ++i) {
      detail::count_scored(s, gold[i], predictions[i], i, labels_);
      s.classes.add(predictions[i].label, gold[i].label);
      if (!majority_.empty()) s.baseline.add(majority_, gold[i].label);
    }
    return s;
  }

  /// {"id", "task": "classification", "text", "answer", "label" (null: garbled), "errors"}.
  std::string prediction_json(const Prediction& p) const;

 private:
  std::vector<std::string> labels_;
  std::string majority_;
};

static_assert(NluTask<ClassificationTask>);

}  // namespace seqpar::inline v0

#if !defined(SEQPAR_SEPARATE_COMPILATION)
#include "seqpar/data/impl/classification_task.hpp"
#endif

#pragma once
// TaskSpec: what a model is trained for (the task, its labels in prompt order, and what the
// training set says of them), and training_prompts: a record's SeqGPT prompts with the
// answers that train them (docs/tasks.md).

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/data/classification.hpp"
#include "seqpar/data/prompt.hpp"
#include "seqpar/data/record.hpp"
#include "seqpar/data/relation.hpp"

namespace seqpar::inline v0 {

/// What a model is trained for: the task and its labels in prompt order (NER's labels, the
/// classes, or the relations as the data names them, passives included), with what the
/// training set says of them.
struct TaskSpec {
  NluTask task = NluTask::ner;
  std::vector<std::string> labels;
  std::size_t labels_per_prompt = seqpar::labels_per_prompt;  // NER: labels per 抽取 prompt
  RelationSchema relations;    // relation: how the labels fold into the prompts' relations
  std::string majority_label;  // classification: the training set's most frequent class

  /// Everything that shapes prompts and answers, as one line (part of a token cache's key).
  std::string describe() const {
    std::ostringstream os;
    os << "task=" << nlu_task_name(task) << ";labels=";
    for (std::size_t i = 0; i < labels.size(); ++i) os << (i ? "," : "") << labels[i];
    if (task == NluTask::ner) os << ";labels_per_prompt=" << labels_per_prompt;
    if (task == NluTask::relation) os << ";" << relations.describe();
    return os.str();
  }
};

/// The spec of training set `train`: its task and labels (`labels` when given, else the
/// set's own, sorted), its relations' schema, its majority class. Throws for a set without
/// annotation (text only) and for labels a prompt cannot list.
inline TaskSpec task_spec(const TextDataset& train, std::vector<std::string> labels = {}) {
  SEQPAR_CHECK(train.task().has_value(), train.report.file,
               ": holds text only; a task is trained on annotated records");
  TaskSpec s;
  s.task = *train.task();
  s.labels = labels.empty() ? train.labels() : std::move(labels);
  SEQPAR_CHECK(!s.labels.empty(), train.report.file, ": no label to train (", nlu_task_name(s.task),
               ")");
  for (const auto& l : s.labels)
    SEQPAR_CHECK(detail::label_problem(l).empty(), train.report.file, ": label '", l, "' ",
                 detail::label_problem(l));
  if (s.task == NluTask::relation) s.relations = RelationSchema::of(s.labels, train.records);
  if (s.task == NluTask::classification) s.majority_label = majority_label(train.records);
  return s;
}

/// One prompt of a record and the answer that trains it. `part` says which prompt of the
/// record it is: NER's label chunk; 0 for classification and the relations' first step;
/// 1 + i for the second step of relation i of the schema.
struct TaskPrompt {
  std::string prompt, answer;
  std::int32_t part = 0;
};

/// The prompts that train record `r` (an annotated record of spec's task), with their answers.
inline std::vector<TaskPrompt> training_prompts(const TaskSpec& spec, const TextRecord& r) {
  SEQPAR_CHECK(r.labelled, "record ", r.id.text(), " (line ", r.line,
               ") has no annotation; training needs annotated records");
  std::vector<TaskPrompt> out;
  switch (spec.task) {
    case NluTask::ner: {
      const auto chunks = chunk_labels(spec.labels, spec.labels_per_prompt);
      for (std::size_t c = 0; c < chunks.size(); ++c)
        out.push_back({seqgpt_prompt(r.text, Task::extraction, chunks[c]), ner_answer(r, chunks[c]),
                       static_cast<std::int32_t>(c)});
      break;
    }
    case NluTask::classification:
      SEQPAR_CHECK(std::find(spec.labels.begin(), spec.labels.end(), r.label) != spec.labels.end(),
                   "record ", r.id.text(), " (line ", r.line, "): class '", r.label,
                   "' is not one of the task's labels; a class answer names one of them");
      out.push_back({classification_prompt(r.text, spec.labels), r.label, 0});
      break;
    case NluTask::relation: {
      const RelationSchema& s = spec.relations;
      const auto triples = s.canonical_relations(r.text, r.relations);
      out.push_back({relation_types_prompt(r.text, s), relation_types_answer(s, triples), 0});
      for (std::size_t i = 0; i < s.relations.size(); ++i)
        if (std::any_of(triples.begin(), triples.end(),
                        [&](const RelationTriple& t) { return t.relation == s.relations[i]; }))
          out.push_back({relation_prompt(r.text, s.relations[i]),
                         relation_answer(s.relations[i], triples),
                         static_cast<std::int32_t>(1 + i)});
      break;
    }
  }
  return out;
}

}  // namespace seqpar::inline v0

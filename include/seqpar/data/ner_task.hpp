#pragma once
// NerTask: entity recognition as SeqGPT frames it. A record's prompts are one 抽取 prompt per
// chunk of labels_per_prompt labels; the answer "label: span，span" lines; the mentions read
// back are placed in the text (character offsets); the score is mention-level micro P/R/F1.
// Its JSON (score and prediction lines): data/impl/ner_task.hpp (core/separate_compilation.hpp).

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/core/separate_compilation.hpp"
#include "seqpar/data/classification.hpp"
#include "seqpar/data/cluener.hpp"
#include "seqpar/data/conll.hpp"
#include "seqpar/data/metrics.hpp"
#include "seqpar/data/ner_record.hpp"
#include "seqpar/data/prompt.hpp"
#include "seqpar/data/spans.hpp"
#include "seqpar/data/task.hpp"
#include "seqpar/data/task_json.hpp"

namespace seqpar::inline v0 {

/// A mention a NER answer names, and where it is in the text (none: the text does not hold
/// it; counted in AnswerErrors::span_not_in_text).
struct PredictedMention {
  std::string label, text;
  std::optional<CharSpan> span;
};

/// Entity recognition over a label set, cut into chunks of labels_per_prompt a prompt.
class NerTask {
 public:
  using Record = NerRecord;

  /// The mentions a record's answers name, in answer order.
  struct Prediction : PredictionBase {
    std::vector<PredictedMention> entities;
  };

  /// Mention-level micro P/R/F1 (mentions as (label, text) multisets, docs/ner.md).
  struct Score : ScoreBase {
    NerScore ner;

    std::string summary() const { return "ner: " + ner.summary() + "; " + counts(); }
    std::string headline() const {
      char s[128];
      std::snprintf(s, sizeof s, "F1 %.4f (precision %.4f, recall %.4f)", ner.micro().f1(),
                    ner.micro().precision(), ner.micro().recall());
      return s;
    }
    std::string details() const { return detail::prf_lines(ner.by_label()); }
    std::string json() const;
  };

  static constexpr std::string_view name = "ner";

  /// The task of `labels` (in prompt order), `per_prompt` of them a prompt.
  explicit NerTask(std::vector<std::string> labels,
                   std::size_t per_prompt = seqpar::labels_per_prompt)
      : labels_(std::move(labels)), per_prompt_(per_prompt) {
    check_label_list(labels_, "NerTask: labels");
    SEQPAR_CHECK(per_prompt_ > 0, "NerTask: labels_per_prompt is 0; expected at least 1");
  }

  /// CLUENER JSON (.json, .jsonl) or CoNLL BIO (any other extension).
  static NerDataset read(const std::filesystem::path& path, const ReadOptions& options) {
    const auto ext = path.extension();
    return ext == ".json" || ext == ".jsonl" ? read_cluener(path, options)
                                             : read_conll(path, options);
  }

  /// The task of training set `train`: `labels`, else its mentions' labels (sorted).
  static NerTask of(const NerDataset& train, std::vector<std::string> labels) {
    return NerTask(training_labels(train, std::move(labels),
                                   "no labelled mention; cannot choose a label set"));
  }

  const std::vector<std::string>& labels() const { return labels_; }
  std::size_t labels_per_prompt() const { return per_prompt_; }

  /// The task without its training data (AnyTask::state), and back.
  nlohmann::json state() const { return {{"labels", labels_}, {"labels_per_prompt", per_prompt_}}; }
  static NerTask from_state(const nlohmann::json& j) {
    return NerTask(j.at("labels").get<std::vector<std::string>>(),
                   j.at("labels_per_prompt").get<std::size_t>());
  }
  std::vector<std::vector<std::string>> chunks() const {
    return chunk_labels(labels_, per_prompt_);
  }

  /// "task=ner;labels=a,b;labels_per_prompt=6" (part of a token cache's key).
  std::string describe() const {
    std::string s = "task=ner;labels=";
    for (std::size_t i = 0; i < labels_.size(); ++i) s += (i ? "," : "") + labels_[i];
    return s + ";labels_per_prompt=" + std::to_string(per_prompt_);
  }
  std::string overview() const {
    std::string s = "  labels (" + std::to_string(labels_.size()) + ", " +
                    std::to_string(chunks().size()) + " prompt(s) per sentence): ";
    for (std::size_t i = 0; i < labels_.size(); ++i) s += (i ? "," : "") + labels_[i];
    return s + "\n";
  }
  std::vector<std::string> prompt_words() const { return labels_; }
  std::int64_t max_prompts() const { return static_cast<std::int64_t>(chunks().size()); }

  /// One 抽取 prompt per label chunk, the chunk's mentions the answer.
  std::vector<TaskPrompt> prompts(const NerRecord& r) const {
    detail::require_annotation(r);
    const auto cs = chunks();
    std::vector<TaskPrompt> out;
    for (std::size_t c = 0; c < cs.size(); ++c)
      out.push_back({seqgpt_prompt(r.text, Instruction::extraction, cs[c]), ner_answer(r, cs[c]),
                     static_cast<std::int32_t>(c)});
    return out;
  }

  /// One step: every chunk's prompt; the mentions of every answer placed in the text together.
  std::vector<Prediction> predict(std::span<const TextRecord> records,
                                  const AnswerFn& answer) const {
    const auto cs = chunks();
    std::vector<std::string> prompts;
    for (const auto& r : records)
      for (const auto& c : cs) prompts.push_back(seqgpt_prompt(r.text, Instruction::extraction, c));
    const std::vector<std::string> answers = detail::ask(answer, prompts);
    std::vector<Prediction> out;
    for (std::size_t i = 0; i < records.size(); ++i) {
      Prediction p;
      static_cast<PredictionBase&>(p) = detail::unanswered(records.subspan(i, 1))[0];
      p.answers.assign(answers.begin() + static_cast<std::ptrdiff_t>(i * cs.size()),
                       answers.begin() + static_cast<std::ptrdiff_t>((i + 1) * cs.size()));
      read_answers(cs, p);
      out.push_back(std::move(p));
    }
    return out;
  }

  /// Mentions as (label, text) multisets against all the record's mentions (one of a label
  /// the task lacks is missed).
  Score score(std::span<const NerRecord> gold, std::span<const Prediction> predictions) const {
    detail::check_scored_sizes(gold.size(), predictions.size());
    Score s;
    for (std::size_t i = 0; i < gold.size(); ++i) {
      detail::count_scored(s, gold[i], predictions[i], i, labels_);
      std::vector<NerMention> predicted;
      for (const auto& m : predictions[i].entities) predicted.push_back({m.label, m.text});
      s.ner.add(predicted, gold_mentions(gold[i]));
    }
    return s;
  }

  /// {"id", "task": "ner", "text", "answer", "entities": [{"label", "text", "start", "end"}],
  /// "errors"}; a mention the text does not hold has null offsets.
  std::string prediction_json(const Prediction& p) const;

 private:
  // The mentions of every chunk's answer, placed in the text all together.
  static void read_answers(const std::vector<std::vector<std::string>>& cs, Prediction& p) {
    std::vector<std::string> strings;
    for (std::size_t c = 0; c < cs.size(); ++c) {
      if (detail::trim_answer(p.answers[c]).empty()) {
        ++p.errors.empty;
        continue;
      }
      const ParsedAnswer a = parse_answer(p.answers[c], cs[c]);
      p.errors.malformed += a.bad_lines;
      p.errors.unknown_label += a.unknown_labels;
      for (const auto& m : a.mentions) {
        p.entities.push_back({m.label, m.text, std::nullopt});
        strings.push_back(m.text);
      }
    }
    const auto spans = place_spans(p.text, strings);
    for (std::size_t i = 0; i < spans.size(); ++i) {
      p.entities[i].span = spans[i];
      p.errors.span_not_in_text += !spans[i];
    }
  }

  std::vector<std::string> labels_;
  std::size_t per_prompt_;
};

static_assert(NluTask<NerTask>);

}  // namespace seqpar::inline v0

#if !defined(SEQPAR_SEPARATE_COMPILATION)
#include "seqpar/data/impl/ner_task.hpp"
#endif

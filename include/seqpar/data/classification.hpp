#pragma once
// Classification as SeqGPT frames it (docs/tasks.md): one 分类 prompt over the whole label
// set, the answer one label. Reading an answer back (a garbled one is counted by kind, never
// taken for a label), accuracy, macro-F1 with a per-label table, and the majority-class
// baseline of the training labels.

#include <algorithm>
#include <cstdint>
#include <iomanip>
#include <map>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/data/metrics.hpp"
#include "seqpar/data/prompt.hpp"
#include "seqpar/data/record.hpp"

namespace seqpar::inline v0 {

/// A text and its class (empty when the record has no annotation).
struct ClassRecord : TextRecord {
  std::string label;
};

/// The class of a record, when it has one.
inline std::vector<std::string> record_labels(const ClassRecord& r) {
  return r.label.empty() ? std::vector<std::string>{} : std::vector<std::string>{r.label};
}

/// Classification records read from one file.
using ClassDataset = Dataset<ClassRecord>;

/// The 分类 prompt of `text` over every label, in the order given.
inline std::string classification_prompt(std::string_view text,
                                         std::span<const std::string> labels) {
  return seqgpt_prompt(text, Instruction::classification, labels);
}

/// A classification answer read back: the label, or an empty label and the error.
struct ClassAnswer {
  std::string label;  // empty when the answer is garbled
  AnswerErrors errors;
};

namespace detail {
inline std::string_view trim_answer(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

/// The pieces of `s` between the separators '，' and ',', trimmed; empty pieces kept.
inline std::vector<std::string_view> split_labels(std::string_view s) {
  std::vector<std::string_view> out;
  while (true) {
    const std::size_t wide = s.find(list_separator), narrow = s.find(',');
    const std::size_t at = std::min(wide, narrow);
    out.push_back(trim_answer(s.substr(0, at)));
    if (at == std::string_view::npos) return out;
    s.remove_prefix(at + (at == wide ? list_separator.size() : 1));
  }
}
}  // namespace detail

/// Reads a 分类 answer: white space around it is dropped; exactly one label of `labels` is
/// the answer. Anything else is an error: nothing (empty), several lines or an extraction
/// line "x: y" (malformed), two or more labels of the set joined by '，' or ','
/// (several_labels), any other text (unknown_label).
inline ClassAnswer parse_class_answer(std::string_view answer,
                                      std::span<const std::string> labels) {
  ClassAnswer out;
  const std::string_view a = detail::trim_answer(answer);
  const auto known = [&](std::string_view l) {
    return std::find(labels.begin(), labels.end(), l) != labels.end();
  };
  if (a.empty()) {
    out.errors.empty = 1;
  } else if (known(a)) {
    out.label = a;
  } else if (a.find('\n') != std::string_view::npos || a.find(": ") != std::string_view::npos) {
    out.errors.malformed = 1;
  } else {
    const auto pieces = detail::split_labels(a);
    const bool several = pieces.size() > 1 && std::all_of(pieces.begin(), pieces.end(), known);
    (several ? out.errors.several_labels : out.errors.unknown_label) = 1;
  }
  return out;
}

/// Accuracy, macro-F1 and per-label counts of a classification. Per label, `correct` is the
/// true positives, `predicted` how often it was answered and `gold` its support; a garbled
/// answer is wrong and predicts no label.
class ClassificationScore {
 public:
  /// Adds one record: its gold label and the answer's label (empty: garbled).
  void add(const std::string& predicted, const std::string& gold) {
    ++records_;
    const bool right = !predicted.empty() && predicted == gold;
    correct_ += right;
    by_label_[gold].gold += 1;
    by_label_[gold].correct += right;
    if (!predicted.empty()) by_label_[predicted].predicted += 1;
  }

  std::int64_t records() const { return records_; }
  std::int64_t correct() const { return correct_; }
  double accuracy() const {
    return records_ > 0 ? static_cast<double>(correct_) / static_cast<double>(records_) : 0.0;
  }
  /// The mean F1 over the labels that are gold or answered at least once (a label neither
  /// gold nor answered has no F1 and is left out, as scikit-learn's default label set).
  double macro_f1() const {
    double sum = 0;
    for (const auto& [label, c] : by_label_) sum += c.f1();
    return by_label_.empty() ? 0.0 : sum / static_cast<double>(by_label_.size());
  }
  const std::map<std::string, PrfCounts>& by_label() const { return by_label_; }

  /// "accuracy 0.8000 macro-F1 0.7333 (8 of 10)".
  std::string summary() const {
    std::ostringstream os;
    os << std::fixed << std::setprecision(4) << "accuracy " << accuracy() << " macro-F1 "
       << macro_f1() << " (" << correct_ << " of " << records_ << ")";
    return os.str();
  }

  /// One line per label: "体育  P 0.5000  R 1.0000  F1 0.6667  support 2".
  std::string table() const {
    std::int64_t width = 0;
    for (const auto& [label, c] : by_label_) width = std::max(width, detail::display_width(label));
    std::ostringstream os;
    os << std::fixed << std::setprecision(4);
    for (const auto& [label, c] : by_label_)
      os << detail::padded(label, width + 2) << "P " << c.precision() << "  R " << c.recall()
         << "  F1 " << c.f1() << "  support " << c.gold << "\n";
    return os.str();
  }

 private:
  std::int64_t records_ = 0, correct_ = 0;
  std::map<std::string, PrfCounts> by_label_;
};

/// The most frequent label of `records` (ties: the smallest in byte order): the majority
/// class of a training set. Throws when no record has a label.
inline std::string majority_label(std::span<const ClassRecord> records) {
  std::map<std::string, std::int64_t> n;
  for (const auto& r : records)
    if (!r.label.empty()) ++n[r.label];
  SEQPAR_CHECK(!n.empty(), "majority_label: no record has a class label");
  return std::max_element(n.begin(), n.end(),
                          [](const auto& a, const auto& b) { return a.second < b.second; })
      ->first;
}

/// The score of answering `label` for every record of `gold`: the majority-class baseline
/// when `label` is the training set's majority_label.
inline ClassificationScore constant_score(std::span<const ClassRecord> gold,
                                          const std::string& label) {
  ClassificationScore s;
  for (const auto& r : gold) s.add(label, r.label);
  return s;
}

}  // namespace seqpar::inline v0

#pragma once
// SeqGPT prompts and the answer contract (docs/ner.md): labels and spans joined by the full-width
// comma U+FF0C, at most 6 extraction labels a prompt, one answer line per label ("None": none).

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/data/ner_record.hpp"
#include "seqpar/data/record.hpp"

namespace seqpar::inline v0 {

/// The two SeqGPT instructions: extract spans, or pick a label.
enum class Instruction : std::uint8_t { extraction, classification };

/// The word a prompt names the instruction with.
constexpr std::string_view instruction_word(Instruction i) {
  return i == Instruction::extraction ? "抽取" : "分类";
}

/// Joins labels in a prompt and spans in an answer: the full-width comma.
inline constexpr std::string_view list_separator = "，";
/// The answer of a label without mentions.
inline constexpr std::string_view no_mention = "None";
/// Labels per extraction prompt.
inline constexpr std::size_t labels_per_prompt = 6;

/// The SeqGPT prompt for `text` and `labels`.
inline std::string seqgpt_prompt(std::string_view text, Instruction instruction,
                                 std::span<const std::string> labels) {
  SEQPAR_CHECK(!labels.empty(), "seqgpt_prompt: the label list is empty");
  std::string s = "输入: ";
  s.append(text).append("\n").append(instruction_word(instruction)).append(": ");
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const std::string& l = labels[i];
    const std::string problem = detail::label_problem(l);
    SEQPAR_CHECK(problem.empty(), "seqgpt_prompt: label '", l, "' ", problem);
    if (i) s.append(list_separator);
    s.append(l);
  }
  s.append("\n输出: [GEN]");
  return s;
}

/// What a SeqGPT prompt holds after its input text: the instruction, its label list and the
/// output marker (from the newline that ends the text; labels hold no newline). Empty when
/// `prompt` is not one seqgpt_prompt made.
inline std::string_view prompt_labels_part(std::string_view prompt) {
  const std::size_t last = prompt.rfind('\n');
  if (last == std::string_view::npos || last == 0) return {};
  const std::size_t text_end = prompt.rfind('\n', last - 1);
  return text_end == std::string_view::npos ? std::string_view{} : prompt.substr(text_end);
}

/// `labels` cut into consecutive chunks of at most `max_per_chunk`.
inline std::vector<std::vector<std::string>> chunk_labels(
    std::span<const std::string> labels, std::size_t max_per_chunk = labels_per_prompt) {
  SEQPAR_CHECK(max_per_chunk > 0, "chunk_labels: max_per_chunk must be positive");
  std::vector<std::vector<std::string>> out;
  for (std::size_t i = 0; i < labels.size(); i += max_per_chunk)
    out.emplace_back(
        labels.begin() + static_cast<std::ptrdiff_t>(i),
        labels.begin() + static_cast<std::ptrdiff_t>(std::min(labels.size(), i + max_per_chunk)));
  return out;
}

/// One mention as the metric sees it: a label and the mention's text.
struct NerMention {
  std::string label, text;
  auto operator<=>(const NerMention&) const = default;
};

/// The mentions of `r` whose label is in `labels` (every mention when `labels` is empty),
/// in text order.
inline std::vector<NerMention> gold_mentions(const NerRecord& r,
                                             std::span<const std::string> labels = {}) {
  std::vector<NerMention> out;
  for (const auto& sp : r.spans)
    if (labels.empty() || std::find(labels.begin(), labels.end(), sp.label) != labels.end())
      out.push_back({sp.label, sp.text});
  return out;
}

/// An extraction answer: one line per label, "label: value，value" with the values in the
/// order given, or "label: None" (no trailing newline).
inline std::string extraction_answer(std::span<const std::string> labels,
                                     std::span<const std::vector<std::string>> values) {
  SEQPAR_CHECK(labels.size() == values.size(), "extraction_answer: ", labels.size(), " labels but ",
               values.size(), " lists of values");
  std::string s;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (i) s += '\n';
    s.append(labels[i]).append(": ");
    for (std::size_t k = 0; k < values[i].size(); ++k)
      s.append(k ? list_separator : "").append(values[i][k]);
    if (values[i].empty()) s.append(no_mention);
  }
  return s;
}

/// The answer text of record `r` for one chunk of labels (no trailing newline).
inline std::string ner_answer(const NerRecord& r, std::span<const std::string> chunk) {
  std::vector<std::vector<std::string>> values(chunk.size());
  for (const auto& sp : r.spans)
    for (std::size_t i = 0; i < chunk.size(); ++i)
      if (sp.label == chunk[i]) values[i].push_back(sp.text);
  return extraction_answer(chunk, values);
}

/// What the model garbled in its answers, by kind: counted, never fatal, and never passed
/// over silently (docs/tasks.md, "Scores").
struct AnswerErrors {
  std::int64_t empty = 0;             // an answer of nothing but white space
  std::int64_t malformed = 0;         // a line that is not "label: ...", a class over lines
  std::int64_t unknown_label = 0;     // a label (line, class, relation) not in the prompt
  std::int64_t several_labels = 0;    // a classification answer naming more than one label
  std::int64_t span_not_in_text = 0;  // a span the text does not hold

  std::int64_t total() const {
    return empty + malformed + unknown_label + several_labels + span_not_in_text;
  }
  AnswerErrors& operator+=(const AnswerErrors& o) {
    empty += o.empty, malformed += o.malformed, unknown_label += o.unknown_label;
    several_labels += o.several_labels, span_not_in_text += o.span_not_in_text;
    return *this;
  }
  bool operator==(const AnswerErrors&) const = default;

  /// The kinds that occurred and their counts, as (name, count), in the order above.
  std::vector<std::pair<std::string, std::int64_t>> counts() const {
    std::vector<std::pair<std::string, std::int64_t>> out;
    for (const auto& [name, n] :
         {std::pair{"empty", empty}, std::pair{"malformed", malformed},
          std::pair{"unknown_label", unknown_label}, std::pair{"several_labels", several_labels},
          std::pair{"span_not_in_text", span_not_in_text}})
      if (n > 0) out.emplace_back(name, n);
    return out;
  }

  /// "3 (unknown_label 2, span_not_in_text 1)", or "0".
  std::string summary() const {
    std::string s = std::to_string(total());
    const auto c = counts();
    for (std::size_t i = 0; i < c.size(); ++i)
      s += (i ? ", " : " (") + c[i].first + " " + std::to_string(c[i].second);
    return c.empty() ? s : s + ")";
  }
};

/// An answer read back: its mentions, and the lines it could not use.
struct ParsedAnswer {
  std::vector<NerMention> mentions;
  std::int64_t bad_lines = 0;       // lines without "label: "
  std::int64_t unknown_labels = 0;  // lines whose label is not in the chunk
};

namespace detail {
inline std::string_view trim_spaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}
}  // namespace detail

/// Reads an answer back into (label, text) mentions. Lines are "label: span，span" or
/// "label: None"; a line whose label is not in `labels` (when given) or that has no ": "
/// is counted and ignored. A mention whose text holds the separator "，" comes back as
/// its pieces (the format cannot tell; docs/ner.md counts how rare that is).
inline ParsedAnswer parse_answer(std::string_view answer,
                                 std::span<const std::string> labels = {}) {
  ParsedAnswer out;
  while (!answer.empty()) {
    const std::size_t nl = answer.find('\n');
    const std::string_view line = detail::trim_spaces(answer.substr(0, nl));
    answer = nl == std::string_view::npos ? std::string_view{} : answer.substr(nl + 1);
    if (line.empty()) continue;
    std::size_t colon = line.find(": ");
    if (colon == std::string_view::npos) colon = line.find(':');
    if (colon == std::string_view::npos) {
      ++out.bad_lines;
      continue;
    }
    const std::string label(detail::trim_spaces(line.substr(0, colon)));
    if (label.empty()) {
      ++out.bad_lines;
      continue;
    }
    if (!labels.empty() && std::find(labels.begin(), labels.end(), label) == labels.end()) {
      ++out.unknown_labels;
      continue;
    }
    std::string_view value = detail::trim_spaces(line.substr(colon + 1));
    if (value == no_mention) continue;
    while (!value.empty()) {
      const std::size_t sep = value.find(list_separator);
      const std::string_view piece = detail::trim_spaces(value.substr(0, sep));
      if (!piece.empty()) out.mentions.push_back({label, std::string(piece)});
      value = sep == std::string_view::npos ? std::string_view{}
                                            : value.substr(sep + list_separator.size());
    }
  }
  return out;
}

}  // namespace seqpar::inline v0

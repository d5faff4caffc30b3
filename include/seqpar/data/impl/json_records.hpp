#pragma once
// The definitions of data/json_records.hpp: in its headers' units, or compiled once
// (core/separate_compilation.hpp).

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/data/json_reader.hpp"
#include "seqpar/data/json_records.hpp"
#include "seqpar/data/record.hpp"
#include "seqpar/io/detail/json_kind.hpp"

namespace seqpar::inline v0 {

namespace detail {

/// The mentions of a CLUENER "label" object.
inline std::string parse_ner_label(const nlohmann::json& label, NerRecord& r,
                                   const std::vector<std::size_t>& offsets, std::string& problem) {
  for (const auto& [type, entities] : label.items()) {
    if (const std::string p = label_problem(type); !p.empty()) {
      problem = "label '" + type + "' " + p;
      return "bad_label";
    }
    if (!entities.is_object()) {
      problem = "label '" + type + "' maps to " + json_kind(entities) +
                "; expected {entity: [[start, end], ...]}";
      return "bad_label_field";
    }
    for (const auto& [entity, spans] : entities.items()) {
      const std::string where = "label '" + type + "', entity '" + entity + "'";
      if (!spans.is_array() || spans.empty()) {
        problem = where + ": spans are " + json_kind(spans) + (spans.is_array() ? " (empty)" : "") +
                  "; expected [[start, end], ...]";
        return "bad_span";
      }
      for (const auto& s : spans) {
        CharSpan c;
        if (std::string reason = read_span(s, r.text, offsets, entity, where, c, problem);
            !reason.empty())
          return reason;
        r.spans.push_back({type, c.start, c.end, entity});
      }
    }
  }
  sort_spans(r.spans);
  return {};
}

/// The class of a classification record.
inline std::string parse_class_label(const nlohmann::json& label, ClassRecord& r,
                                     const std::vector<std::size_t>&, std::string& problem) {
  r.label = label.get<std::string>();
  if (const std::string p = label_problem(r.label); !p.empty()) {
    problem = "label '" + r.label + "' " + p;
    return "bad_label";
  }
  return {};
}

/// The triples of a relation record's "relations".
inline std::string parse_relations(const nlohmann::json& relations, RelationRecord& r,
                                   const std::vector<std::size_t>& offsets, std::string& problem) {
  if (!relations.is_array()) {
    problem = std::string("\"relations\" is ") + json_kind(relations) +
              "; expected [{\"head\", \"relation\", \"tail\", ...}, ...]";
    return "bad_relation";
  }
  std::size_t i = 0;
  for (const auto& item : relations) {
    const std::string where = "relation " + std::to_string(++i);
    if (!item.is_object()) {
      problem = where + " is " + json_kind(item) + "; expected an object";
      return "bad_relation";
    }
    RelationTriple t;
    for (const auto& [field, value] :
         {std::pair{"head", &t.head}, std::pair{"relation", &t.relation},
          std::pair{"tail", &t.tail}}) {
      const auto it = item.find(field);
      if (it == item.end() || !it->is_string() || it->get<std::string>().empty()) {
        problem = where + ": \"" + field + "\" is " +
                  (it == item.end()  ? std::string("missing")
                   : it->is_string() ? std::string("empty")
                                     : json_kind(*it)) +
                  "; expected a non-empty string";
        return "bad_relation";
      }
      *value = it->get<std::string>();
    }
    if (const std::string p = label_problem(t.relation); !p.empty()) {
      problem = where + ": relation '" + t.relation + "' " + p;
      return "bad_label";
    }
    for (const auto& [field, entity, span] : {std::tuple{"head_span", &t.head, &t.head_span},
                                              std::tuple{"tail_span", &t.tail, &t.tail_span}}) {
      const auto it = item.find(field);
      if (it != item.end() && !it->is_null()) {
        CharSpan c;
        const std::string at = where + " (" + field + " of '" + *entity + "')";
        if (std::string reason = read_span(*it, r.text, offsets, *entity, at, c, problem);
            !reason.empty())
          return reason;
        *span = c;
      } else if (r.text.find(*entity) == std::string::npos) {
        problem = where + ": '" + *entity + "' does not occur in the text";
        return "entity_not_in_text";
      }
    }
    r.relations.push_back(std::move(t));
  }
  return {};
}

}  // namespace detail

SEQPAR_DECL ClassDataset read_classification(const std::filesystem::path& path,
                                             const ReadOptions& options, JsonLayout layout) {
  return read_json_as<ClassRecord>(path, classification_json_shape, builtin_json_shapes,
                                   detail::parse_class_label, options, layout);
}

SEQPAR_DECL RelationDataset read_relations(const std::filesystem::path& path,
                                           const ReadOptions& options, JsonLayout layout) {
  return read_json_as<RelationRecord>(path, relation_json_shape, builtin_json_shapes,
                                      detail::parse_relations, options, layout, "relations");
}

SEQPAR_DECL TextDataset read_texts(const std::filesystem::path& path, const ReadOptions& options,
                                   JsonLayout layout) {
  const auto none = [](const nlohmann::json&, TextRecord&, const std::vector<std::size_t>&,
                       std::string&) { return std::string(); };
  return detail::read_json_records<TextRecord>(path, nullptr, {}, none, options, layout,
                                               "JSON records ({\"id\": ..., \"text\": ...})");
}

SEQPAR_DECL TextDataset read_text_lines(const std::filesystem::path& path,
                                        const ReadOptions& options) {
  const std::string file = path.string();
  const std::string s = detail::read_text_file(path, "text, one sentence a line");
  TextDataset d;
  d.report.file = file;
  detail::BadRecords bad(options, d.report);
  std::int64_t line = 0, record = 0;
  for (std::size_t b = 0; b < s.size();) {
    const std::size_t e = std::min(s.find('\n', b), s.size());
    std::string_view text(s.data() + b, e - b);
    b = e + 1;
    ++line;
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (text.empty()) {  // no sentence to answer, but never passed over in silence
      bad.skip("empty_line", file + ":" + std::to_string(line) + ": empty line");
      continue;
    }
    ++record;
    const std::string where = detail::record_where(file, line, record);
    if (const std::string why = detail::not_utf8(text, line); !why.empty()) {
      bad.add("invalid_utf8", where + ": " + why);
      continue;
    }
    TextRecord r;
    r.text = std::string(text);
    r.labelled = false;
    r.line = line;
    r.id.number = line;
    std::string problem;
    if (const std::string reason = detail::check_record(r, options, problem); !reason.empty()) {
      bad.add(reason, where + ": " + problem);
      continue;
    }
    d.records.push_back(std::move(r));
    ++d.report.records;
  }
  detail::require_records(d, "text, one sentence a line");
  return d;
}

}  // namespace seqpar::inline v0

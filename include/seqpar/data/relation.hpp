#pragma once
// Relation extraction in two prompts (docs/tasks.md): a 分类 prompt names the stated relations,
// then one 抽取 prompt a relation gives its heads and tails. Triples are canonical (passive
// 被X flipped, symmetric pairs in text order) so that a fact listed twice counts once.

#include <algorithm>
#include <cstdint>
#include <iomanip>
#include <map>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/data/classification.hpp"
#include "seqpar/data/metrics.hpp"
#include "seqpar/data/prompt.hpp"
#include "seqpar/data/record.hpp"

namespace seqpar::inline v0 {

/// The answer of the first step for a text that states no relation (the last label of its
/// 分类 prompt).
inline constexpr std::string_view no_relation = "无关系";

/// The labels of a relation's 抽取 prompt: its heads ("收购的主体") and its tails ("收购的客体").
inline std::string head_role(std::string_view relation) { return std::string(relation) + "的主体"; }
inline std::string tail_role(std::string_view relation) { return std::string(relation) + "的客体"; }

/// A relation as the scores compare it: its head, relation and tail strings.
struct Triple {
  std::string head, relation, tail;
  auto operator<=>(const Triple&) const = default;
};

/// The strings of `t`.
inline Triple triple_of(const RelationTriple& t) { return {t.head, t.relation, t.tail}; }

/// A text and the relations it states, as its file lists them (none: a negative).
struct RelationRecord : TextRecord {
  std::vector<RelationTriple> relations;
};

/// The relation names of a record's triples.
inline std::vector<std::string> record_labels(const RelationRecord& r) {
  std::vector<std::string> out;
  for (const auto& t : r.relations) out.push_back(t.relation);
  return out;
}

/// Relation records read from one file.
using RelationDataset = Dataset<RelationRecord>;

/// How the relations of a data set fold into the relations the prompts name.
struct RelationSchema {
  std::vector<std::string> relations;          // what the prompts name, sorted (active forms)
  std::map<std::string, std::string> passive;  // 被X -> X: a label that is X's inverse
  std::set<std::string> symmetric;             // relations that hold both ways

  /// The schema of `labels` (the data's relation names), with `records` (the training set)
  /// telling symmetric relations: a label 被X whose X is a label too is X's passive; of the
  /// others, one whose every triple (h, R, t) in `records` is also listed as (t, R, h) is
  /// symmetric, and the rest are directed.
  static RelationSchema of(std::span<const std::string> labels,
                           std::span<const RelationRecord> records) {
    RelationSchema s;
    const std::set<std::string> all(labels.begin(), labels.end());
    SEQPAR_CHECK(!all.contains(std::string(no_relation)), "RelationSchema: a relation is called '",
                 no_relation, "', the answer that says a text states none");
    for (const auto& l : all) {
      SEQPAR_CHECK(detail::label_problem(l).empty(), "RelationSchema: relation '", l, "' ",
                   detail::label_problem(l));
      const std::string_view bei = "被";
      if (l.starts_with(bei) && all.contains(l.substr(bei.size())))
        s.passive[l] = l.substr(bei.size());
      else
        s.relations.push_back(l);
    }
    std::map<std::string, bool> both_ways;  // relation without a passive -> every pair mirrored
    for (const auto& r : records) {
      std::set<std::tuple<std::string, std::string, std::string>> listed;
      for (const auto& t : r.relations) listed.emplace(t.relation, t.head, t.tail);
      for (const auto& [rel, h, t] : listed) {
        if (s.passive.contains(rel) || !all.contains(rel)) continue;
        auto [it, fresh] = both_ways.try_emplace(rel, true);
        it->second = it->second && listed.contains({rel, t, h});
      }
    }
    for (const auto& [rel, mirrored] : both_ways) {
      const bool has_passive = all.contains("被" + rel);
      if (mirrored && !has_passive) s.symmetric.insert(rel);
    }
    return s;
  }

  /// Where `entity` first occurs in `text` (bytes; npos: nowhere), for ordering.
  static std::size_t first_at(std::string_view text, const std::string& entity) {
    return text.find(entity);
  }

  /// `t` (of the record whose text is `text`) in canonical form: a passive turned active
  /// with head and tail swapped; a symmetric relation's entities in the order they first
  /// occur in the text (then the shorter first, then byte order); spans go with their
  /// entities.
  RelationTriple canonical(std::string_view text, const RelationTriple& t) const {
    RelationTriple c = t;
    if (const auto it = passive.find(t.relation); it != passive.end()) {
      c.relation = it->second;
      std::swap(c.head, c.tail);
      std::swap(c.head_span, c.tail_span);
    } else if (symmetric.contains(t.relation)) {
      const auto key = [&](const std::string& e) {
        return std::tuple{first_at(text, e), e.size(), std::string_view(e)};
      };
      if (key(c.tail) < key(c.head)) {
        std::swap(c.head, c.tail);
        std::swap(c.head_span, c.tail_span);
      }
    }
    return c;
  }

  /// The canonical triples of `r`, each once (with the spans of its first listing), ordered
  /// by relation and then by where head and tail first occur.
  std::vector<RelationTriple> canonical_relations(std::string_view text,
                                                  std::span<const RelationTriple> triples) const {
    std::vector<RelationTriple> out;
    std::set<Triple> seen;
    for (const auto& t : triples) {
      RelationTriple c = canonical(text, t);
      if (seen.insert(triple_of(c)).second) out.push_back(std::move(c));
    }
    std::stable_sort(out.begin(), out.end(), [&](const RelationTriple& a, const RelationTriple& b) {
      return std::tuple{a.relation, first_at(text, a.head), first_at(text, a.tail), a.head,
                        a.tail} <
             std::tuple{b.relation, first_at(text, b.head), first_at(text, b.tail), b.head, b.tail};
    });
    return out;
  }

  /// A canonical triple as the data lists it: with its passive (t, 被X, h), or mirrored
  /// (t, R, h) for a symmetric relation, or alone.
  std::vector<RelationTriple> listed(const RelationTriple& c) const {
    std::vector<RelationTriple> out{c};
    RelationTriple back{c.tail, c.relation, c.head, c.tail_span, c.head_span};
    if (symmetric.contains(c.relation)) {
      out.push_back(std::move(back));
    } else if (passive.contains("被" + c.relation)) {
      back.relation = "被" + c.relation;
      out.push_back(std::move(back));
    }
    return out;
  }

  /// The labels of the first step's 分类 prompt: the relations, then 无关系.
  std::vector<std::string> type_labels() const {
    std::vector<std::string> l = relations;
    l.emplace_back(no_relation);
    return l;
  }

  /// "relations=a,b;passive=被a>a;symmetric=b" (part of a token cache's key).
  std::string describe() const {
    std::ostringstream os;
    os << "relations=";
    for (std::size_t i = 0; i < relations.size(); ++i) os << (i ? "," : "") << relations[i];
    os << ";passive=";
    bool first = true;
    for (const auto& [p, a] : passive)
      os << (std::exchange(first, false) ? "" : ",") << p << '>' << a;
    os << ";symmetric=";
    first = true;
    for (const auto& s : symmetric) os << (std::exchange(first, false) ? "" : ",") << s;
    return os.str();
  }
};

/// The first step's prompt: 分类 over the schema's relations and 无关系.
inline std::string relation_types_prompt(std::string_view text, const RelationSchema& s) {
  return classification_prompt(text, s.type_labels());
}

/// The first step's answer for canonical triples: their relations in the schema's order,
/// joined by '，', or 无关系.
inline std::string relation_types_answer(const RelationSchema& s,
                                         std::span<const RelationTriple> canonical) {
  std::string out;
  for (const auto& rel : s.relations)
    if (std::any_of(canonical.begin(), canonical.end(),
                    [&](const RelationTriple& t) { return t.relation == rel; }))
      out.append(out.empty() ? "" : list_separator).append(rel);
  return out.empty() ? std::string(no_relation) : out;
}

/// The first step's answer read back: the relations it names (in the schema's order).
/// Errors: nothing (empty), several lines or an extraction line (malformed), a piece that
/// is not a relation of the schema or 无关系 (unknown_label, one per piece). 无关系 beside
/// relations is ignored.
struct RelationTypes {
  std::vector<std::string> relations;
  AnswerErrors errors;
};

inline RelationTypes parse_relation_types(std::string_view answer, const RelationSchema& s) {
  RelationTypes out;
  const std::string_view a = detail::trim_answer(answer);
  if (a.empty()) {
    out.errors.empty = 1;
    return out;
  }
  if (a.find('\n') != std::string_view::npos || a.find(": ") != std::string_view::npos) {
    out.errors.malformed = 1;
    return out;
  }
  std::set<std::string_view> named;
  for (const std::string_view piece : detail::split_labels(a)) {
    if (piece.empty() || piece == no_relation) continue;
    if (std::find(s.relations.begin(), s.relations.end(), piece) != s.relations.end())
      named.insert(piece);
    else
      ++out.errors.unknown_label;
  }
  for (const auto& rel : s.relations)
    if (named.contains(rel)) out.relations.push_back(rel);
  return out;
}

/// The second step's prompt for `relation`: 抽取 with its head and tail roles.
inline std::string relation_prompt(std::string_view text, std::string_view relation) {
  const std::vector<std::string> roles{head_role(relation), tail_role(relation)};
  return seqgpt_prompt(text, Instruction::extraction, roles);
}

/// The second step's answer for `relation` from canonical triples: its heads and its tails,
/// the i-th head with the i-th tail, in the triples' order.
inline std::string relation_answer(std::string_view relation,
                                   std::span<const RelationTriple> canonical) {
  const std::vector<std::string> roles{head_role(relation), tail_role(relation)};
  std::vector<std::vector<std::string>> values(2);
  for (const auto& t : canonical)
    if (t.relation == relation) {
      values[0].push_back(t.head);
      values[1].push_back(t.tail);
    }
  return extraction_answer(roles, values);
}

/// The second step's answer read back: the (head, tail) pairs of `relation`. As many heads
/// as tails pair in order; otherwise every head pairs with every tail. Errors as
/// parse_answer's lines (malformed, unknown_label), or nothing at all (empty).
struct RelationPairs {
  std::vector<std::pair<std::string, std::string>> pairs;
  AnswerErrors errors;
};

inline RelationPairs parse_relation_answer(std::string_view answer, std::string_view relation) {
  RelationPairs out;
  if (detail::trim_answer(answer).empty()) {
    out.errors.empty = 1;
    return out;
  }
  const std::vector<std::string> roles{head_role(relation), tail_role(relation)};
  const ParsedAnswer p = parse_answer(answer, roles);
  out.errors.malformed = p.bad_lines;
  out.errors.unknown_label = p.unknown_labels;
  std::vector<std::string> heads, tails;
  for (const auto& m : p.mentions) (m.label == roles[0] ? heads : tails).push_back(m.text);
  if (heads.size() == tails.size()) {
    for (std::size_t i = 0; i < heads.size(); ++i) out.pairs.emplace_back(heads[i], tails[i]);
  } else {
    for (const auto& h : heads)
      for (const auto& t : tails) out.pairs.emplace_back(h, t);
  }
  return out;
}

/// Triple-level micro precision, recall and F1 over records, and the same per relation.
/// Within a record predicted and gold triples are sets: a triple counts once however often
/// it is answered.
class RelationScore {
 public:
  void add(std::span<const Triple> predicted, std::span<const Triple> gold) {
    const std::set<Triple> p(predicted.begin(), predicted.end()), g(gold.begin(), gold.end());
    for (const auto& t : p) {
      auto& c = by_relation_[t.relation];
      ++c.predicted, ++micro_.predicted;
      if (g.contains(t)) ++c.correct, ++micro_.correct;
    }
    for (const auto& t : g) ++by_relation_[t.relation].gold, ++micro_.gold;
  }
  const PrfCounts& micro() const { return micro_; }
  const std::map<std::string, PrfCounts>& by_relation() const { return by_relation_; }
  std::string summary() const {
    std::ostringstream os;
    os << std::fixed << std::setprecision(4) << "P " << micro_.precision() << " R "
       << micro_.recall() << " F1 " << micro_.f1() << " (correct " << micro_.correct
       << ", predicted " << micro_.predicted << ", gold " << micro_.gold << ")";
    return os.str();
  }

 private:
  PrfCounts micro_;
  std::map<std::string, PrfCounts> by_relation_;
};

}  // namespace seqpar::inline v0

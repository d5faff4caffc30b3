#pragma once
// Entity-level micro precision, recall and F1. A predicted mention is correct when its
// label and text equal a gold mention's. Mentions are compared as (label, text)
// multisets per prompt: a text that occurs twice in the sentence must be predicted twice
// to get both; where it occurs does not matter (the answer carries no positions).

#include <algorithm>
#include <cstdint>
#include <map>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "seqpar/data/prompt.hpp"

namespace seqpar::inline v0 {

/// Counts behind precision, recall and F1.
struct PrfCounts {
  std::int64_t correct = 0, predicted = 0, gold = 0;

  double precision() const {
    return predicted > 0 ? static_cast<double>(correct) / static_cast<double>(predicted) : 0.0;
  }
  double recall() const {
    return gold > 0 ? static_cast<double>(correct) / static_cast<double>(gold) : 0.0;
  }
  double f1() const {
    const double p = precision(), r = recall();
    return p + r > 0 ? 2 * p * r / (p + r) : 0.0;
  }
  PrfCounts& operator+=(const PrfCounts& o) {
    correct += o.correct, predicted += o.predicted, gold += o.gold;
    return *this;
  }
  bool operator==(const PrfCounts&) const = default;
};

/// The size of the multiset intersection of `predicted` and `gold`, and their sizes.
inline PrfCounts match_mentions(std::span<const NerMention> predicted,
                                std::span<const NerMention> gold) {
  std::vector<NerMention> p(predicted.begin(), predicted.end()), g(gold.begin(), gold.end());
  std::sort(p.begin(), p.end());
  std::sort(g.begin(), g.end());
  PrfCounts c{0, static_cast<std::int64_t>(p.size()), static_cast<std::int64_t>(g.size())};
  for (std::size_t i = 0, j = 0; i < p.size() && j < g.size();) {
    if (p[i] < g[j]) {
      ++i;
    } else if (g[j] < p[i]) {
      ++j;
    } else {
      ++c.correct, ++i, ++j;
    }
  }
  return c;
}

/// Micro-averaged scores over many prompts, and the same per label.
class NerScore {
 public:
  /// Adds one prompt's predicted and gold mentions.
  void add(std::span<const NerMention> predicted, std::span<const NerMention> gold) {
    total_ += match_mentions(predicted, gold);
    std::map<std::string, std::vector<NerMention>> p, g;
    for (const auto& m : predicted) p[m.label].push_back(m);
    for (const auto& m : gold) g[m.label].push_back(m);
    for (const auto& [label, ms] : p) by_label_[label] += match_mentions(ms, g[label]);
    for (const auto& [label, ms] : g)
      if (!p.contains(label)) by_label_[label] += match_mentions({}, ms);
  }

  const PrfCounts& micro() const { return total_; }
  const std::map<std::string, PrfCounts>& by_label() const { return by_label_; }

  /// "P 0.812 R 0.790 F1 0.801 (correct 2431, predicted 2994, gold 3072)".
  std::string summary() const {
    std::ostringstream os;
    os.setf(std::ios::fixed);
    os.precision(4);
    os << "P " << total_.precision() << " R " << total_.recall() << " F1 " << total_.f1()
       << " (correct " << total_.correct << ", predicted " << total_.predicted << ", gold "
       << total_.gold << ")";
    return os.str();
  }

 private:
  PrfCounts total_;
  std::map<std::string, PrfCounts> by_label_;
};

}  // namespace seqpar::inline v0

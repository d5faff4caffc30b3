#pragma once
// A seeded sample of a split's records, stratified by label: what an evaluation during
// training scores when the whole split would take too long. Never the first records: a file
// grouped by label would give a few labels only.

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "seqpar/core/rng.hpp"

namespace seqpar::inline v0 {

/// Which records of a split an evaluation takes.
struct RecordSample {
  std::vector<std::size_t> indices;  // ascending
  std::size_t of = 0;                // the split's records
  std::size_t strata = 0;            // label groups the sample was drawn from (0: the whole split)
  std::uint64_t seed = 0;

  bool whole() const { return indices.size() == of; }
  /// "100 of 1,311 records (seed 42, stratified over 31 labels)", "all 200 records".
  std::string describe() const {
    if (whole()) return "all " + std::to_string(of) + " records";
    return std::to_string(indices.size()) + " of " + std::to_string(of) + " records (seed " +
           std::to_string(seed) + ", stratified over " + std::to_string(strata) + " labels)";
  }
  nlohmann::json json() const {
    nlohmann::json j = {{"size", indices.size()}, {"of", of}};
    if (!whole()) j.update({{"seed", seed}, {"strata", strata}, {"stratified_by", "label"}});
    return j;
  }
};

/// `n` of the records whose labels are `labels[i]` (n = 0 or n >= their count: all), drawn
/// with `seed`. Each record belongs to the stratum of its rarest label in the split (records
/// without labels form one of their own); a stratum gives its share of n by largest
/// remainders, and at least one record while n allows, so rare labels are scored too.
inline RecordSample stratified_sample(const std::vector<std::vector<std::string>>& labels,
                                      std::size_t n, std::uint64_t seed) {
  RecordSample s;
  s.of = labels.size();
  s.seed = seed;
  if (n == 0 || n >= labels.size()) {
    s.indices.resize(labels.size());
    for (std::size_t i = 0; i < labels.size(); ++i) s.indices[i] = i;
    return s;
  }
  std::map<std::string, std::size_t> count;
  for (const auto& ls : labels)
    for (const auto& l : ls) ++count[l];
  // A stratum per rarest label (ties: the first in label order); "" holds the unlabelled.
  std::map<std::string, std::vector<std::size_t>> strata;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const std::string* rarest = nullptr;
    for (const auto& l : labels[i])
      if (!rarest || count[l] < count[*rarest] || (count[l] == count[*rarest] && l < *rarest))
        rarest = &l;
    strata[rarest ? *rarest : std::string()].push_back(i);
  }
  s.strata = strata.size();
  // Shares of n: one each while n allows (rarest strata first), the rest by proportion.
  struct Share {
    std::vector<std::size_t>* members;
    std::size_t take = 0;
    double remainder = 0;
  };
  std::vector<Share> shares;
  for (auto& [label, members] : strata) shares.push_back({&members});
  std::stable_sort(shares.begin(), shares.end(), [](const Share& a, const Share& b) {
    return a.members->size() < b.members->size();
  });
  std::size_t left = n;
  for (auto& sh : shares)
    if (left > 0) {
      sh.take = 1;
      --left;
    }
  const double total = static_cast<double>(labels.size());
  std::size_t given = 0;
  for (auto& sh : shares) {
    const double room = static_cast<double>(sh.members->size() - sh.take);
    const double want =
        std::min(room, static_cast<double>(left) * static_cast<double>(sh.members->size()) / total);
    const auto whole = static_cast<std::size_t>(want);
    sh.take += whole;
    given += whole;
    sh.remainder = want - static_cast<double>(whole);
  }
  // The records still owed go to the largest remainders, then to any stratum with room.
  std::vector<Share*> order;
  for (auto& sh : shares) order.push_back(&sh);
  std::stable_sort(order.begin(), order.end(),
                   [](const Share* a, const Share* b) { return a->remainder > b->remainder; });
  for (std::size_t pass = 0; pass < 2 && given < left; ++pass)
    for (Share* sh : order)
      if (given < left && sh->take < sh->members->size() && (pass == 1 || sh->remainder > 0)) {
        ++sh->take;
        ++given;
        sh->remainder = 0;
      }
  // Within a stratum, the records with the smallest keyed draws.
  const CounterRng rng(seed, "seqpar.data.sample");
  for (auto& sh : shares) {
    std::vector<std::size_t> m = *sh.members;
    std::stable_sort(m.begin(), m.end(),
                     [&](std::size_t a, std::size_t b) { return rng.bits(a) < rng.bits(b); });
    s.indices.insert(s.indices.end(), m.begin(), m.begin() + static_cast<std::ptrdiff_t>(sh.take));
  }
  std::sort(s.indices.begin(), s.indices.end());
  return s;
}

}  // namespace seqpar::inline v0

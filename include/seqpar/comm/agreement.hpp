#pragma once
// require_agreement: the start-up check that every rank of a run was given the same plan,
// model, options, data and checkpoint. Each rank passes what must be equal as name/value
// pairs; the collective is safe whatever they hold (all_gather_text), and when any differs,
// every rank throws the same seqpar::Error naming the ranks and the values that differ.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "seqpar/comm/communicator.hpp"
#include "seqpar/comm/text.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::inline v0 {

/// What every rank must have alike: (name, value) pairs, e.g. {"plan", "tp2"},
/// {"batch_size", "8"}, {"train_data.sha256", "..."}.
using AgreedValues = std::vector<std::pair<std::string, std::string>>;

namespace detail::agreement {

// The pairs as one text: each string as its length (8 bytes, little-endian) and its bytes.
inline std::string encode(const AgreedValues& values) {
  std::string out;
  const auto add = [&out](const std::string& s) {
    for (int i = 0; i < 8; ++i)
      out.push_back(static_cast<char>((static_cast<std::uint64_t>(s.size()) >> (8 * i)) & 0xff));
    out += s;
  };
  for (const auto& [name, value] : values) {
    add(name);
    add(value);
  }
  return out;
}

inline AgreedValues decode(std::string_view text) {
  AgreedValues out;
  const auto take = [&text](std::string& s) {
    if (text.size() < 8) return false;
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(text[i]);
    text.remove_prefix(8);
    if (n > text.size()) return false;
    s.assign(text.substr(0, n));
    text.remove_prefix(n);
    return true;
  };
  std::string name, value;
  while (take(name) && take(value)) out.emplace_back(name, value);
  return out;
}

// "rank 3" or "ranks 0-2, 5".
inline std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    s += (s.empty() ? "" : ", ") + std::to_string(ranks[i]);
    if (j > i) s += (j == i + 1 ? ", " : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return (ranks.size() > 1 ? "ranks " : "rank ") + s;
}

// A value as messages show it: quoted, long ones cut.
inline std::string shown(const std::string& v) {
  constexpr std::size_t limit = 120;
  if (v.size() <= limit) return "'" + v + "'";
  return "'" + v.substr(0, limit) + "...' (" + std::to_string(v.size()) + " bytes)";
}

// The message naming, for every name whose values differ, which ranks hold which value.
inline std::string differences(const std::vector<AgreedValues>& per_rank) {
  std::vector<std::string> names;  // in order of first appearance, rank 0 first
  for (const auto& values : per_rank)
    for (const auto& [name, value] : values)
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  std::string out;
  for (const auto& name : names) {
    // each rank's value of `name`: its text, "(not given)" or "(given twice: ...)"
    std::vector<std::string> seen(per_rank.size());
    for (std::size_t r = 0; r < per_rank.size(); ++r) {
      std::vector<std::string> mine;
      for (const auto& [n, v] : per_rank[r])
        if (n == name) mine.push_back(shown(v));
      if (mine.empty())
        seen[r] = "(not given)";
      else if (mine.size() == 1)
        seen[r] = mine[0];
      else
        seen[r] = "(given " + std::to_string(mine.size()) + " times: " + mine[0] + ", " + mine[1] +
                  (mine.size() > 2 ? ", ..." : "") + ")";
    }
    if (std::all_of(seen.begin(), seen.end(), [&](const auto& v) { return v == seen[0]; }) &&
        seen[0].front() == '\'')
      continue;
    std::vector<std::pair<std::string, std::vector<int>>> groups;  // value -> ranks
    for (std::size_t r = 0; r < seen.size(); ++r) {
      auto g =
          std::find_if(groups.begin(), groups.end(), [&](auto& x) { return x.first == seen[r]; });
      if (g == groups.end()) g = groups.insert(groups.end(), {seen[r], {}});
      g->second.push_back(static_cast<int>(r));
    }
    out += "\n  " + name + ":";
    for (std::size_t g = 0; g < groups.size(); ++g)
      out += (g ? "; " : " ") + rank_list(groups[g].second) + " " + groups[g].first;
  }
  return out;
}

}  // namespace detail::agreement

/// Collective over `comm`: every rank passes `values`, and every rank returns only if all
/// passed the same pairs (in any order). Otherwise every rank throws the same Error:
///   ranks disagree on what must be equal on all 2 of them (a plan, an option, the data):
///     batch_size: rank 0 '8'; rank 1 '16'
/// Safe whatever the ranks pass: the first exchange has one size on every rank. Call it
/// before anything whose shape depends on those values (a Trainer's plan, the data).
template <class C>
void require_agreement(C& comm, const AgreedValues& values) {
  namespace a = detail::agreement;
  const int n = comm.size();
  const std::vector<std::string> texts = all_gather_text(comm, a::encode(values));
  std::vector<AgreedValues> per_rank;
  for (const auto& t : texts) per_rank.push_back(a::decode(t));
  // Every rank holds every rank's pairs: the same verdict and message everywhere. The order
  // of the pairs does not matter.
  const auto sorted = [](AgreedValues v) {
    std::stable_sort(v.begin(), v.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    return v;
  };
  const AgreedValues first = sorted(per_rank[0]);
  bool same = true;
  for (int r = 1; r < n && same; ++r) same = sorted(per_rank[static_cast<std::size_t>(r)]) == first;
  if (same) return;
  const std::string diff = a::differences(per_rank);
  detail::fail("ranks disagree on what must be equal on all ", n,
               " of them (a plan, an option, the data, the checkpoint):", diff);
}

}  // namespace seqpar::inline v0

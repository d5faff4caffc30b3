#pragma once
// Text between ranks: one rank's text on every rank, every rank's text on every rank, and
// decisions one rank makes (or each rank's own verdicts) that every rank follows alike.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "seqpar/comm/communicator.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::inline v0 {

/// Collective: `text` of rank `root` on every rank of `comm`.
template <class C>
void broadcast_text(C& comm, std::string& text, int root = 0) {
  auto n = static_cast<std::int64_t>(text.size());
  comm.broadcast(&n, 1, root);
  // Sent as 8-byte words: every communicator moves them, whatever byte types it has.
  std::vector<std::int64_t> words(static_cast<std::size_t>((n + 7) / 8));
  if (comm.rank() == root)
    std::copy(text.begin(), text.end(), reinterpret_cast<char*>(words.data()));
  comm.broadcast(words.data(), words.size(), root);
  text.assign(reinterpret_cast<const char*>(words.data()), static_cast<std::size_t>(n));
}

/// Collective: every rank's `text`, in rank order, on every rank of `comm`. Safe whatever
/// the ranks pass: the longest length is agreed first, so every message has one size.
template <class C>
std::vector<std::string> all_gather_text(C& comm, const std::string& text) {
  auto longest = static_cast<std::int64_t>(text.size());
  comm.all_reduce(&longest, 1, ReduceOp::max);
  const std::size_t words = static_cast<std::size_t>((longest + 7) / 8) + 1;  // + the length
  std::vector<std::int64_t> mine(words, 0), all(words * static_cast<std::size_t>(comm.size()));
  mine[0] = static_cast<std::int64_t>(text.size());
  std::copy(text.begin(), text.end(), reinterpret_cast<char*>(mine.data() + 1));
  comm.all_gather(mine.data(), all.data(), words);
  std::vector<std::string> out;
  for (std::size_t r = 0; r < static_cast<std::size_t>(comm.size()); ++r) {
    const std::int64_t* w = all.data() + r * words;
    out.emplace_back(reinterpret_cast<const char*>(w + 1), static_cast<std::size_t>(w[0]));
  }
  return out;
}

/// An error every rank of a run throws alike (a decision every rank follows): one rank need
/// say it, and no rank need end the others.
struct Refusal : Error {
  using Error::Error;
};

/// Collective: rank 0 runs `decide` (which may throw seqpar::Error: a refusal) and every
/// rank learns its outcome: the same Refusal on every rank when it refused, else the text
/// `decide` returned (a checkpoint's path, a choice only rank 0 can make).
template <class C, class F>
std::string decide_on_writer(C& comm, F&& decide) {
  std::string outcome, refused;
  if (comm.rank() == 0) {
    try {
      outcome = decide();
    } catch (const Error& e) {
      refused = e.what();
    }
  }
  if (comm.size() > 1) broadcast_text(comm, refused);
  if (!refused.empty()) throw Refusal(refused);
  if (comm.size() > 1) broadcast_text(comm, outcome);
  return outcome;
}

/// Collective: every rank runs its own `check` (which may throw seqpar::Error); when any
/// rank's fails, every rank throws the same Refusal, so a run is refused on every rank or on
/// none. The message is the lowest failing rank's, named by rank where the ranks differ.
template <class C, class F>
void refuse_together(C& comm, F&& check) {
  std::string mine;
  try {
    check();
  } catch (const Error& e) {
    mine = e.what();
  }
  if (comm.size() == 1) {
    if (!mine.empty()) throw Refusal(mine);
    return;
  }
  const auto all = all_gather_text(comm, mine);
  const auto first = std::find_if(all.begin(), all.end(), [](auto& t) { return !t.empty(); });
  if (first == all.end()) return;
  const bool alike = std::all_of(all.begin(), all.end(), [&](auto& t) { return t == *first; });
  throw Refusal(alike ? *first : "rank " + std::to_string(first - all.begin()) + ": " + *first);
}

}  // namespace seqpar::inline v0

#pragma once
// What a resume must find unchanged (RunKey), compared with a checkpoint's metadata.

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "seqpar/core/error.hpp"

namespace seqpar::inline v0 {

/// An entry of a run's checkpoint metadata that a resume compares with the run that resumes
/// it. `order`: a change also changes the examples or their order (a data position of the
/// checkpoint means nothing then).
struct RunKey {
  std::string key, value;
  bool order = false;
};

/// What differs between a checkpoint's metadata and `keys`, one "key: checkpoint 'a', this
/// run 'b'" each; `order` is set when one of them changes the data order.
inline std::vector<std::string> changed_keys(const std::map<std::string, std::string>& meta,
                                             const std::vector<RunKey>& keys, bool* order) {
  std::vector<std::string> out;
  for (const auto& k : keys) {
    const auto it = meta.find(k.key);
    if (it != meta.end() && it->second == k.value) continue;
    out.push_back(k.key + ": checkpoint " +
                  (it == meta.end() ? std::string("(not recorded)") : "'" + it->second + "'") +
                  ", this run '" + k.value + "'");
    if (order) *order = *order || k.order;
  }
  return out;
}

/// Refuses to resume `checkpoint` (its metadata `meta`) with `keys` that differ, listing
/// them, unless `allow` (then returns them: the run goes on with each reported).
inline std::vector<std::string> check_resume_keys(const std::filesystem::path& checkpoint,
                                                  const std::map<std::string, std::string>& meta,
                                                  const std::vector<RunKey>& keys, bool allow,
                                                  bool* order = nullptr) {
  const auto changed = changed_keys(meta, keys, order);
  if (changed.empty() || allow) return changed;
  std::string list;
  for (const auto& c : changed) list += "\n  " + c;
  detail::fail(checkpoint.string(),
               ": this run differs from the one that wrote the checkpoint:", list,
               "\nresume with the same data and options, or set RunSpec::allow_changed to "
               "continue anyway");
}

}  // namespace seqpar::inline v0

#pragma once
// Keys given twice in one JSON object, caught while nlohmann's parser runs (its DOM keeps only
// the last of a repeated key): UniqueKeys for a parser callback of one's own (the safetensors
// header's), parse_json_unique_keys for a whole file (a DeepSpeed configuration, refused as
// DeepSpeed's reader refuses it).

#include <nlohmann/json.hpp>

#include <cstddef>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/core/error.hpp"

namespace seqpar::inline v0::detail {

/// The keys of every open object as the parser reports them.
class UniqueKeys {
 public:
  /// Call from a parser callback with its arguments; returns the path of a key repeated in
  /// its object (the top-level key first, the repeated key last), or nullptr.
  const std::vector<std::string>* see(int depth, nlohmann::json::parse_event_t event,
                                      const nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    // The keys of an object opened at depth d arrive at depth d + 1.
    const auto d = static_cast<std::size_t>(depth);
    if (event == E::object_start) {
      if (keys_.size() < d + 2) keys_.resize(d + 2);
      keys_[d + 1].clear();
    } else if (event == E::key) {
      path_.resize(d);
      path_.back() = parsed.get_ref<const std::string&>();
      if (!keys_[d].insert(path_.back()).second) return &path_;
    }
    return nullptr;
  }

 private:
  std::vector<std::set<std::string>> keys_ = std::vector<std::set<std::string>>(2);
  std::vector<std::string> path_;  // path_[i]: the key at depth i + 1
};

/// The JSON of `text` (the content of `file`); throws naming the file and a repeated key (its
/// path from the top, "fp16.enabled") or the syntax error.
inline nlohmann::json parse_json_unique_keys(std::string_view text, const std::string& file) {
  UniqueKeys keys;
  const nlohmann::json::parser_callback_t on_event =
      [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        if (const auto* path = keys.see(depth, event, parsed)) {
          std::string where;
          for (const auto& k : *path) where += (where.empty() ? "" : ".") + k;
          fail(file, ": key '", where, "' appears twice in one object; expected each key once");
        }
        return true;
      };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), on_event);
  } catch (const nlohmann::json::parse_error& e) {
    fail(file, ": not valid JSON (", e.what(), ")");
  }
}

}  // namespace seqpar::inline v0::detail

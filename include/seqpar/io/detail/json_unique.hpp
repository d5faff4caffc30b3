#pragma once
// parse_json_unique_keys: JSON text parsed with every object's keys checked to be unique (the
// DOM keeps only the last of a repeated key, so repeats are caught while parsing), as
// DeepSpeed's own reader refuses them.

#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/core/error.hpp"

namespace seqpar::inline v0::detail {

/// The JSON of `text` (the content of `file`); throws naming the file and the repeated key
/// (its path from the top, "fp16.enabled") or the syntax error.
inline nlohmann::json parse_json_unique_keys(std::string_view text, const std::string& file) {
  // The keys of an object opened at depth d arrive at depth d + 1; path[d] is the key the
  // value at depth d + 1 sits under.
  std::vector<std::set<std::string>> keys(1);
  std::vector<std::string> path(1);
  const nlohmann::json::parser_callback_t on_event =
      [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        using E = nlohmann::json::parse_event_t;
        const auto d = static_cast<std::size_t>(depth);
        if (event == E::object_start) {
          if (keys.size() < d + 2) keys.resize(d + 2), path.resize(d + 2);
          keys[d + 1].clear();
        } else if (event == E::key) {
          const auto& k = parsed.get_ref<const std::string&>();
          path[d] = k;
          if (!keys[d].insert(k).second) {
            std::string where;
            for (std::size_t i = 1; i <= d; ++i) where += (i > 1 ? "." : "") + path[i];
            fail(file, ": key '", where, "' appears twice in one object; expected each key once");
          }
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

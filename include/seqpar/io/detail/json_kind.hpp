#pragma once
// json_kind: what a JSON value is, as the readers' messages say it ("an array", "null").
// For the definitions of io/ and data/ (impl/), which include nlohmann/json.hpp.

#include <nlohmann/json.hpp>

namespace seqpar::inline v0::detail {

inline const char* json_kind(const nlohmann::json& v) {
  if (v.is_number_float()) return "a floating-point number";
  if (v.is_number_integer()) return "an integer";
  switch (v.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::string: return "a string";
    case nlohmann::json::value_t::boolean: return "a boolean";
    default: return "a value of another kind";
  }
}

}  // namespace seqpar::inline v0::detail

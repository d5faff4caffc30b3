#pragma once
// Checks that a field list (core/fields.hpp) carries each agreed field into an agreement:
// each one changed alone must change the value of its own name and of no other.
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "seqpar/comm/agreement.hpp"
#include "seqpar/core/fields.hpp"

namespace seqpar::test {

// `v` changed: numbers up by one, flags flipped, texts, paths and lists longer; a type
// without a rule here returns false (the check then names its field).
template <class V>
bool change(V& v) {
  if constexpr (std::is_same_v<V, bool>) {
    v = !v;
  } else if constexpr (std::is_enum_v<V>) {
    v = static_cast<V>(static_cast<long long>(v) + 1);
  } else if constexpr (std::is_arithmetic_v<V>) {
    v = static_cast<V>(v + 1);
  } else if constexpr (std::is_same_v<V, std::string> || std::is_same_v<V, std::filesystem::path>) {
    v += "x";
  } else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
    v.push_back("x");
  } else if constexpr (requires { v.push_back(typename V::value_type{}); }) {  // a list
    v.push_back(typename V::value_type{});
  } else if constexpr (requires {
                         typename V::value_type;
                         v.has_value();
                       }) {  // an optional
    auto x = v.value_or(typename V::value_type{});
    if (v && !change(x)) return false;
    v = x;                                       // unset becomes set; set becomes another value
  } else if constexpr (requires { v.asked; }) {  // a PlanRequest
    v.asked += "x";
  } else if constexpr (requires { v.hysteresis; }) {  // a LossScaleOptions
    ++v.hysteresis;
  } else {
    return false;
  }
  return true;
}

// The names whose value differs between two agreements (one listed by one side only counts).
inline std::set<std::string> differing(const AgreedValues& a, const AgreedValues& b) {
  std::set<std::string> out;
  for (const auto& x : a)
    if (std::find(b.begin(), b.end(), x) == b.end()) out.insert(x.first);
  for (const auto& x : b)
    if (std::find(a.begin(), a.end(), x) == a.end()) out.insert(x.first);
  return out;
}

// The agreed fields of `list` whose change alone does not change exactly the value named
// `prefix + name` in values(a); empty when every one reaches the agreement.
template <class A, class List, class Values>
std::vector<std::string> agreed_fields_missing(const A& a, const List& list, Values values,
                                               const std::string& prefix = "") {
  std::vector<std::string> missing;
  const auto base = values(a);
  std::apply(
      [&](const auto&... fs) {
        (
            [&](const auto& f) {
              if constexpr (std::remove_cvref_t<decltype(f)>::use == FieldUse::agreed) {
                A changed = a;
                const std::string name = prefix + std::string(f.name);
                if (!change(changed.*(f.member)) ||
                    differing(base, values(changed)) != std::set<std::string>{name})
                  missing.push_back(name);
              }
            }(fs),
            ...);
      },
      list);
  return missing;
}

}  // namespace seqpar::test

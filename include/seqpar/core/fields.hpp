#pragma once
// The fields of an aggregate, counted (aggregate_fields) and listed by name with how a run's
// ranks use each (FieldOf, field): the one list a start-up agreement reads, so that a field
// added to the aggregate and not to its list stops the build (static_assert on the count).

#include <charconv>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

namespace seqpar::inline v0 {

/// How the ranks of a run use a field: `agreed`: alike on every rank (it decides which
/// collectives run, or what they compute); `entries`: a list whose entries are agreed one by
/// one; `own`: each rank's own, or the writer's alone.
enum class FieldUse { agreed, entries, own };

/// Member `member` of aggregate A, called `name`, used as `Use` says.
template <class A, class M, FieldUse Use>
struct FieldOf {
  static constexpr FieldUse use = Use;
  std::string_view name;
  M A::*member;
};

template <FieldUse Use, class A, class M>
constexpr FieldOf<A, M, Use> field(std::string_view name, M A::*member) {
  return {name, member};
}

namespace detail {
// Converts to any field type but an optional's (whose converting constructor would make the
// conversion ambiguous): aggregate_fields counts an aggregate's members with it.
struct AnyField {
  template <class T>
  operator T() const;
};
struct AnyOptional {
  template <class T>
  operator std::optional<T>() const;
};
}  // namespace detail

/// The members of aggregate T: the most initialisers T{...} takes (each one AnyField, or
/// AnyOptional where a member is an optional).
template <class T, class... A>
constexpr std::size_t aggregate_fields() {
  if constexpr (requires { T{A{}..., detail::AnyField{}}; })
    return aggregate_fields<T, A..., detail::AnyField>();
  else if constexpr (requires { T{A{}..., detail::AnyOptional{}}; })
    return aggregate_fields<T, A..., detail::AnyOptional>();
  else
    return sizeof...(A);
}

/// A field's value as text: numbers the shortest way that reads back, enums by number, lists
/// joined by ", ". Other types have an overload beside them (found by argument lookup).
template <class V>
std::string field_text(const V& v) {
  if constexpr (std::is_same_v<V, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_enum_v<V>) {
    return std::to_string(static_cast<long long>(v));
  } else if constexpr (std::is_arithmetic_v<V>) {
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
  } else if constexpr (std::is_same_v<V, std::string>) {
    return v;
  } else if constexpr (std::is_same_v<V, std::filesystem::path>) {
    return v.string();
  } else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  } else {  // std::optional<bool>
    return v ? field_text(*v) : "default";
  }
}

/// Calls f(name, text) for every agreed field of `a` in `list` (FieldUse::agreed).
template <class A, class List, class F>
void for_agreed_fields(const A& a, const List& list, F&& f) {
  std::apply(
      [&](const auto&... fs) {
        (
            [&](const auto& x) {
              if constexpr (std::remove_cvref_t<decltype(x)>::use == FieldUse::agreed)
                f(x.name, field_text(a.*(x.member)));
            }(fs),
            ...);
      },
      list);
}

/// Whether `list` (a tuple of FieldOf<A, ...>) names every member of A.
template <class A, class List>
constexpr bool lists_every_field(const List&) {
  return std::tuple_size_v<List> == aggregate_fields<A>();
}

}  // namespace seqpar::inline v0

#pragma once
// The plans a program compiles (PlanFamily, PlanSet), the short names of layouts (tp2dp4), and
// resolve_plan: a requested layout as the PlanDesc of a launch, or a refusal naming it.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "seqpar/config/bloom.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/parallel/plan.hpp"
#include "seqpar/parallel/policies.hpp"
#include "seqpar/plan/plan_desc.hpp"
#include "seqpar/plan/plan_rules.hpp"

namespace seqpar::inline v0 {

/// The data policy of ZeRO stage Z (0: Replicated) with degree N (dynamic by default).
template <int Z, int N = dynamic>
struct DataPolicyOf {
  using type =
      Sharded<std::conditional_t<Z == 1, Zero1, std::conditional_t<Z == 2, Zero2, Zero3>>, N>;
};
template <int N>
struct DataPolicyOf<0, N> {
  using type = Replicated<N>;
};

/// The plan type of a layout: tensor degree T, S pipeline stages under Schedule, ZeRO stage Z
/// over the data ranks the world leaves.
template <int T, int S, class Schedule, int Z>
using LayoutPlan = Hybrid<TensorSplit<T>, Pipeline<S, Schedule>, typename DataPolicyOf<Z>::type>;

/// A list of degrees (a family's tensor degrees, or its pipeline degrees).
template <int... N>
struct Degrees {};

/// Plans compiled together: under each tensor degree of Tensor and each pipeline degree of
/// Stages (both schedules where there are stages to schedule), every data policy with a
/// dynamic degree. Tensor degrees above 1 share one stack type (its shapes are set at run
/// time from the tensor group), so a family of them costs little more than one of them.
template <class Tensor, class Stages>
struct PlanFamily;

template <int... T, int... S>
struct PlanFamily<Degrees<T...>, Degrees<S...>> {
  /// Every layout of the family, the data degree left open (0).
  static std::vector<PlanDesc> layouts() {
    std::vector<PlanDesc> out;
    for (const int t : {T...})
      for (const int s : {S...})
        for (const bool gpipe : {false, true}) {
          if (gpipe && s == 1) continue;
          for (int z = 0; z <= 3; ++z) out.push_back({0, t, s, z, gpipe});
        }
    return out;
  }

  /// Calls f(std::type_identity<Plan>{}) with the plan type of `layout` (its data degree is
  /// ignored: the type's is dynamic); false when the family has no such layout.
  template <class F>
  static bool with(const PlanDesc& layout, F&& f) {
    bool found = false;
    (with_tensor<T>(layout, f, found), ...);
    return found;
  }

 private:
  template <int Tn, class F>
  static void with_tensor(const PlanDesc& layout, F& f, bool& found) {
    if (found || layout.tensor != Tn) return;
    (with_stages<Tn, S>(layout, f, found), ...);
  }
  template <int Tn, int Sn, class F>
  static void with_stages(const PlanDesc& layout, F& f, bool& found) {
    if (found || layout.pipeline != Sn) return;
    if (Sn > 1 && layout.gpipe)
      with_zero<Tn, Sn, GPipe>(layout, f, found, std::make_integer_sequence<int, 4>{});
    else
      with_zero<Tn, Sn, OneFOneB>(layout, f, found, std::make_integer_sequence<int, 4>{});
  }
  template <int Tn, int Sn, class Schedule, class F, int... Z>
  static void with_zero(const PlanDesc& layout, F& f, bool& found,
                        std::integer_sequence<int, Z...>) {
    ((layout.zero_stage == Z && !found
          ? (f(std::type_identity<LayoutPlan<Tn, Sn, Schedule, Z>>{}), found = true)
          : false),
     ...);
  }
};

/// The families a program compiles, in the order they are tried.
template <class... Families>
struct PlanSet {
  static constexpr std::size_t size = sizeof...(Families);
  /// Family I of the set (a program's units name each family this way).
  template <std::size_t I>
  using family = std::tuple_element_t<I, std::tuple<Families...>>;
  /// Every layout of every family, the data degree left open (0).
  static std::vector<PlanDesc> layouts() {
    std::vector<PlanDesc> out;
    (append(out, Families::layouts()), ...);
    return out;
  }
  /// Calls f(Family{}) for each family in order.
  template <class F>
  static void each(F&& f) {
    (f(Families{}), ...);
  }

 private:
  static void append(std::vector<PlanDesc>& out, const std::vector<PlanDesc>& more) {
    out.insert(out.end(), more.begin(), more.end());
  }
};

/// Tensor degrees 1, 2 and 4, one or two pipeline stages (GPipe or 1F1B), every ZeRO stage
/// over any data degree. The tensor-split layouts are a family of their own: one translation
/// unit each per model, device and precision.
using StandardPlans =
    PlanSet<PlanFamily<Degrees<1>, Degrees<1, 2>>, PlanFamily<Degrees<2, 4>, Degrees<1, 2>>>;

/// A layout as a user asks for it: the ZeRO stage, the tensor and pipeline degrees, the
/// schedule, and the data degree (0: what the world leaves over tensor x pipeline).
/// `asked` says how it was asked, in the program's own words, for messages (empty: the
/// layout's short name).
struct PlanRequest {
  PlanDesc layout{0, 1, 1, 0, false};
  std::string asked;
};

/// The short name of a layout: `tp<T>` when T > 1, `pp<S>` when S > 1 (`gpipe` after it for
/// that schedule; 1F1B otherwise), then `dp<D>` (Replicated, D > 1) or `zero<K>x<D>`; `single` for
/// one rank without sharding. A data degree left open (0) is written without its number (`tp2dp`,
/// `zero3`).
inline std::string plan_name(const PlanDesc& p) {
  std::string s;
  if (p.tensor > 1) s += "tp" + std::to_string(p.tensor);
  if (p.pipeline > 1) s += "pp" + std::to_string(p.pipeline) + (p.gpipe ? "gpipe" : "");
  const std::string d = p.data > 0 ? std::to_string(p.data) : "";
  if (p.zero_stage > 0)
    s += "zero" + std::to_string(p.zero_stage) + (d.empty() ? "" : "x" + d);
  else if (p.data != 1)
    s += "dp" + d;
  return s.empty() ? "single" : s;
}

/// Calls f(field, value) for each field of the layout a launch states (the data degree is the
/// world's): "zero_stage"; "tensor_parallel" when above 1; "pipeline_parallel" and
/// "pipeline_schedule" ("gpipe" or "1f1b") when there are stages. A program maps the fields
/// to its own spellings.
template <class F>
void layout_fields(const PlanDesc& p, F&& f) {
  f("zero_stage", std::to_string(p.zero_stage));
  if (p.tensor > 1) f("tensor_parallel", std::to_string(p.tensor));
  if (p.pipeline > 1) {
    f("pipeline_parallel", std::to_string(p.pipeline));
    f("pipeline_schedule", std::string(p.gpipe ? "gpipe" : "1f1b"));
  }
}

/// The layout in words: "ZeRO stage 3, tensor degree 2, 2 pipeline stages (gpipe)".
inline std::string describe_layout(const PlanDesc& p) {
  std::string s = "ZeRO stage " + std::to_string(p.zero_stage);
  if (p.tensor > 1) s += ", tensor degree " + std::to_string(p.tensor);
  if (p.pipeline > 1)
    s += ", " + std::to_string(p.pipeline) + " pipeline stages (" + (p.gpipe ? "gpipe" : "1f1b") +
         ")";
  return s;
}

namespace detail {
// Reads a decimal number of 1 to 4 digits at `at`; nullopt when none is there.
inline std::optional<int> name_number(std::string_view s, std::size_t& at) {
  std::size_t end = at;
  while (end < s.size() && end - at < 5 && s[end] >= '0' && s[end] <= '9') ++end;
  if (end == at || end - at > 4) return std::nullopt;
  int n = 0;
  for (std::size_t i = at; i < end; ++i) n = n * 10 + (s[i] - '0');
  at = end;
  return n;
}
inline bool name_word(std::string_view s, std::size_t& at, std::string_view word) {
  if (s.substr(at, word.size()) != word) return false;
  at += word.size();
  return true;
}
}  // namespace detail

/// The layout a short name spells (plan_name's form; `single`), or nullopt when it is not
/// one. A name without a data part keeps one data rank (`tp2` is two ranks, as `pp2`);
/// `dp` and `zero<K>` without a number leave the data degree to the world.
inline std::optional<PlanDesc> parse_plan_name(std::string_view name) {
  if (name == "single") return PlanDesc{1, 1, 1, 0, false};
  PlanDesc p{1, 1, 1, 0, false};
  std::size_t at = 0;
  if (detail::name_word(name, at, "tp")) {
    const auto t = detail::name_number(name, at);
    if (!t || *t < 1) return std::nullopt;
    p.tensor = *t;
  }
  if (detail::name_word(name, at, "pp")) {
    const auto s = detail::name_number(name, at);
    if (!s || *s < 1) return std::nullopt;
    p.pipeline = *s;
    p.gpipe = detail::name_word(name, at, "gpipe");
  }
  if (detail::name_word(name, at, "dp")) {
    p.data = 0;
    if (at < name.size()) {
      const auto d = detail::name_number(name, at);
      if (!d || *d < 1) return std::nullopt;
      p.data = *d;
    }
  } else if (detail::name_word(name, at, "zero")) {
    const auto z = detail::name_number(name, at);
    if (!z || *z < 1 || *z > 3) return std::nullopt;
    p.zero_stage = *z;
    p.data = 0;
    if (detail::name_word(name, at, "x")) {
      const auto d = detail::name_number(name, at);
      if (!d || *d < 1) return std::nullopt;
      p.data = *d;
    }
  }
  if (at != name.size() || at == 0) return std::nullopt;
  return p;
}

/// How the world of a launch came to be, for messages ("mpirun started 8 processes"), and
/// how the program's user launches another number of ranks.
struct WorldOrigin {
  int size = 1;
  std::string said;  // e.g. "mpirun started 8 processes"; empty: "<size> ranks"
  /// The words for launching n ranks (a program may name its launchers: "4 (mpirun -np 4)");
  /// unset: "<n> ranks".
  std::function<std::string(int)> launch = {};
  std::string text() const {
    return said.empty() ? std::to_string(size) + " rank" + (size == 1 ? "" : "s") : said;
  }
  std::string launching(int n) const {
    return launch ? launch(n) : std::to_string(n) + " rank" + (n == 1 ? "" : "s");
  }
};

/// The tensor degrees, pipeline degrees and ZeRO stages of `layouts`, one line, for messages.
inline std::string describe_layouts(const std::vector<PlanDesc>& layouts) {
  std::vector<int> tensor, pipeline;
  bool gpipe = false;
  for (const auto& p : layouts) {
    if (std::find(tensor.begin(), tensor.end(), p.tensor) == tensor.end())
      tensor.push_back(p.tensor);
    if (std::find(pipeline.begin(), pipeline.end(), p.pipeline) == pipeline.end())
      pipeline.push_back(p.pipeline);
    gpipe = gpipe || p.gpipe;
  }
  std::sort(tensor.begin(), tensor.end());
  std::sort(pipeline.begin(), pipeline.end());
  const auto list = [](const std::vector<int>& v) {
    std::string s;
    for (std::size_t i = 0; i < v.size(); ++i)
      s += (i == 0 ? "" : i + 1 == v.size() ? " and " : ", ") + std::to_string(v[i]);
    return s;
  };
  return "tensor degrees " + list(tensor) + ", pipeline degrees " + list(pipeline) +
         (gpipe ? " (gpipe or 1f1b)" : "") + ", ZeRO stages 0 to 3, any data degree";
}

/// The layout `request` asks for over the world `world`, for model m, among the layouts a
/// program compiled (`compiled`, data degrees open). Refuses, naming what was asked and what
/// is available: a world the tensor and pipeline degrees do not divide, a data degree the
/// world does not have, degrees the model cannot take (heads, layers) and layouts that are
/// not compiled.
inline PlanDesc resolve_plan(const PlanRequest& request, const WorldOrigin& world,
                             const BloomConfig& m, const std::vector<PlanDesc>& compiled) {
  const std::string asked = request.asked.empty() ? plan_name(request.layout) : request.asked;
  const PlanCheck c = check_plan(request.layout, world.size, m, &compiled);
  const PlanDesc& p = c.layout;
  const int others = p.tensor * p.pipeline;
  switch (c.broken) {
    case PlanRule::none: return p;
    case PlanRule::degrees:
      detail::fail(asked, ": degrees are at least 1 and the ZeRO stage is 0, 1, 2 or 3");
    case PlanRule::world_size:
      detail::fail(asked, " needs ", p.data * others, " ranks (tensor ", p.tensor, " x pipeline ",
                   p.pipeline, " x data ", p.data, "), but ", world.text(), "; launch ",
                   world.launching(p.data * others), " or leave the data degree to the launch (",
                   plan_name({0, p.tensor, p.pipeline, p.zero_stage, p.gpipe}), ")");
    case PlanRule::world_multiple:
      detail::fail(asked, " over ", world.text(), ": ", world.size,
                   " is not a multiple of tensor x pipeline = ", p.tensor, " x ", p.pipeline, " = ",
                   others, "; launch a multiple of ", others, " ranks or change the degrees");
    case PlanRule::heads:
      detail::fail(asked, ": tensor parallel ", p.tensor, " does not divide the model's ", m.heads,
                   " attention heads (a tensor rank computes whole heads)");
    case PlanRule::layers:
      detail::fail(asked, ": ", p.pipeline, " pipeline stages do not divide the model's ", m.layers,
                   " layers (stages hold equal numbers of layers)");
    case PlanRule::not_compiled:
      detail::fail(asked, ": tensor ", p.tensor, " x pipeline ", p.pipeline,
                   p.pipeline > 1 ? (p.gpipe ? " (gpipe)" : " (1f1b)") : "", " with ZeRO stage ",
                   p.zero_stage, " is not compiled in this program; it has ",
                   describe_layouts(compiled));
  }
  return p;
}

}  // namespace seqpar::inline v0

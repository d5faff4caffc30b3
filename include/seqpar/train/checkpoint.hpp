#pragma once
// Whole-model state in one canonical layout (full tensors under Hugging Face names, checksummed),
// so that a checkpoint written under one plan loads under any other.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "seqpar/backend/device.hpp"
#include "seqpar/config/bloom.hpp"
#include "seqpar/config/units.hpp"
#include "seqpar/core/dtype.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/io/bloom_weights.hpp"
#include "seqpar/io/safetensors.hpp"
#include "seqpar/nn/model.hpp"
#include "seqpar/optim/offload.hpp"
#include "seqpar/parallel/mesh.hpp"
#include "seqpar/parallel/pipeline_axis.hpp"
#include "seqpar/train/precision.hpp"

namespace seqpar::inline v0 {

/// Which copies of the state a tensor belongs to.
enum class StateKind : std::uint8_t { weights, adam_m, adam_v };

inline std::string state_name(StateKind k, const std::string& param) {
  constexpr const char* prefix[] = {"transformer.", "optimizer.m.transformer.",
                                    "optimizer.v.transformer."};
  return prefix[static_cast<int>(k)] + param;
}

/// Which parts of the state a saved file holds, as flags: `weights` alone (a weight file)
/// or `weights | moments` (a training checkpoint: the AdamW moments m and v too).
enum class StateKinds : std::uint8_t { weights = 1, moments = 2 };

constexpr StateKinds operator|(StateKinds a, StateKinds b) {
  return static_cast<StateKinds>(static_cast<std::uint8_t>(a) | static_cast<std::uint8_t>(b));
}
constexpr bool contains(StateKinds set, StateKinds k) {
  return (static_cast<std::uint8_t>(set) & static_cast<std::uint8_t>(k)) != 0;
}

/// The tensor kinds of a set of flags, in the order they are sent and written.
inline std::vector<StateKind> state_kinds(StateKinds set) {
  std::vector<StateKind> kinds;
  if (contains(set, StateKinds::weights)) kinds.push_back(StateKind::weights);
  if (contains(set, StateKinds::moments))
    kinds.insert(kinds.end(), {StateKind::adam_m, StateKind::adam_v});
  return kinds;
}

/// Full tensors of the model, assembled on world rank 0 from every rank's unit buffers.
template <BloomModel M>
class StateAssembler {
 public:
  explicit StateAssembler(StateKinds kinds) : kinds_(state_kinds(kinds)) {
    for (const auto& u : bloom_units<M>(1, 0))
      for (const auto& p : u.params) {
        for (const StateKind k : kinds_)
          full_[static_cast<int>(k)][p.name].assign(static_cast<std::size_t>(p.real_rows * p.cols),
                                                    0.0f);
        shapes_[p.name] = p.file_shape();
      }
  }

  /// Places the unit buffer `values` (the layout of tensor rank `tp_rank` of `tp`) into
  /// the full tensors of kind k.
  void place(StateKind k, const UnitTable& unit, const float* values) {
    for (const auto& p : unit.params) {
      auto& dst = full_[static_cast<int>(k)].at(p.name);
      for (std::int64_t r = 0; r < p.local_real_rows(); ++r)
        std::memcpy(dst.data() + (p.row0 + r) * p.cols + p.col0,
                    values + p.offset + r * p.local_cols,
                    static_cast<std::size_t>(p.local_cols) * sizeof(float));
    }
  }

  /// Writes the tensors (F32, or weights as BF16/F16) and metadata atomically. Every save
  /// of weights or a checkpoint comes through here: a tensor holding a NaN or an infinity
  /// is refused before anything is written (naming it), so the file already at `path`, the
  /// last good state, stays as it was.
  void write(const std::filesystem::path& path, std::map<std::string, std::string> metadata,
             DType weights_dtype = DType::f32) const {
    for (const StateKind kind : kinds_)
      for (const auto& [name, values] : full_[static_cast<int>(kind)]) {
        const auto bad =
            std::find_if(values.begin(), values.end(), [](float x) { return !std::isfinite(x); });
        SEQPAR_CHECK(bad == values.end(), path.string(), ": not written: tensor '",
                     state_name(kind, name), "' holds ",
                     std::isnan(*bad) ? "nan"
                     : *bad > 0       ? "inf"
                                      : "-inf",
                     " at element ", bad - values.begin(),
                     "; a state with non-finite values is never saved (the file "
                     "already there, if any, is left as it was)");
      }
    std::vector<TensorToWrite> tensors;
    std::vector<std::vector<std::uint16_t>> halves;
    for (const StateKind kind : kinds_)
      for (const auto& [name, values] : full_[static_cast<int>(kind)]) {
        if (kind == StateKind::weights && weights_dtype != DType::f32) {
          auto& h = halves.emplace_back(values.size());
          for (std::size_t i = 0; i < values.size(); ++i)
            h[i] =
                weights_dtype == DType::bf16 ? float_to_bf16(values[i]) : float_to_f16(values[i]);
          tensors.push_back({state_name(kind, name), weights_dtype, shapes_.at(name),
                             std::as_bytes(std::span(h))});
        } else {
          tensors.push_back({state_name(kind, name), DType::f32, shapes_.at(name),
                             std::as_bytes(std::span(values))});
        }
      }
    metadata["format"] = "pt";
    write_safetensors(path, tensors, metadata);
  }

 private:
  std::vector<StateKind> kinds_;
  std::map<std::string, std::vector<float>> full_[3];
  std::map<std::string, std::vector<std::int64_t>> shapes_;
};

/// Metadata that identifies the model a checkpoint belongs to.
template <BloomModel M>
std::map<std::string, std::string> model_metadata() {
  return {{"seqpar.vocab_size", std::to_string(M::vocab_size)},
          {"seqpar.hidden", std::to_string(M::hidden)},
          {"seqpar.layers", std::to_string(M::layers)},
          {"seqpar.heads", std::to_string(M::heads)}};
}

/// Throws naming the file when a checkpoint's model metadata differs from M's.
template <BloomModel M>
void check_model_metadata(const std::map<std::string, std::string>& meta, const std::string& file) {
  for (const auto& [k, want] : model_metadata<M>()) {
    const auto it = meta.find(k);
    SEQPAR_CHECK(it != meta.end(), file, ": not a seqpar checkpoint (metadata '", k,
                 "' is missing)");
    SEQPAR_CHECK(it->second == want, file, ": checkpoint of a model with ", k.substr(7), " = ",
                 it->second, "; this trainer's model has ", want);
  }
}

/// What a training checkpoint records besides its tensors.
struct TrainingPosition {
  std::int64_t step = 0;  // optimizer steps taken
  // The StepGuard's state: always its skip counters; the scale, its clean steps and the
  // hysteresis left when the file has them and they were asked for (`has_scale`). A file
  // from before the hysteresis was saved resumes with it full (hysteresis = 0 here).
  LossScaleState guard{1, 0, 0, 0, 0};
  bool has_scale = false;
};

/// The metadata of a training checkpoint: the caller's `metadata` with the step, the seed,
/// the skip counters and, with `scaled`, the loss scale (its value to the last bit), its
/// clean steps since the last overflow and the hysteresis left.
inline std::map<std::string, std::string> checkpoint_metadata(
    std::map<std::string, std::string> metadata, std::int64_t step, std::uint64_t seed,
    const LossScaleState& guard = {}, bool scaled = false) {
  metadata["seqpar.step"] = std::to_string(step);
  metadata["seqpar.seed"] = std::to_string(seed);
  metadata["seqpar.skipped_steps"] = std::to_string(guard.skipped_steps);
  metadata["seqpar.nonfinite_in_a_row"] = std::to_string(guard.faults_in_a_row);
  if (scaled) {
    char scale[32];
    std::snprintf(scale, sizeof scale, "%.17g", guard.scale);
    metadata["seqpar.loss_scale"] = scale;
    metadata["seqpar.loss_scale_clean_steps"] = std::to_string(guard.clean_steps);
    metadata["seqpar.loss_scale_hysteresis"] = std::to_string(guard.hysteresis);
  }
  return metadata;
}

/// Checks that `meta` (of `file`) is a training checkpoint of model M and reads its step,
/// its skip counters and, with `loss_scaling`, its loss scale when it has one.
template <BloomModel M>
TrainingPosition read_training_position(const std::map<std::string, std::string>& meta,
                                        const std::string& file, bool loss_scaling) {
  check_model_metadata<M>(meta, file);
  const auto it = meta.find("seqpar.step");
  SEQPAR_CHECK(it != meta.end(), file,
               ": not a training checkpoint (metadata 'seqpar.step' is missing)");
  TrainingPosition at;
  at.step = detail::parse_field<std::int64_t>(it->second, file, "metadata seqpar.step");
  SEQPAR_CHECK(at.step >= 0, file, ": metadata seqpar.step is ", at.step,
               "; expected a step count from 0");
  // A count from 0, or `otherwise` when the file has none.
  const auto count = [&](const char* key, std::int64_t otherwise) {
    const auto f = meta.find(key);
    if (f == meta.end()) return otherwise;
    const auto c =
        detail::parse_field<std::int64_t>(f->second, file, std::string("metadata ") + key);
    SEQPAR_CHECK(c >= 0, file, ": metadata ", key, " is ", c, "; expected a count from 0");
    return c;
  };
  at.guard.skipped_steps = count("seqpar.skipped_steps", 0);
  at.guard.faults_in_a_row = count("seqpar.nonfinite_in_a_row", 0);
  if (loss_scaling) {
    const auto scale = meta.find("seqpar.loss_scale"),
               clean = meta.find("seqpar.loss_scale_clean_steps");
    if (scale != meta.end() && clean != meta.end()) {
      const double v =
          detail::parse_field<double>(scale->second, file, "metadata seqpar.loss_scale");
      const auto c = detail::parse_field<std::int64_t>(clean->second, file,
                                                       "metadata seqpar.loss_scale_clean_steps");
      SEQPAR_CHECK(std::isfinite(v) && v > 0 && c >= 0, file,
                   ": metadata seqpar.loss_scale = ", scale->second, " after ", clean->second,
                   " clean steps is not a loss scale to resume");
      at.guard.scale = v;
      at.guard.clean_steps = c;
      at.guard.hysteresis = count("seqpar.loss_scale_hysteresis", 0);
      at.has_scale = true;
    }
  }
  return at;
}

/// One rank's side of the whole-model state: the units its pipeline stage holds, split as
/// its tensor rank holds them, with `Data` (the rank's DataAxis) holding its range of each
/// unit's optimizer state. A view of the trainer's parts, made for each call.
template <BloomModel M, ModelStack Stack, class Data>
class RankState {
 public:
  using T = typename Stack::Scalar;
  using Dev = typename Stack::Dev;
  using Master = typename Data::Master;

  RankState(Mesh& mesh, const PipelineAxis& pipe, Stack& model, Data& data)
      : mesh_(&mesh), pipe_(&pipe), model_(&model), data_(&data) {}

  /// Collective over the world. Gathers `kinds` of the state (weights; and the AdamW
  /// moments) to world rank 0 in the canonical layout and writes them there with `meta`
  /// and the model metadata, the weights as `dtype`. Each (pipeline stage, tensor rank)
  /// position has its data rank 0 send its units; the last stage's copy of the tied table
  /// stays home.
  void write(const std::filesystem::path& path, StateKinds kinds,
             std::map<std::string, std::string> meta, DType dtype) {
    const auto each = state_kinds(kinds);
    std::vector<std::vector<float>> mine;  // per sent unit and kind, in (unit, kind) order
    for (std::size_t u = 0; u < model_->units().size(); ++u) {
      if (!pipe_->sends(pipe_->stage(), u)) continue;
      for (const StateKind k : each) mine.push_back(unit_state(u, k));
    }
    const int me = mesh_->world.rank();
    if (mesh_->data_rank == 0 && me != 0) {
      int tag = 0;
      for (auto& v : mine) mesh_->world.send(v.data(), v.size(), 0, tag++);
    }
    if (me == 0) {
      StateAssembler<M> full(kinds);
      for (int p = 0; p < pipe_->stages(); ++p)
        for (int t = 0; t < mesh_->tensor_degree; ++t) {
          const int src = mesh_->world_rank(p, 0, t);
          const auto units = bloom_units<M>(mesh_->tensor_degree, t);
          int tag = 0;
          std::size_t next = 0;
          for (std::size_t u = 0; u < units.size(); ++u) {
            if (!pipe_->sends(p, u)) continue;
            for (const StateKind k : each) {
              std::vector<float> v;
              if (src == 0) {
                v = std::move(mine[next++]);
              } else {
                v.resize(static_cast<std::size_t>(units[u].numel));
                mesh_->world.recv(v.data(), v.size(), src, tag++);
              }
              full.place(k, units[u], v.data());
            }
          }
        }
      for (auto& [k, v] : model_metadata<M>()) meta[k] = v;
      full.write(path, std::move(meta), dtype);
    }
    mesh_->world.barrier();  // the file is complete when every rank returns
  }

  /// Reads this rank's range of the AdamW moments of every unit it holds from checkpoint
  /// `f` (named `file` in errors) into the optimizer state.
  void load_moments(const SafetensorsFile& f, const std::string& file) {
    for (std::size_t u = 0; u < model_->units().size(); ++u) {
      if (!model_->holds(u)) continue;
      const auto& unit = model_->units()[u];
      const std::int64_t begin = data_->range_begin(u), size = data_->range_size(u);
      std::vector<Master> whole(static_cast<std::size_t>(unit.numel)),
          range(static_cast<std::size_t>(size));
      for (const StateKind k : {StateKind::adam_m, StateKind::adam_v}) {
        for (const auto& p : unit.params) {
          const auto* e = f.find(state_name(k, p.name));
          SEQPAR_CHECK(e, file, ": tensor '", state_name(k, p.name), "' is missing");
          load_param_block(*e, p, whole.data() + p.offset);
        }
        for (std::int64_t i = 0; i < size; ++i)
          range[static_cast<std::size_t>(i)] =
              begin + i < unit.numel ? whole[static_cast<std::size_t>(begin + i)] : Master(0);
        data_->write_moments(u, k == StateKind::adam_m ? AdamPart::m : AdamPart::v, range.data());
      }
    }
  }

 private:
  static constexpr bool mixed = !std::is_same_v<Master, T>;

  // Unit u's state of kind k on this rank, whole along the data axis (numel elements), in
  // host memory. The weights of a mixed-precision model are its fp32 master weights (the
  // 16-bit working copy is their rounding), so a checkpoint resumes exactly.
  std::vector<float> unit_state(std::size_t u, StateKind k) {
    const std::int64_t n = model_->units()[u].numel;
    std::vector<float> out(static_cast<std::size_t>(n));
    if (k == StateKind::weights && !mixed) {
      std::vector<T> unit(static_cast<std::size_t>(model_->padded_numel(u)));
      data_->read_params(u, unit.data());
      std::copy(unit.begin(), unit.begin() + n, out.begin());
      return out;
    }
    // The optimizer's state over this rank's range (the whole unit, or a ZeRO shard), on
    // the device or offloaded to the host.
    const std::int64_t size = data_->range_size(u);
    std::vector<Master> local(static_cast<std::size_t>(size));
    data_->read_state(u,
                      k == StateKind::weights  ? AdamPart::master
                      : k == StateKind::adam_m ? AdamPart::m
                                               : AdamPart::v,
                      local.data());
    const auto whole = data_->gather_ranges(std::move(local));
    std::copy(whole.begin(), whole.begin() + n, out.begin());
    return out;
  }

  Mesh* mesh_;
  const PipelineAxis* pipe_;
  Stack* model_;
  Data* data_;
};

}  // namespace seqpar::inline v0

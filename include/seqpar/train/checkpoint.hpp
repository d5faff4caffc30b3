#pragma once
// Whole-model state in one canonical layout: every tensor full-size under its Hugging
// Face name, whatever plan produced it. Saving gathers each rank's pieces to world rank
// 0, which writes one safetensors file atomically; loading lets every rank read just its
// own pieces from that file, so a checkpoint written under one plan loads under any other.
//
// File layout: "transformer.<name>" (the weights; the file loads in transformers as it is),
// "optimizer.m.transformer.<name>" and "optimizer.v.transformer.<name>" (AdamW moments,
// checkpoints only), metadata "seqpar.*" (step, seed, model shape) plus the caller's own.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "seqpar/config/bloom.hpp"
#include "seqpar/core/dtype.hpp"
#include "seqpar/io/safetensors.hpp"
#include "seqpar/config/units.hpp"

namespace seqpar::inline v0 {

/// Which copies of the state a tensor belongs to.
enum class StateKind : std::uint8_t { weights, adam_m, adam_v };

inline std::string state_name(StateKind k, const std::string& param) {
  constexpr const char* prefix[] = {"transformer.", "optimizer.m.transformer.", "optimizer.v.transformer."};
  return prefix[static_cast<int>(k)] + param;
}

/// Full tensors of the model, assembled on world rank 0 from every rank's unit buffers.
template <BloomModel M>
class StateAssembler {
 public:
  explicit StateAssembler(int kinds) : kinds_(kinds) {
    for (const auto& u : bloom_units<M>(1, 0))
      for (const auto& p : u.params) {
        const std::int64_t rows = real_rows(p);
        for (int k = 0; k < kinds_; ++k) full_[k][p.name].assign(static_cast<std::size_t>(rows * p.cols), 0.0f);
        shapes_[p.name] = p.vector ? std::vector<std::int64_t>{rows} : std::vector<std::int64_t>{rows, p.cols};
      }
  }

  /// Places the unit buffer `values` (the layout of tensor rank `tp_rank` of `tp`) into
  /// the full tensors of kind k.
  void place(int k, const UnitTable& unit, const float* values) {
    for (const auto& p : unit.params) {
      auto& dst = full_[k].at(p.name);
      const std::int64_t rows = std::min(p.local_rows, real_rows(p) - p.row0);
      for (std::int64_t r = 0; r < rows; ++r)
        std::memcpy(dst.data() + (p.row0 + r) * p.cols + p.col0, values + p.offset + r * p.local_cols,
                    static_cast<std::size_t>(p.local_cols) * sizeof(float));
    }
  }

  /// Writes the tensors (F32, or weights as BF16/F16) and metadata atomically. Every save
  /// of weights or a checkpoint comes through here: a tensor holding a NaN or an infinity
  /// is refused before anything is written (naming it), so the file already at `path`, the
  /// last good state, stays as it was.
  void write(const std::filesystem::path& path, std::map<std::string, std::string> metadata,
             DType weights_dtype = DType::f32) const {
    for (int k = 0; k < kinds_; ++k)
      for (const auto& [name, values] : full_[k]) {
        const auto bad = std::find_if(values.begin(), values.end(), [](float x) { return !std::isfinite(x); });
        SEQPAR_CHECK(bad == values.end(), path.string(), ": not written: tensor '",
                     state_name(static_cast<StateKind>(k), name), "' holds ", std::isnan(*bad) ? "nan" : *bad > 0 ? "inf" : "-inf", " at element ",
                     bad - values.begin(), "; a state with non-finite values is never saved (the file "
                     "already there, if any, is left as it was)");
      }
    std::vector<TensorToWrite> tensors;
    std::vector<std::vector<std::uint16_t>> halves;
    for (int k = 0; k < kinds_; ++k)
      for (const auto& [name, values] : full_[k]) {
        const auto kind = static_cast<StateKind>(k);
        if (kind == StateKind::weights && weights_dtype != DType::f32) {
          auto& h = halves.emplace_back(values.size());
          for (std::size_t i = 0; i < values.size(); ++i)
            h[i] = weights_dtype == DType::bf16 ? float_to_bf16(values[i]) : float_to_f16(values[i]);
          tensors.push_back({state_name(kind, name), weights_dtype, shapes_.at(name), std::as_bytes(std::span(h))});
        } else {
          tensors.push_back({state_name(kind, name), DType::f32, shapes_.at(name), std::as_bytes(std::span(values))});
        }
      }
    metadata["format"] = "pt";
    write_safetensors(path, tensors, metadata);
  }

 private:
  static std::int64_t real_rows(const ParamSpec& p) {
    return p.name == "word_embeddings.weight" ? M::vocab_size : p.rows;
  }
  int kinds_;
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
    SEQPAR_CHECK(it != meta.end(), file, ": not a seqpar checkpoint (metadata '", k, "' is missing)");
    SEQPAR_CHECK(it->second == want, file, ": checkpoint of a model with ", k.substr(7), " = ", it->second,
                 "; this trainer's model has ", want);
  }
}

}  // namespace seqpar::inline v0

#pragma once
// Views of a unit's tensors inside its flat buffer (parameters or gradients alike); the
// table they are cut by is config/units.hpp.

#include <cstdint>

#include "seqpar/config/units.hpp"

namespace seqpar::inline v0 {

/// Views of one block's tensors inside a flat buffer (parameters or gradients alike).
template <class T>
struct BlockTensors {
  T *ln1_w, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b, *ln2_w, *ln2_b, *fc_w, *fc_b, *out_w, *out_b;

  static BlockTensors bind(T* base, const UnitTable& u) {
    T* p[12];
    for (std::size_t i = 0; i < 12; ++i) p[i] = base + u.params[i].offset;
    return {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11]};
  }
};

/// Views of the embedding unit: the (vocab-split) table and its layernorm.
template <class T>
struct EmbeddingTensors {
  T *table, *ln_w, *ln_b;
  static EmbeddingTensors bind(T* base, const UnitTable& u) {
    return {base + u.params[0].offset, base + u.params[1].offset, base + u.params[2].offset};
  }
};

/// Views of the final layernorm unit.
template <class T>
struct FinalTensors {
  T *ln_w, *ln_b;
  static FinalTensors bind(T* base, const UnitTable& u) {
    return {base + u.params[0].offset, base + u.params[1].offset};
  }
};

}  // namespace seqpar::inline v0

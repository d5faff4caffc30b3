#pragma once
// Where a training step keeps its state, chosen at run time: what a block keeps for its
// backward (Recompute) and which state lives in host memory (Offload). The stack, the
// data axis, the trainer's options and the planner (plan/) all read these enums.

#include <cstdint>
#include <string>
#include <string_view>

#include "seqpar/core/error.hpp"

namespace seqpar::inline v0 {

/// What a block keeps for its backward (Megatron's --recompute-granularity, Hugging Face's
/// gradient_checkpointing). `none`: its whole record. `selective`: the record without the
/// attention probabilities [rows, nh, seq, seq], which the backward makes again from the
/// kept qkv. `full`: only its input (the residual stream [N, H], 2 s b h bytes in fp16);
/// the backward runs the block's forward again, then its backward. Every mode gives the
/// same bits: the recomputation is the same calls on the same inputs.
enum class Recompute : std::uint8_t { none, selective, full };

/// "none", "selective" or "full" (command lines, logs).
inline const char* recompute_name(Recompute r) {
  return r == Recompute::full ? "full" : r == Recompute::selective ? "selective" : "none";
}

/// What recompute_name prints, back; `what` names the option in the error.
inline Recompute parse_recompute(std::string_view s, std::string_view what = "recompute") {
  for (const Recompute r : {Recompute::none, Recompute::selective, Recompute::full})
    if (s == recompute_name(r)) return r;
  throw Error(std::string(what) + ": '" + std::string(s) +
              "' is not a recomputation; expected none, selective or full");
}

/// What a rank keeps in host memory: nothing, the optimizer state (fp32 master weights
/// and AdamW moments: ZeRO-Offload, any data-axis policy), or that and the parameter
/// shards (ZeRO-3 only: each unit's shard is uploaded for its gather). DeepSpeed's
/// offload_optimizer and offload_param; optim/offload.hpp holds the state itself.
enum class Offload : std::uint8_t { none, optimizer, optimizer_and_params };

inline const char* offload_name(Offload o) {
  switch (o) {
    case Offload::optimizer: return "optimizer";
    case Offload::optimizer_and_params: return "optimizer+params";
    default: return "none";
  }
}

/// "none", "optimizer" or "optimizer+params" (what offload_name prints); `what` names the
/// option in the error.
inline Offload parse_offload(std::string_view s, std::string_view what = "offload") {
  for (const Offload o : {Offload::none, Offload::optimizer, Offload::optimizer_and_params})
    if (s == offload_name(o)) return o;
  throw Error(std::string(what) + ": '" + std::string(s) +
              "' is not an offload; expected none, optimizer or optimizer+params");
}

}  // namespace seqpar::inline v0

#!/usr/bin/env python3
"""Writes tests/fixtures/loss_scale/deepspeed.json: the loss scale DeepSpeed's own
DynamicLossScaler (and its static LossScaler) holds after every step of injected overflow
sequences, configured through DeepSpeed's own fp16 config parsing with the fields seqpar's
LossScaleOptions mirror. Runs on a CPU with the `deepspeed` package (pip install deepspeed);
tests/train/test_loss_scale.cpp replays each case through StepGuard.

    python3 tools/make_loss_scale_golden.py [out.json]
"""
import json
import sys
import types
from pathlib import Path

import torch
import deepspeed
from deepspeed.runtime.fp16 import loss_scaler
from deepspeed.runtime.precision_config import DeepSpeedFP16Config

# update_scale asks deepspeed.comm for the rank only to decide who logs; no process group
# is needed for the rules themselves.
loss_scaler.dist = types.SimpleNamespace(get_rank=lambda: 0)


def case(name, fp16, steps, overflow_at):
    """One sequence: `fp16` is a DeepSpeed config's fp16 block (enabled is added)."""
    config = DeepSpeedFP16Config(**dict(fp16, enabled=True))
    static = config.loss_scale
    args = config.dynamic_loss_scale_args()
    # As DeepSpeedEngine does: dynamic when loss_scale is 0.
    scaler = loss_scaler.CreateLossScaler(torch.half, static, static == 0, args)
    over = set(overflow_at)
    scales, hysteresis, raised_at = [], [], None
    for i in range(steps):
        try:
            scaler.update_scale(i in over)
        except Exception as e:  # DeepSpeed stops the run at the minimum scale
            assert "minimum" in str(e), e
            raised_at = i
            break
        scales.append(float(scaler.cur_scale))
        hysteresis.append(int(getattr(scaler, "cur_hysteresis", 0)))
    return {
        "name": name,
        "fp16": fp16,
        "dynamic": bool(scaler.dynamic),
        "initial_scale": float(args["init_scale"]) if static == 0 else float(static),
        "steps": steps,
        "overflow_at": sorted(over),
        "scale_after": scales,
        "hysteresis_after": hysteresis,
        "raised_at": raised_at,
    }


def w(**kw):
    """An fp16 block with a small window, so growth shows in a few steps."""
    base = {"initial_scale_power": 8, "loss_scale_window": 4, "hysteresis": 1, "min_loss_scale": 1}
    base.update(kw)
    return base


CASES = [
    case("burst, hysteresis 1", w(), 20, [0, 1, 2, 9]),
    case("bursts, hysteresis 2", w(hysteresis=2), 24, [0, 2, 7, 8, 9, 15]),
    case("bursts, hysteresis 3", w(hysteresis=3), 26, [0, 2, 4, 5, 11, 12, 13, 14]),
    case("bursts, hysteresis 2, consecutive", w(hysteresis=2, consecutive_hysteresis=True), 24,
         [0, 2, 7, 8, 9, 15]),
    case("bursts, hysteresis 3, consecutive", w(hysteresis=3, consecutive_hysteresis=True), 26,
         [0, 2, 4, 5, 11, 12, 13, 14]),
    case("window 3 reached again and again", w(loss_scale_window=3, hysteresis=2), 30,
         [10, 11, 20]),
    case("window 1", w(loss_scale_window=1, hysteresis=2), 12, [3, 4, 5, 9]),
    case("minimum scale reached", w(initial_scale_power=3), 10, list(range(10))),
    case("minimum scale 3 (not a power of two)", w(initial_scale_power=3, min_loss_scale=3), 10,
         list(range(10))),
    case("minimum scale with hysteresis left", w(initial_scale_power=2, min_loss_scale=2,
                                                 hysteresis=3), 12, [0, 1, 2, 6, 7, 8, 9]),
    case("static scale 1024", {"loss_scale": 1024}, 12, [2, 3, 7]),
    case("DeepSpeed's defaults", {"initial_scale_power": 16, "loss_scale_window": 1000,
                                  "hysteresis": 2, "min_loss_scale": 1}, 2105,
         [5, 6, 7, 1010, 1011, 2050]),
]


def main():
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else (
        Path(__file__).resolve().parent.parent / "tests/fixtures/loss_scale/deepspeed.json")
    # One case a line: diffs of a regenerated file show which case changed.
    lines = ",\n".join(json.dumps(c, separators=(",", ":")) for c in CASES)
    out.write_text('{"deepspeed":%s,"cases":[\n%s\n]}\n' % (json.dumps(deepspeed.__version__), lines))
    print(f"{out}: {len(CASES)} cases (deepspeed {deepspeed.__version__})")


if __name__ == "__main__":
    main()

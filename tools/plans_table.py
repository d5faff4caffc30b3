#!/usr/bin/env python3
"""Makes the tables of docs/plans.md from bench_plans' JSON output, with the figures the
analytic models predict next to what was measured.

  build/benchmarks/bench_plans --benchmark_out=plans.json --benchmark_out_format=json
  python3 tools/plans_table.py plans.json

The model and batch flags must match benchmarks/plans.cpp (the defaults do). Every figure is
per rank, the maximum over ranks; MiB = 2^20 bytes. The models (docs/plans.md explains them):

  parameters held  Psi_r: the worst pipeline stage's units, tensor-split ones divided by t
  state (fp32 AdamW, 4 + 4 + 8 bytes per parameter), ZeRO over d data ranks:
                   Replicated 16 Psi_r, Zero1 (8 + 8/d) Psi_r, Zero2 (4 + 12/d) Psi_r,
                   Zero3 16 Psi_r / d
  data bytes       k (d-1)/d * 4 Psi_r: k ring passes (a reduce-scatter or an all-gather of the
                   4 Psi_r bytes of gradients or parameters) per step; an all-reduce is two.
                   Replicated and Zero1: k = 2 (once per step); Zero2: k = m + 1 (a
                   reduce-scatter per micro-batch, one all-gather after the update); Zero3:
                   k = 3 m (per micro-batch a gather before forward, one before backward, and
                   a reduce-scatter), 1.5 times Replicated when m = 1
  tensor bytes     2 (t-1)/t * 4 T H per all-reduce of [T, H] fp32 activations (T: this rank's
                   tokens per step): 4 per block, one after the embedding, one before the LM
                   head's backward
  pipeline bytes   the activations of each micro-batch forward and their gradients backward
                   (T H 4 bytes each way per step), and on the end stages the tied embedding's
                   gradient (V/t H 4 bytes)
  records          layer x micro-batch activation records a rank holds at once: L without a
                   pipeline; 1F1B min(m, S) L/S on the first stage; GPipe m L/S
  bubble           (S - 1) / m: idle time of a stage relative to its work, m micro-batches
"""

import argparse
import json
import re
import sys

MIB = float(1 << 20)


def split_top(s):
    """'A<1,2>,B' -> ['A<1,2>', 'B']."""
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        depth += ch == "<"
        depth -= ch == ">"
        cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def parse_axis(a, plan):
    """Updates plan (t, p, d, zero, schedule) from one policy spelled as in C++."""
    if m := re.fullmatch(r"(?:Replicated<(\d+)>|DP(\d+))", a):
        plan["d"] = int(m.group(1) or m.group(2))
    elif m := re.fullmatch(r"Sharded<Zero([123]),(\d+)>", a):
        plan["zero"], plan["d"] = int(m.group(1)), int(m.group(2))
    elif m := re.fullmatch(r"(?:TensorSplit<(\d+)>|TP(\d+))", a):
        plan["t"] = int(m.group(1) or m.group(2))
    elif m := re.fullmatch(r"(?:Pipeline<(\d+)(?:,(GPipe|OneFOneB))?>|PP(\d+))", a):
        plan["p"] = int(m.group(1) or m.group(3))
        plan["schedule"] = m.group(2) or "OneFOneB"
    else:
        sys.exit(f"plans_table.py: cannot read the plan axis {a!r}")


def parse_plan(name):
    plan = {"t": 1, "p": 1, "d": 1, "zero": 0, "schedule": "OneFOneB"}
    name = name.replace(" ", "")
    m = re.fullmatch(r"Hybrid<(.*)>", name)
    for a in split_top(m.group(1)) if m else [name]:
        parse_axis(a, plan)
    return plan


def expected(plan, a):
    t, p, d, z = plan["t"], plan["p"], plan["d"], plan["zero"]
    H, L, V = a.hidden, a.layers, a.vocab
    vp = -(-V // (128 * t)) * 128 * t  # vocab padded to a multiple of 128 t
    emb = vp // t * H + 2 * H
    block = (12 * H * H + 7 * H) // t + 6 * H
    lnf = 2 * H
    per = L // p
    stages = []
    for s in range(p):
        n = per * block
        if s == 0 or s == p - 1:
            n += emb  # the last stage holds the tied table too
        if s == p - 1:
            n += lnf
        stages.append(n)
    psi = max(stages)
    state = {0: 16 * psi, 1: (8 + 8 / d) * psi, 2: (4 + 12 / d) * psi, 3: 16 * psi / d}[z]
    m = (a.rows // d) // a.micro  # micro-batches per rank per step
    passes = {0: 2, 1: 2, 2: m + 1, 3: 3 * m}[z]
    data = passes * (d - 1) / d * 4 * psi
    tokens = a.rows // d * a.seq
    per_ar = 2 * (t - 1) / t * 4 * tokens * H
    ends = 2 if p == 1 else 1  # embedding forward and LM-head backward: same stage only when p == 1
    tensor = per_ar * (4 * per + ends)
    acts = 4 * tokens * H
    pipe = 0.0
    if p > 1:
        pipe = max(acts + 4 * (vp // t) * H, 2 * acts if p > 2 else 0)
    if p == 1:
        records = L
    elif plan["schedule"] == "GPipe":
        records = m * per
    else:
        records = min(m, p) * per
    bubble = (p - 1) / m if p > 1 else 0.0
    return dict(psi=psi, state=state, data=data, tensor=tensor, pipe=pipe, records=records, bubble=bubble)


def mib(x):
    return f"{x / MIB:.2f}"


def pair(measured, predicted):
    if predicted == 0 and measured < 64 * 1024:
        return "0" if measured == 0 else f"{measured / 1024:.1f} KiB"
    return f"{mib(measured)} / {mib(predicted)}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json", help="bench_plans --benchmark_out_format=json output")
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--rows", type=int, default=8, help="global batch rows")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--micro", type=int, default=2, help="rows per micro-batch")
    a = ap.parse_args()

    with open(a.json) as f:
        runs = [b for b in json.load(f)["benchmarks"] if b.get("run_type", "iteration") == "iteration"]
    to_ms = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}

    print("| plan | ranks | step ms | CPU ms, all ranks | CPU ms, busiest rank | loss | sent MiB "
          "| data MiB (meas / model) | tensor MiB (meas / model) | pipeline MiB (meas / model) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    rows = []
    for b in runs:
        name = b["name"].split("/")[0]
        e = expected(parse_plan(name), a)
        rows.append((name, b, e))
        ms = b["real_time"] * to_ms[b.get("time_unit", "ns")]
        cpu = f"{b['cpu_ms_all']:.0f} | {b['cpu_ms_max']:.0f}" if "cpu_ms_all" in b else "- | -"
        print(f"| `{name}` | {int(b['ranks'])} | {ms:.0f} | {cpu} | {b['loss']:.5f} | {mib(b['sent'])} "
              f"| {pair(b['sent_data'], e['data'])} | {pair(b['sent_tensor'], e['tensor'])} "
              f"| {pair(b['sent_pipeline'], e['pipe'])} |")
    print()
    print("| plan | params+grads+AdamW MiB (meas / model) | activations MiB | records | "
          "buffers MiB | gathered + unreduced MiB | total peak MiB | bubble |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, b, e in rows:
        buffers = mib(b["buffer_peak"]) if "buffer_peak" in b else "-"
        # ZeRO-2/3's unit buffers, counted in buffers by runs made before they had categories
        transient = mib(b["transient_peak"]) if "transient_peak" in b else "-"
        bubble = f"{e['bubble']:.2f}" if e["bubble"] else "-"
        print(f"| `{name}` | {pair(b['state_peak'], e['state'])} | {mib(b['act_peak'])} | {e['records']} "
              f"| {buffers} | {transient} | {mib(b['total_peak'])} | {bubble} |")


if __name__ == "__main__":
    main()

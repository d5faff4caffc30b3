#!/usr/bin/env python3
"""Compares one CPU training step of seqpar with PyTorch on the same shape, in one run.

Runs the Google Benchmark executable given by --seqpar (default
build/benchmarks/bench_train_step) with --benchmark_format=json, reads the benchmark named
BM_TrainStep (its real time per iteration and its "tokens_per_s" counter), then times the
same shape with PyTorch (tools/bench_torch_step.py) and prints

  implementation | ms/step | tokens/s | GFLOP/s | seqpar/PyTorch

GFLOP/s uses the same count for both: (6 P + 12 L h s) FLOPs per token. If the benchmark
reports shape counters (hidden, layers, heads, vocab, batch, seq), those set the PyTorch
shape; otherwise the flags below do, and they must match what the executable was built for.
The executable gets OMP_NUM_THREADS = --threads. If it does not exist, this says so and still
prints the PyTorch row. With --rounds N (default 3) the two run in turn N times, each round is
printed, and the medians and the median of the per-round ratios close the table.
"""

import argparse
import io
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_torch_step  # noqa: E402

SHAPE_KEYS = ("hidden", "layers", "heads", "vocab", "batch", "seq")
TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def run_seqpar(path, threads, extra_args):
    """Returns (benchmark entry dict, None) or (None, reason)."""
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        return None, f"seqpar benchmark executable not found: {path} (build the bench_train_step target)"
    cmd = [path, "--benchmark_format=json", "--benchmark_filter=^BM_TrainStep/"] + extra_args
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        return None, f"{' '.join(cmd)} exited with {proc.returncode}: {proc.stderr.strip()[-2000:]}"
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        return None, f"{path} did not print JSON ({e}); stdout starts: {proc.stdout[:200]!r}"
    runs = [b for b in report.get("benchmarks", []) if b.get("run_name", b.get("name", "")).split("/")[0]
            == "BM_TrainStep"]
    if not runs:
        names = [b.get("name") for b in report.get("benchmarks", [])]
        return None, f"no benchmark named BM_TrainStep in {path} (found {names})"
    # prefer the mean aggregate when repetitions were asked for, else the plain run
    chosen = next((b for b in runs if b.get("aggregate_name") == "mean"), None)
    chosen = chosen or next((b for b in runs if b.get("run_type", "iteration") == "iteration"), runs[0])
    if chosen.get("error_occurred"):
        return None, f"BM_TrainStep reported an error: {chosen.get('error_message')}"
    return chosen, None


def row(name, ms, tps, gflops, ratio):
    ratio_s = "" if ratio is None else f"{ratio:.2f}x"
    return f"| {name:19s} | {ms:10.2f} | {tps:12.1f} | {gflops:8.2f} | {ratio_s:>14s} |"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--seqpar", default=os.path.join(repo, "build", "benchmarks", "bench_train_step"),
                    help="Google Benchmark executable with BM_TrainStep (default build/benchmarks/bench_train_step)")
    ap.add_argument("--seqpar-arg", action="append", default=[],
                    help="extra argument for the executable (repeatable), e.g. --benchmark_min_time=5x")
    ap.add_argument("--json", action="store_true", help="also print both results as one JSON line")
    ap.add_argument("--rounds", type=int, default=3,
                    help="seqpar then PyTorch, this many times in turn (default 3): on a shared machine the "
                         "speed drifts, and rounds taken in turn see the same drift; prints each round and "
                         "the medians")
    bench_torch_step.add_shape_args(ap)
    args = ap.parse_args()
    bench_torch_step.apply_presets(args)

    rounds = []  # (seqpar result or None, torch result) per round
    why = None
    for r in range(args.rounds):
        bench, why = run_seqpar(args.seqpar, args.threads, args.seqpar_arg)
        if bench is not None and r == 0:
            for k in SHAPE_KEYS:
                if k in bench:
                    v = int(round(float(bench[k])))
                    if v != getattr(args, k):
                        print(f"note: BM_TrainStep reports {k}={v}; using it instead of {getattr(args, k)}")
                        setattr(args, k, v)
        torch_res = bench_torch_step.measure(args, log=sys.stdout if r == 0 else io.StringIO())
        rounds.append((bench, torch_res))

    params = rounds[0][1]["params"]
    fpt = bench_torch_step.flops_per_token(params, args.layers, args.hidden, args.seq)
    tokens = args.batch * args.seq
    shape = ", ".join(f"{k} {getattr(args, k)}" for k in SHAPE_KEYS)
    print(f"shape: {shape}; threads {args.threads}; params {params}; {fpt / 1e6:.2f} MFLOP/token")

    def seqpar_result(bench):
        if bench is None:
            return None
        ms = float(bench["real_time"]) * TO_MS[bench.get("time_unit", "ns")]
        tps = float(bench["tokens_per_s"]) if "tokens_per_s" in bench else tokens / (ms / 1e3)
        return {"ms_per_step": ms, "tokens_per_s": tps, "gflops": fpt * tps / 1e9, "iterations": bench.get("iterations")}

    results = [(seqpar_result(b), t) for b, t in rounds]
    torch_name = "PyTorch " + results[0][1]["torch"].split("+")[0]
    print("| implementation      |    ms/step |     tokens/s |  GFLOP/s | seqpar/PyTorch |")
    print("|---------------------|-----------:|-------------:|---------:|---------------:|")
    ratios = []
    for i, (sp, tr) in enumerate(results):
        tag = f" #{i + 1}" if len(results) > 1 else ""
        if sp is not None:
            ratios.append(sp["tokens_per_s"] / tr["tokens_per_s"])
            print(row("seqpar" + tag, sp["ms_per_step"], sp["tokens_per_s"], sp["gflops"], ratios[-1]))
        print(row(torch_name + tag, tr["ms_per_step"], tr["tokens_per_s"], tr["gflops"], None))
    if ratios:
        if len(results) > 1:
            med = statistics.median
            sp_ms = med(sp["ms_per_step"] for sp, _ in results)
            tr_ms = med(tr["ms_per_step"] for _, tr in results)
            print(f"median over {len(results)} rounds: seqpar {sp_ms:.1f} ms/step, PyTorch {tr_ms:.1f} ms/step; "
                  f"ratio per round {', '.join(f'{x:.2f}' for x in ratios)}; median ratio {med(ratios):.2f}x")
        print("seqpar/PyTorch is the throughput ratio (tokens/s): above 1 means seqpar is faster.")
    else:
        print(f"seqpar: {why}")
    if args.json:
        print(json.dumps({"rounds": [{"seqpar": sp, "pytorch": tr} for sp, tr in results], "seqpar_error": why}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

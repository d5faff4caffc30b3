#!/usr/bin/env python3
"""bf16 on the CPU, side by side in one run: seqpar against transformers.

For each shape (SeqGPT-560M, rows x tokens, default 4 x 128, 8 x 256 and 2 x 1024), one
training step (forward, backward, AdamW) of

  seqpar bf16        Trainer<SeqGPT560M, Replicated<1>, Cpu, Bf16Mixed>   (bench_cpu_bf16)
  seqpar fp32        the same in Fp32
  PyTorch autocast   BloomForCausalLM, forward under torch.autocast("cpu", dtype=torch.bfloat16)
  PyTorch fp32       the same without autocast                  (tools/bench_torch_step.py)

each in a process of its own (the peak resident memory it reports, getrusage's, is its own), on
--threads threads, one warm-up step then --steps timed ones. Then the loss curve of the tiny
model (examples/train_tiny's) in seqpar bf16 against seqpar fp32 over --curve-steps steps.
Prints the machine (its processor and flags), the GEMM path seqpar's build took, each
measurement as a JSON line as it is made, a table (the minimum and the mean wall seconds of
the timed steps, the median CPU seconds, peak resident GB, and seqpar bf16's speed-up over
each in all three) and the curve's largest relative difference; --json adds everything as one
JSON line. --fp32-shapes limits the fp32 runs to some shapes. A measurement that
fails (killed for memory, say) or, for autocast, runs past --autocast-limit is recorded as
unfinished and the run goes on.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def machine():
    info = {"model_name": "?", "family": "?", "model": "?", "flags": [], "cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key == "model name":
                    info["model_name"] = value
                elif key == "cpu family":
                    info["family"] = value
                elif key == "model":
                    info["model"] = value
                elif key == "flags":
                    wanted = ("avx2", "fma", "f16c", "avx512f", "avx512_bf16", "amx_bf16")
                    have = set(value.split())
                    info["flags"] = [f for f in wanted if f in have]
                    break
    except OSError:
        pass
    return info


class Unfinished(Exception):
    """A measurement stopped at its time limit, or that failed (killed for memory, say)."""


def run(cmd, env=None, limit=None):
    """Runs cmd; returns its last JSON line. Past limit seconds it is stopped (Unfinished)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, **(env or {})))
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise Unfinished(f"not finished in {limit:.0f} s")
    if proc.returncode != 0:
        raise Unfinished(f"{os.path.basename(cmd[1] if cmd[0] == sys.executable else cmd[0])} exited with "
                         f"{proc.returncode}: {err.strip()[-300:]}")
    lines = [l for l in out.splitlines() if l.startswith("{")]
    if not lines:
        raise RuntimeError(f"{' '.join(cmd)} printed no JSON: {out[-500:]}")
    return json.loads(lines[-1])


def seqpar_step(exe, precision, rows, seq, steps, threads):
    r = run([exe, "step", precision, str(rows), str(seq), str(steps)], {"OMP_NUM_THREADS": str(threads)})
    return {"s": statistics.median(r["ms_per_step"]) / 1e3, "cpu_s": statistics.median(r["cpu_ms_per_step"]) / 1e3,
            "rss": r["max_rss_bytes"], "loss": r["loss"], "gemm_path": r["gemm_path"],
            "arena_peak": r["arena_peak_bytes"], "all_s": [t / 1e3 for t in r["ms_per_step"]]}


def torch_step(autocast, rows, seq, steps, warmup, threads, limit=None):
    cmd = [sys.executable, os.path.join(HERE, "bench_torch_step.py"), "--seqgpt560m", "--batch", str(rows),
           "--seq", str(seq), "--steps", str(steps), "--warmup", str(warmup), "--threads", str(threads)]
    if autocast:
        cmd.append("--autocast")
    t0 = time.monotonic()
    r = run(cmd, limit=limit)
    return {"process_s": time.monotonic() - t0, "s": statistics.median(r["ms_per_step_all"]) / 1e3,
            "cpu_s": statistics.median(r["cpu_ms_per_step"]) / 1e3,
            "rss": r["max_rss_bytes"], "torch": r["torch"], "all_s": [t / 1e3 for t in r["ms_per_step_all"]]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seqpar", default=os.path.join(REPO, "build", "benchmarks", "bench_cpu_bf16"),
                    help="the bench_cpu_bf16 executable (default build/benchmarks/bench_cpu_bf16)")
    ap.add_argument("--shapes", default="4x128,8x256,2x1024",
                    help="rows x tokens, comma separated (default 4x128,8x256,2x1024)")
    ap.add_argument("--fp32-shapes", default=None,
                    help="the shapes seqpar and PyTorch run in fp32 (default: all)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2, help="timed steps per measurement (default 2)")
    ap.add_argument("--curve-steps", type=int, default=50)
    ap.add_argument("--skip-torch", action="store_true", help="seqpar only (no PyTorch installed)")
    ap.add_argument("--autocast-shapes", default=None,
                    help="the shapes PyTorch autocast runs (default: all); where the CPU has no bf16 "
                         "matrix instructions its bf16 products take a slow path (on an AVX2 EPYC, "
                         "0.4 GFLOP/s: an hour a SeqGPT-560M step)")
    ap.add_argument("--autocast-steps", type=int, default=None, help="timed autocast steps (default --steps)")
    ap.add_argument("--autocast-warmup", type=int, default=1, help="autocast warm-up steps (default 1)")
    ap.add_argument("--autocast-limit", type=float, default=None,
                    help="seconds after which an autocast measurement is stopped; the table then says "
                         "that its steps took longer (default: no limit)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    m = machine()
    print(f"machine: {m['model_name']} (family {m['family']}, model {m['model']}), {m['cpus']} CPUs, "
          f"flags: {' '.join(m['flags']) or 'none of avx2 fma f16c avx512f avx512_bf16 amx_bf16'}; "
          f"{args.threads} threads", flush=True)
    results = []

    class Entry(dict):
        """A shape's measurements; each is printed (one JSON line) as it is made."""

        def __setitem__(self, name, value):
            super().__setitem__(name, value)
            if isinstance(value, dict):
                print(json.dumps({"shape": f"{self['rows']}x{self['seq']}", "implementation": name, **value}),
                      flush=True)

    for shape in args.shapes.split(","):
        rows, seq = (int(x) for x in shape.split("x"))
        entry = Entry(rows=rows, seq=seq)
        entry["seqpar bf16"] = seqpar_step(args.seqpar, "bf16", rows, seq, args.steps, args.threads)
        print(f"seqpar's bf16 GEMM path: {entry['seqpar bf16']['gemm_path']}", flush=True)
        fp32 = args.fp32_shapes is None or shape in args.fp32_shapes.split(",")
        if fp32:
            entry["seqpar fp32"] = seqpar_step(args.seqpar, "fp32", rows, seq, args.steps, args.threads)
        if not args.skip_torch:
            if args.autocast_shapes is None or shape in args.autocast_shapes.split(","):
                t0 = time.monotonic()
                try:
                    entry["PyTorch autocast bf16"] = torch_step(True, rows, seq, args.autocast_steps or args.steps,
                                                                args.autocast_warmup, args.threads,
                                                                args.autocast_limit)
                except Unfinished as e:
                    entry["PyTorch autocast bf16"] = {"unfinished": str(e), "elapsed_s": time.monotonic() - t0,
                                                      "steps": args.autocast_warmup + (args.autocast_steps or args.steps)}
            if fp32:
                try:
                    entry["PyTorch fp32"] = torch_step(False, rows, seq, args.steps, 1, args.threads)
                except Unfinished as e:
                    entry["PyTorch fp32"] = {"unfinished": str(e)}
        results.append(entry)
        print(f"{rows} x {seq}: " + ", ".join(f"{k} " + (f"{v['s']:.1f} s" if "s" in v else v["unfinished"])
                                             for k, v in entry.items() if isinstance(v, dict)), flush=True)

    torch_version = next((v["torch"] for e in results for k, v in e.items() if isinstance(v, dict) and "torch" in v),
                         None)
    print(f"\nSeqGPT-560M, one training step (AdamW), {args.threads} threads"
          + (f"; PyTorch {torch_version}" if torch_version else ""))
    print("| shape | implementation | s/step min | mean | CPU s/step | peak resident GB | seqpar bf16 speed-up "
          "(min, mean, CPU) | steps timed |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for e in results:
        ours = e["seqpar bf16"]
        ours_min, ours_mean = min(ours["all_s"]), statistics.mean(ours["all_s"])
        for name, v in e.items():
            if not isinstance(v, dict):
                continue
            if "s" not in v:
                what = (f"stopped after {v['elapsed_s']:.0f} s with {v['steps']} step(s) (model construction "
                        f"included) unfinished" if "elapsed_s" in v else v["unfinished"])
                print(f"| {e['rows']} x {e['seq']} | {name} | {what} | - | - | - | - | 0 |")
                continue
            v_min, v_mean = min(v["all_s"]), statistics.mean(v["all_s"])
            print(f"| {e['rows']} x {e['seq']} | {name} | {v_min:.2f} | {v_mean:.2f} | {v['cpu_s']:.2f} "
                  f"| {v['rss'] / 1e9:.2f} | {v_min / ours_min:.2f}x, {v_mean / ours_mean:.2f}x, "
                  f"{v['cpu_s'] / ours['cpu_s']:.2f}x | {len(v['all_s'])} |")

    curve = run([args.seqpar, "curve", str(args.curve_steps)], {"OMP_NUM_THREADS": str(args.threads)})
    diff = [abs(b - f) / abs(f) for f, b in zip(curve["fp32"], curve["bf16"])]
    print(f"\ntiny model, {args.curve_steps} steps: loss fp32 {curve['fp32'][0]:.3f} -> {curve['fp32'][-1]:.3f}, "
          f"bf16 {curve['bf16'][0]:.3f} -> {curve['bf16'][-1]:.3f}; largest relative difference "
          f"{max(diff):.2e} (step {diff.index(max(diff)) + 1})")
    if args.json:
        print(json.dumps({"machine": m, "threads": args.threads, "results": results, "curve": curve}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

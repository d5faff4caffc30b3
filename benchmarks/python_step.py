#!/usr/bin/env python3
"""The SeqGPT-560M training step called from Python against the same step called from C++,
side by side in one run (docs/python.md#speed).

    PYTHONPATH=build-test/python python3 benchmarks/python_step.py \
        [--bench build-test/benchmarks/bench_cpu_bf16] [--precision bf16] [--rows 4 --seq 128]
        [--steps 3]

In one process, one CompiledTrainer (plan single, AdamW as bench_cpu_bf16's) takes a warm-up
step, then STEPS steps called from Python (CompiledTrainer.step: the arrays read in place, the
GIL released, the statistics made a dict) interleaved with STEPS steps looped inside C++ on the
same trainer and batch. With --bench, the C++ benchmark program's own step of the same shape
runs as well, a process of its own after this one's (its Trainer<SeqGPT560M, Replicated<1>,
Cpu, Bf16Mixed>, not through the Python package at all). Prints a table and JSON.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

import seqpar


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--precision", default="bf16", choices=["fp32", "bf16"])
    p.add_argument("--rows", type=int, default=4)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--bench", help="bench_cpu_bf16 of the same build, run after this one")
    a = p.parse_args()

    args = seqpar.TrainingArguments("unused", plan="single", precision=a.precision,
                                    max_steps=1000, learning_rate=1e-4, warmup_ratio=0.0,
                                    adam_beta2=0.95, weight_decay=0.1, max_grad_norm=1.0,
                                    threads=a.threads, lr_scheduler_type="constant_with_warmup")
    t0 = time.perf_counter()
    trainer = seqpar.CompiledTrainer("seqgpt560m", args)
    built = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 250880, size=(a.rows, a.seq), dtype=np.int32)
    labels = ids.copy()

    trainer.step(ids, labels)  # warm-up: first-touch allocations
    python, cpp = [], []
    for _ in range(a.steps):
        t = time.perf_counter()
        trainer.step(ids, labels)
        python.append(time.perf_counter() - t)
        cpp += trainer._trainer.steps_in_cpp(ids, labels, 1)

    rows = [("Python: CompiledTrainer.step", python), ("C++: the same trainer, looped in C++", cpp)]
    result = {"precision": a.precision, "rows": a.rows, "seq": a.seq, "steps": a.steps,
              "threads": a.threads, "build_s": built,
              "python_s": python, "cpp_s": cpp,
              "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    if a.bench:
        done = subprocess.run([a.bench, "step", a.precision, str(a.rows), str(a.seq), str(a.steps)],
                              capture_output=True, text=True, check=True,
                              env=dict(os.environ, OMP_NUM_THREADS=str(a.threads)))
        bench = json.loads(done.stdout.strip().splitlines()[-1])
        program = [ms / 1e3 for ms in bench["ms_per_step"]]
        rows.append(("C++: bench_cpu_bf16, a process of its own", program))
        result["bench_s"] = program  # (its peak RSS would count this process's, forked)

    print(f"SeqGPT-560M step, {a.precision}, {a.rows} x {a.seq}, {a.threads} threads, "
          f"{a.steps} timed steps each after a warm-up")
    print(f"{'':44} {'min s':>8} {'mean s':>8} {'vs C++ loop (min, mean)':>26}")
    base_min, base_mean = min(cpp), statistics.mean(cpp)
    for name, times in rows:
        print(f"{name:44} {min(times):8.3f} {statistics.mean(times):8.3f} "
              f"{min(times) / base_min:12.4f} {statistics.mean(times) / base_mean:12.4f}")
    # What calling from Python costs a step, on its own: the tiny model's steps (microseconds
    # of arithmetic), 200 called from Python against 200 looped in C++, in alternate blocks.
    tiny = seqpar.CompiledTrainer("tiny", seqpar.TrainingArguments(
        "unused", plan="single", max_steps=100000, threads=1))
    small = rng.integers(0, 4608, size=(1, 8), dtype=np.int32)
    for _ in range(20):
        tiny.step(small, small)
    per_python, per_cpp = [], []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(40):
            tiny.step(small, small)
        per_python.append((time.perf_counter() - t) / 40)
        t = time.perf_counter()
        tiny._trainer.steps_in_cpp(small, small, 40)
        per_cpp.append((time.perf_counter() - t) / 40)
    overhead = min(per_python) - min(per_cpp)
    result["call_overhead_s"] = overhead
    print(f"the call from Python: {overhead * 1e6:.1f} us a step (tiny model: "
          f"{min(per_python) * 1e6:.1f} us from Python, {min(per_cpp) * 1e6:.1f} us in C++), "
          f"{overhead / base_min * 100:.5f}% of this step")
    print(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""torch.optim.AdamW(foreach=True) on the CPU, side by side with bench_host_adamw.

Times optimizer steps over the same number of fp32 parameters as benchmarks/host_adamw.cpp
(an eighth of SeqGPT-560M's 559,214,592 by default; --params sets it), laid out as the
model's tensors are (each block's weights and biases, repeated until the count is reached),
with gradients and moments that are not zeros. Prints params/s, GB/s at 28 bytes a
parameter (p, g, m, v read; p, m, v written) and the seconds a whole-model step would take.

    python3 tools/bench_host_adamw.py --threads 1 2
    build-test/benchmarks/bench_host_adamw --benchmark_filter=.
"""

import argparse
import time

SEQGPT_PARAMS = 559_214_592
HIDDEN = 1024
# One BLOOM block of SeqGPT-560M: (shape) of every tensor, 12,596,224 parameters.
BLOCK = [(HIDDEN,), (HIDDEN,), (3 * HIDDEN, HIDDEN), (3 * HIDDEN,), (HIDDEN, HIDDEN), (HIDDEN,),
         (HIDDEN,), (HIDDEN,), (4 * HIDDEN, HIDDEN), (4 * HIDDEN,), (HIDDEN, 4 * HIDDEN), (HIDDEN,)]


def shapes(count):
    out, n = [], 0
    while n < count:
        for s in BLOCK:
            numel = 1
            for d in s:
                numel *= d
            if n + numel > count:
                out.append((count - n,))
                return out
            out.append(s)
            n += numel
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--params", type=int, default=SEQGPT_PARAMS // 8)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()
    import torch

    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s) * 0.02) for s in shapes(args.params)]
    for p in params:
        p.grad = torch.randn_like(p) * 1e-3
    opt = torch.optim.AdamW(params, lr=2e-5, weight_decay=0.01, foreach=True)
    opt.step()  # the moments exist and are not zeros
    print(f"torch {torch.__version__}: AdamW(foreach=True), {args.params:,} fp32 parameters "
          f"in {len(params)} tensors")
    for t in args.threads:
        torch.set_num_threads(t)
        opt.step()
        times = []
        for _ in range(args.steps):
            t0 = time.perf_counter()
            opt.step()
            times.append(time.perf_counter() - t0)
        best = min(times)
        rate = args.params / best
        print(f"threads {t}: {best * 1e3:9.1f} ms/step  {rate / 1e6:8.1f} M params/s  "
              f"{rate * 28 / 1e9:6.2f} GB/s  whole SeqGPT-560M step {SEQGPT_PARAMS / rate:6.2f} s")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Times one full training step of a BloomForCausalLM in float32 on the CPU with PyTorch.

A step is forward, backward (loss from labels = input ids, no padding), AdamW step and
zero_grad. With --autocast the forward (and the loss) runs under
torch.autocast("cpu", dtype=torch.bfloat16): bf16 matrix products on fp32 weights, the
optimizer in fp32, as a user adds it in one line. --seqgpt560m takes SeqGPT-560M's shape
(vocab 250880, hidden 1024, 24 layers, 16 heads). After the warm-up steps, N steps are
timed one by one (wall and this process's CPU time). The last line printed is JSON:
{"ms_per_step", "cpu_ms_per_step", "tokens_per_s", "params", "flops_per_token", "gflops",
"max_rss_bytes", ...}, with

  flops_per_token = 6 * P + 12 * L * h * s

(P: all parameters, the tied embedding counted once, so the LM head matmul is included;
L layers, h hidden size, s sequence length: the attention score and context matmuls).

This is the PyTorch side of tools/compare_cpu_step.py and tools/compare_cpu_bf16.py (which
run it as a process of its own per measurement, so that max_rss_bytes, the process's peak
resident memory, is that measurement's).
"""

import argparse
import contextlib
import json
import resource
import statistics
import sys
import time


def add_shape_args(ap):
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first (default 2)")
    ap.add_argument("--steps", type=int, default=10, help="timed steps (default 10)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--autocast", action="store_true",
                    help='forward and loss under torch.autocast("cpu", dtype=torch.bfloat16)')
    ap.add_argument("--seqgpt560m", action="store_true",
                    help="SeqGPT-560M's shape: vocab 250880, hidden 1024, 24 layers, 16 heads")


def apply_presets(args):
    if getattr(args, "seqgpt560m", False):
        args.vocab, args.hidden, args.layers, args.heads = 250880, 1024, 24, 16


def param_count(hidden, layers, vocab):
    """Parameters of a BLOOM model with a tied LM head (what model.parameters() holds)."""
    h = hidden
    per_layer = (3 * h * h + 3 * h) + (h * h + h) + (4 * h * h + 4 * h) + (4 * h * h + h) + 4 * h
    return vocab * h + 2 * h + layers * per_layer + 2 * h


def flops_per_token(params, layers, hidden, seq):
    return 6 * params + 12 * layers * hidden * seq


def measure(args, log=sys.stdout):
    """Runs the timing; returns the result dict (also used by compare_cpu_step.py)."""
    import torch
    import transformers
    from transformers import BloomConfig, BloomForCausalLM

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"threads {torch.get_num_threads()}", file=log)

    cfg = BloomConfig(vocab_size=args.vocab, hidden_size=args.hidden, n_head=args.heads, n_layer=args.layers,
                      layer_norm_epsilon=1e-5, hidden_dropout=0.0, attention_dropout=0.0, use_cache=False)
    try:
        model = BloomForCausalLM._from_config(cfg, attn_implementation="eager")
    except TypeError:
        model = BloomForCausalLM(cfg)
    model = model.to(torch.float32).train()
    params = sum(p.numel() for p in model.parameters())
    assert params == param_count(args.hidden, args.layers, args.vocab), "parameter count formula is off"

    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    gen = torch.Generator().manual_seed(args.seed)
    ids = torch.randint(0, args.vocab, (args.batch, args.seq), generator=gen, dtype=torch.int64)

    def forward():
        if getattr(args, "autocast", False):
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def step():
        with forward():
            loss = model(input_ids=ids, labels=ids, use_cache=False).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(args.warmup):
        step()
    times, cpu_times = [], []
    for _ in range(args.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        step()
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)

    ms = 1e3 * statistics.mean(times)
    tokens = args.batch * args.seq
    fpt = flops_per_token(params, args.layers, args.hidden, args.seq)
    tps = tokens / (ms / 1e3)
    return {
        "ms_per_step": ms,
        "ms_per_step_median": 1e3 * statistics.median(times),
        "ms_per_step_min": 1e3 * min(times),
        "ms_per_step_all": [1e3 * t for t in times],
        "cpu_ms_per_step": [1e3 * t for t in cpu_times],
        "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "autocast": bool(getattr(args, "autocast", False)),
        "tokens_per_s": tps,
        "params": params,
        "flops_per_token": fpt,
        "gflops": fpt * tps / 1e9,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "shape": {"hidden": args.hidden, "layers": args.layers, "heads": args.heads, "vocab": args.vocab,
                  "batch": args.batch, "seq": args.seq},
        "steps": args.steps,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_shape_args(ap)
    args = ap.parse_args()
    apply_presets(args)
    print(json.dumps(measure(args)))


if __name__ == "__main__":
    main()

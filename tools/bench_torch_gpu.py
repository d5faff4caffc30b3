#!/usr/bin/env python3
"""Times Hugging Face BloomForCausalLM training steps on one GPU: the PyTorch side of
tools/gpu-check.sh's throughput comparison with seqpar.

The model is SeqGPT-560M's shape built from scratch (nothing is downloaded): vocab 250880,
hidden 1024, 24 layers, 16 heads. Weights stay fp32 (the master copy); the forward and
backward run under torch.autocast(bfloat16); the optimizer is torch.optim.AdamW(fused=True),
with gradient clipping at 1.0 as seqpar's Trainer does. Attention uses PyTorch SDPA when
the installed transformers supports it for BLOOM, else the eager implementation (the log
and the JSON say which).

A step is forward, loss (labels = input ids), backward, clip, AdamW step, zero_grad, on
random token ids (never zeros). After --warmup untimed steps, --steps steps are timed
together (wall clock between two device synchronisations). For each batch shape the last line is JSON:

  {"impl": "pytorch", "batch": B, "seq": S, "tokens_per_s": ..., "mfu": ...,
   "peak_bytes": ..., "ms_per_step": ..., ...}

with MFU = tokens_per_s * (6 P + 12 L h s) / 989e12 (P: parameters, the tied embedding
counted once; L layers; h hidden; s sequence length; 989 TFLOP/s: H200 dense bf16), and
peak_bytes = torch.cuda.max_memory_allocated() over the timed steps (the optimizer state,
made in the warm-up, is live throughout).
"""

import argparse
import json
import sys
import time

PEAK_FLOPS = 989e12


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="8x512,16x512", help="comma-separated BATCHxSEQ (default 8x512,16x512)")
    ap.add_argument("--vocab", type=int, default=250880)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    ap.add_argument("--steps", type=int, default=10, help="timed steps (default 10)")
    ap.add_argument("--attention", choices=["sdpa", "eager"], default="sdpa",
                    help="attention implementation to ask for (default sdpa; falls back to eager)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda", help="cuda (default); cpu only checks the script itself")
    return ap.parse_args(argv)


def build_model(args, log):
    import torch
    from transformers import BloomConfig, BloomForCausalLM

    cfg = BloomConfig(vocab_size=args.vocab, hidden_size=args.hidden, n_layer=args.layers, n_head=args.heads,
                      layer_norm_epsilon=1e-5, hidden_dropout=0.0, attention_dropout=0.0, use_cache=False)
    attention = args.attention
    with torch.device(args.device):
        try:
            model = BloomForCausalLM._from_config(cfg, attn_implementation=attention)
        except (ValueError, TypeError, ImportError, NotImplementedError) as e:
            print(f"attention '{attention}' is not available for BLOOM here ({type(e).__name__}: "
                  f"{str(e).split('. ')[0]}); using eager", file=log)
            attention = "eager"
            try:
                model = BloomForCausalLM._from_config(cfg, attn_implementation="eager")
            except TypeError:
                model = BloomForCausalLM(cfg)
    used = getattr(model.config, "_attn_implementation", attention) or attention
    return model.float().train(), used


def flops_per_token(params, layers, hidden, seq):
    return 6 * params + 12 * layers * hidden * seq


def run_shape(args, model, attention, batch, seq, log):
    import torch

    params = sum(p.numel() for p in model.parameters())
    cuda = args.device == "cuda"
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                            fused=True)
    gen = torch.Generator(device=args.device).manual_seed(args.seed)
    ids = torch.randint(0, args.vocab, (batch, seq), generator=gen, device=args.device, dtype=torch.int64)

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def step():
        with torch.autocast(args.device, dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids, use_cache=False).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    sync()
    t0 = time.perf_counter()
    for _ in range(args.warmup):
        loss = step()
    sync()
    if cuda:  # the peak of the timed steps, as seqpar's figure
        torch.cuda.reset_peak_memory_stats()
    t1 = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    sync()
    t2 = time.perf_counter()
    warm_s = t1 - t0
    ms = (t2 - t1) * 1e3 / args.steps
    tokens_per_s = batch * seq / (ms / 1e3)
    fpt = flops_per_token(params, args.layers, args.hidden, seq)
    result = {
        "impl": "pytorch",
        "batch": batch,
        "seq": seq,
        "tokens_per_s": tokens_per_s,
        "mfu": tokens_per_s * fpt / PEAK_FLOPS,
        "peak_bytes": torch.cuda.max_memory_allocated() if cuda else 0,
        "ms_per_step": ms,
        "loss": float(loss.item()),
        "params": params,
        "flops_per_token": fpt,
        "warmup_s": warm_s,
        "steps": args.steps,
        "attention": attention,
        "precision": "autocast bf16, fp32 weights, fused AdamW",
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if cuda else "cpu",
    }
    del opt
    model.zero_grad(set_to_none=True)
    if cuda:
        torch.cuda.empty_cache()
    return result


def main(argv=None):
    args = parse_args(argv)
    log = sys.stdout
    try:
        import torch
        import transformers
    except ImportError as e:
        print(f"bench_torch_gpu: {e}", file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("bench_torch_gpu: torch sees no CUDA device", file=sys.stderr)
        return 2
    device_name = torch.cuda.get_device_name() if args.device == "cuda" else args.device
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, device {device_name}", file=log)
    torch.manual_seed(args.seed)
    model, attention = build_model(args, log)
    params = sum(p.numel() for p in model.parameters())
    print(f"BloomForCausalLM: {params:,} parameters, attention {attention}", file=log)
    status = 0
    for shape in args.shapes.split(","):
        batch, seq = (int(v) for v in shape.lower().split("x"))
        try:
            r = run_shape(args, model, attention, batch, seq, log)
        except torch.cuda.OutOfMemoryError as e:
            print(f"{batch}x{seq}: out of memory: {str(e).splitlines()[0]}", file=log)
            print(json.dumps({"impl": "pytorch", "batch": batch, "seq": seq, "error": "out of memory"}), file=log)
            if args.device == "cuda":
                torch.cuda.empty_cache()
            status = 1
            continue
        print(f"{batch}x{seq}: {r['ms_per_step']:.1f} ms/step, {r['tokens_per_s']:,.0f} tokens/s, "
              f"MFU {100 * r['mfu']:.1f}%, peak {r['peak_bytes'] / 2**30:.2f} GiB, loss {r['loss']:.3f}", file=log)
        print(json.dumps(r), file=log, flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())

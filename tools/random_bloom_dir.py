#!/usr/bin/env python3
"""Writes a Hugging Face model directory of a published BLOOM shape with random weights:
what `seqgpt_ner --weights DIR` takes, for trying a shape whose weights are not at hand
(docs/ner.md, "Every published BLOOM shape").

BloomForCausalLM(BloomConfig(...)) of the shape, initialised as transformers does, saved in
one safetensors file (save_pretrained with one shard) in --dtype, with --tokenizer copied as
tokenizer.json (BLOOM's own is 14.5 MB and not needed to train: any tokenizer.json whose ids
lie below the vocabulary, e.g. the one a tiny seqgpt_ner run writes, will do).

Usage: python3 tools/random_bloom_dir.py DIR --shape bloom-1b7 --tokenizer FILE [--dtype bf16]
"""

import argparse
import shutil
import sys

# hidden_size, n_layer, n_head of bigscience/bloom-<size> (bloomz-<size> is the same shape).
SHAPES = {
    "bloom-560m": (1024, 24, 16),
    "bloom-1b1": (1536, 24, 16),
    "bloom-1b7": (2048, 24, 16),
    "bloom-3b": (2560, 30, 32),
    "bloom-7b1": (4096, 30, 32),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--shape", choices=sorted(SHAPES), required=True)
    ap.add_argument("--tokenizer", required=True, help="a tokenizer.json to copy into DIR")
    ap.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], default="bf16")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import torch
    from transformers import BloomConfig, BloomForCausalLM

    hidden, layers, heads = SHAPES[args.shape]
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    torch.manual_seed(args.seed)
    torch.set_default_dtype(dtype)  # the weights are made in the saved type: half the memory
    cfg = BloomConfig(vocab_size=250880, hidden_size=hidden, n_layer=layers, n_head=heads,
                      layer_norm_epsilon=1e-5, bos_token_id=1, eos_token_id=2, pad_token_id=3)
    model = BloomForCausalLM(cfg).eval()
    count = sum(p.numel() for p in model.parameters())
    model.save_pretrained(args.dir, max_shard_size="100GB", safe_serialization=True)
    shutil.copy(args.tokenizer, f"{args.dir}/tokenizer.json")
    print(f"{args.dir}: {args.shape} ({count:,} parameters, {args.dtype}) with {args.tokenizer}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

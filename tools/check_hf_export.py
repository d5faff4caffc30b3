#!/usr/bin/env python3
"""Checks that a safetensors file written by seqpar's Trainer::save_weights loads into
Hugging Face transformers' BloomForCausalLM and computes what seqpar computed.

1. Builds BloomForCausalLM(BloomConfig(...)) in float32 with eager attention. The sizes come
   from the flags or, where a flag is left out, from the file: its metadata (seqpar writes
   seqpar.vocab_size, seqpar.hidden, seqpar.layers, seqpar.heads), else its shapes (vocab and
   hidden from transformer.word_embeddings.weight, the layer count from the transformer.h.<i>.
   names). No shape fixes the head count: without metadata, --heads is required.
2. Loads the file with load_state_dict(strict=False) and requires that the only missing key
   is lm_head.weight (tied to the embedding, which the file holds) and that nothing in the
   file is unexpected. Every tensor must also have the shape the config gives it.
3. Runs a forward pass on token ids: those of --expected if given, else --ids, else random
   ids from --seed. With --expected (a safetensors file with "input_ids" I64 [rows, seq],
   "logits" F32 [rows, seq, vocab] or [rows * seq, vocab], and optionally "attention_mask"
   [rows, seq]), compares the logits with the relative L2 error
   ||hf - expected|| / ||expected|| against --tolerance (default 1e-4).

Prints what it checked; exits 1 if any check fails, 2 on bad input.

Usage:
  python3 tools/check_hf_export.py WEIGHTS.safetensors [--expected LOGITS.safetensors]
      [--vocab V] [--hidden H] [--layers L] [--heads N] [--eps 1e-5]
      [--ids 5,6,7 | --rows 2 --seq 16 --seed 0]
      [--tolerance 1e-4]
"""

import argparse
import re
import sys

import torch
from safetensors import safe_open
from safetensors.torch import load_file
from transformers import BloomConfig, BloomForCausalLM

PREFIX = "transformer."
TIED = "lm_head.weight"


def fail_input(message):
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def read_header(path):
    try:
        with safe_open(path, framework="pt") as f:
            shapes = {k: list(f.get_slice(k).get_shape()) for k in f.keys()}
            dtypes = {k: f.get_slice(k).get_dtype() for k in f.keys()}
            return shapes, dtypes, f.metadata() or {}
    except Exception as e:  # safetensors raises several types for a bad file
        fail_input(f"{path}: not a readable safetensors file ({e})")


def from_metadata(metadata, key, path):
    value = metadata.get("seqpar." + key)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        fail_input(f"{path}: metadata seqpar.{key} = {value!r} is not an integer")


def infer_dims(args, shapes, metadata):
    """(vocab, hidden, layers, heads): a flag, else the file's metadata, else its shapes."""
    def pick(flag, key):
        return flag if flag is not None else from_metadata(metadata, key, args.weights)

    emb = PREFIX + "word_embeddings.weight"
    vocab, hidden = pick(args.vocab, "vocab_size"), pick(args.hidden, "hidden")
    layers, heads = pick(args.layers, "layers"), pick(args.heads, "heads")
    if (vocab is None or hidden is None) and emb not in shapes:
        fail_input(f"{args.weights}: no {emb} and no seqpar metadata; give --vocab and --hidden")
    vocab = vocab if vocab is not None else shapes[emb][0]
    hidden = hidden if hidden is not None else shapes[emb][1]
    if layers is None:
        found = {int(m.group(1)) for k in shapes if (m := re.match(r"transformer\.h\.(\d+)\.", k))}
        if not found:
            fail_input(f"{args.weights}: no transformer.h.<i>. tensors; give --layers")
        layers = max(found) + 1
    if heads is None:
        fail_input(f"{args.weights}: no seqpar.heads metadata, and no shape fixes the head count; "
                   "give --heads")
    if heads <= 0 or hidden % heads != 0:
        fail_input(f"hidden {hidden} is not divisible by heads {heads}")
    return vocab, hidden, layers, heads


def make_model(vocab, hidden, layers, heads, eps):
    cfg = BloomConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        n_layer=layers,
        n_head=heads,
        layer_norm_epsilon=eps,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        apply_residual_connection_post_layernorm=False,
        pretraining_tp=1,
        slow_but_exact=False,
        use_cache=False,
        tie_word_embeddings=True,
    )
    try:
        model = BloomForCausalLM._from_config(cfg, attn_implementation="eager")
    except TypeError:  # versions without the argument only have eager attention for BLOOM
        model = BloomForCausalLM(cfg)
    return model.to(torch.float32).eval()


def brief(keys, limit=6):
    """A key list for a message: the first `limit` names and how many there are in all."""
    shown = ", ".join(keys[:limit])
    return f"[{shown}{', ...' if len(keys) > limit else ''}] ({len(keys)})"


def check_load(model, state):
    """Loads `state` (names without a prefix change) and returns a list of problems."""
    problems = []
    want = model.state_dict()
    for name, t in state.items():
        if name in want and tuple(want[name].shape) != tuple(t.shape):
            problems.append(f"{name}: shape {list(t.shape)} in the file, "
                            f"{list(want[name].shape)} in the model")
    if problems:
        return problems
    result = model.load_state_dict(state, strict=False)
    missing, unexpected = sorted(result.missing_keys), sorted(result.unexpected_keys)
    print(f"load_state_dict(strict=False): {len(state)} tensors, missing {brief(missing)}, "
          f"unexpected {brief(unexpected)}")
    if missing != [TIED]:
        problems.append(f"missing keys {brief(missing)}; expected exactly [{TIED}] (the tied LM head)")
    if unexpected:
        problems.append(f"unexpected keys {brief(unexpected)}")
    if model.lm_head.weight.data_ptr() != model.transformer.word_embeddings.weight.data_ptr():
        problems.append(f"{TIED} is not tied to transformer.word_embeddings.weight")
    return problems


def read_expected(path, vocab):
    try:
        t = load_file(path)
    except Exception as e:
        fail_input(f"{path}: not a readable safetensors file ({e})")
    for key in ("input_ids", "logits"):
        if key not in t:
            fail_input(f"{path}: no tensor named '{key}' (it has {sorted(t)})")
    ids = t["input_ids"]
    if ids.dtype != torch.int64 or ids.dim() != 2:
        fail_input(f"{path}: input_ids must be I64 [rows, seq], got {ids.dtype} {list(ids.shape)}")
    rows, seq = ids.shape
    logits = t["logits"]
    if logits.dtype != torch.float32 or logits.numel() != rows * seq * vocab:
        fail_input(f"{path}: logits must be F32 with rows * seq * vocab = {rows} * {seq} * {vocab} "
                   f"elements, got {logits.dtype} {list(logits.shape)}")
    mask = t.get("attention_mask")
    if mask is not None and list(mask.shape) != [rows, seq]:
        fail_input(f"{path}: attention_mask must be [rows, seq] = [{rows}, {seq}], got {list(mask.shape)}")
    return ids, mask, logits.reshape(rows, seq, vocab)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("weights", help="safetensors file written by Trainer::save_weights")
    ap.add_argument("--heads", type=int, help="attention heads (default: metadata seqpar.heads)")
    ap.add_argument("--vocab", type=int, help="default: metadata, else rows of the embedding")
    ap.add_argument("--hidden", type=int, help="default: metadata, else columns of the embedding")
    ap.add_argument("--layers", type=int, help="default: metadata, else the transformer.h.<i> blocks")
    ap.add_argument("--eps", type=float, default=1e-5, help="layernorm epsilon (default 1e-5)")
    ap.add_argument("--expected", help="safetensors with input_ids I64 and logits F32 to compare with")
    ap.add_argument("--ids", help="comma-separated token ids of one row (without --expected)")
    ap.add_argument("--rows", type=int, default=2, help="random batch rows (default 2)")
    ap.add_argument("--seq", type=int, default=16, help="random batch length (default 16)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random ids (default 0)")
    ap.add_argument("--tolerance", type=float, default=1e-4, help="relative L2 error allowed (default 1e-4)")
    args = ap.parse_args()

    shapes, dtypes, metadata = read_header(args.weights)
    vocab, hidden, layers, heads = infer_dims(args, shapes, metadata)
    print(f"{args.weights}: {len(shapes)} tensors ({', '.join(sorted(set(dtypes.values())))}), "
          f"metadata {metadata}")
    print(f"BloomConfig: vocab {vocab}, hidden {hidden}, layers {layers}, heads {heads}, eps {args.eps}")

    model = make_model(vocab, hidden, layers, heads, args.eps)
    state = {k: v.to(torch.float32) for k, v in load_file(args.weights).items()}
    problems = check_load(model, state)
    if problems:
        for p in problems:
            print(f"FAIL: {p}")
        return 1
    print("PASS: names and shapes match BloomForCausalLM; lm_head.weight is the tied embedding")

    mask = None
    expected = None
    if args.expected:
        ids, mask, expected = read_expected(args.expected, vocab)
    elif args.ids:
        ids = torch.tensor([[int(x) for x in args.ids.split(",")]], dtype=torch.int64)
    else:
        gen = torch.Generator().manual_seed(args.seed)
        ids = torch.randint(0, vocab, (args.rows, args.seq), generator=gen, dtype=torch.int64)
    if ids.numel() and (ids.min() < 0 or ids.max() >= vocab):
        fail_input(f"token ids must be in [0, {vocab}), got [{int(ids.min())}, {int(ids.max())}]")
    if mask is None:
        mask = torch.ones_like(ids)

    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask.to(torch.int64), use_cache=False).logits.float()
    if not torch.isfinite(logits).all():
        print("FAIL: the forward pass gave non-finite logits")
        return 1
    print(f"forward: input_ids {list(ids.shape)} -> logits {list(logits.shape)}, "
          f"mean {logits.mean().item():.6g}, std {logits.std().item():.6g}")
    if expected is None:
        print("no --expected file: the logits were not compared")
        return 0

    # Positions the mask drops are compared too: both sides compute them the same way.
    err = ((logits.double() - expected.double()).norm() / expected.double().norm().clamp_min(1e-30)).item()
    worst = (logits - expected).abs().max().item()
    verdict = "PASS" if err <= args.tolerance else "FAIL"
    print(f"{verdict}: logits relative L2 error {err:.3e} (tolerance {args.tolerance:.1e}), "
          f"max abs difference {worst:.3e}")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())

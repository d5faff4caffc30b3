#!/usr/bin/env python3
"""Writes tests/golden/generate_h6.safetensors: what transformers' generate() decodes.

A small random BloomForCausalLM (float32, eager attention) with spread-out logits (weights
N(0, 0.3)) and an eos whose logit varies widely (its embedding row scaled up), so that
beams end at eos at different steps; one left-padded batch of prompts that repeat tokens
(so the repetition penalty changes choices); and model.generate(..., do_sample=False) for
num_beams 1, 3 and 4, repetition_penalty 1.0 and 2.0. The C++ test
(tests/nn/test_generate_golden.cpp) asserts the same token ids. Nothing at build or test
time needs Python.

Usage: python3 tools/make_generate_golden.py [--out tests/golden]
See docs/golden.md for the contents.
"""

import argparse
import os
import sys

import torch
import transformers
from transformers import BloomConfig, BloomForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_golden import write_canonical  # noqa: E402

SPEC = dict(vocab_size=160, hidden_size=48, n_head=6, n_layer=2, seed=606)
PAD_ID, EOS_ID, BOS_ID = 3, 2, 1
MAX_NEW = 12
INIT_STD = 0.15
EOS_SCALE = 3.0  # the eos row of the tied embedding, scaled: its logit swings widely
# Real tokens of each prompt (left-padded to the longest); repeats make the penalty bite.
PROMPTS = [
    [17, 40, 17, 99, 5, 40, 123, 17, 61],
    [88, 12, 88],
    [150, 7, 7, 7, 30, 44],
    [9],
    [71, 71, 23, 5, 142, 23, 71],
]
CASES = [(1, 1.0), (1, 2.0), (3, 1.0), (4, 1.0), (4, 2.0)]


def make_model():
    cfg = BloomConfig(
        vocab_size=SPEC["vocab_size"],
        hidden_size=SPEC["hidden_size"],
        n_head=SPEC["n_head"],
        n_layer=SPEC["n_layer"],
        layer_norm_epsilon=1e-5,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        apply_residual_connection_post_layernorm=False,
        pretraining_tp=1,
        slow_but_exact=False,
        initializer_range=INIT_STD,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        pad_token_id=PAD_ID,
        tie_word_embeddings=True,
    )
    model = BloomForCausalLM._from_config(cfg, attn_implementation="eager")
    g = torch.Generator().manual_seed(SPEC["seed"])
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif "layernorm" in name or "ln_f" in name:
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(INIT_STD * torch.randn(p.shape, generator=g))
        model.transformer.word_embeddings.weight[EOS_ID] *= EOS_SCALE
    return model.eval()


def make_batch():
    seq = max(len(p) for p in PROMPTS)
    ids = torch.full((len(PROMPTS), seq), PAD_ID, dtype=torch.int64)
    mask = torch.zeros((len(PROMPTS), seq), dtype=torch.int64)
    for r, p in enumerate(PROMPTS):
        ids[r, seq - len(p) :] = torch.tensor(p)
        mask[r, seq - len(p) :] = 1
    return ids, mask


def generate(model, ids, mask, beams, penalty):
    out = model.generate(
        input_ids=ids,
        attention_mask=mask,
        do_sample=False,
        num_beams=beams,
        repetition_penalty=penalty,
        length_penalty=1.0,
        early_stopping=False,
        max_new_tokens=MAX_NEW,
        eos_token_id=EOS_ID,
        pad_token_id=PAD_ID,
        return_dict_in_generate=True,
        output_scores=True,
    )
    gen = out.sequences[:, ids.shape[1] :]
    full = torch.full((ids.shape[0], MAX_NEW), PAD_ID, dtype=torch.int64)
    full[:, : gen.shape[1]] = gen
    scores = out.sequences_scores if beams > 1 else None
    return full, scores


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "golden"))
    args = ap.parse_args()
    torch.manual_seed(0)
    model = make_model()
    ids, mask = make_batch()
    tensors = {f"param.{n}": p.detach().clone().contiguous() for n, p in model.named_parameters()}
    tensors["input_ids"] = ids
    tensors["attention_mask"] = mask
    outs = {}
    for beams, penalty in CASES:
        tag = f"b{beams}.p{penalty:g}"
        gen, scores = generate(model, ids, mask, beams, penalty)
        outs[tag] = gen
        tensors[f"generated.{tag}"] = gen
        if scores is not None:
            tensors[f"score.{tag}"] = scores.to(torch.float32).contiguous()
        ends = ["eos@%d" % (row.tolist().index(EOS_ID) + 1) if EOS_ID in row.tolist() else "max" for row in gen]
        print(tag, ends)
        for row in gen.tolist():
            print("   ", row)
    # The tests rely on beams that differ from greedy and on a penalty that changes ids.
    for a, b in [("b1.p1", "b4.p1"), ("b1.p1", "b1.p2"), ("b4.p1", "b4.p2"), ("b3.p1", "b4.p1")]:
        differ = [r for r in range(ids.shape[0]) if not torch.equal(outs[a][r], outs[b][r])]
        print(f"{a} vs {b}: rows differing {differ}")
        assert differ, f"{a} and {b} decode the same ids: the file would not test the difference"
    meta = {
        "vocab_size": str(SPEC["vocab_size"]),
        "hidden_size": str(SPEC["hidden_size"]),
        "n_head": str(SPEC["n_head"]),
        "n_layer": str(SPEC["n_layer"]),
        "layer_norm_epsilon": "1e-05",
        "pad_token_id": str(PAD_ID),
        "eos_token_id": str(EOS_ID),
        "max_new_tokens": str(MAX_NEW),
        "length_penalty": "1.0",
        "seed": str(SPEC["seed"]),
        "transformers": transformers.__version__,
        "torch": torch.__version__.split("+")[0],
    }
    path = os.path.join(args.out, "generate_h6.safetensors")
    write_canonical(tensors, meta, path)
    print("wrote", path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()

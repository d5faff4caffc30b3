#!/usr/bin/env python3
"""Checks that a model directory written by seqgpt_ner (OUT/hf, or --export-hf DIR) opens in
Hugging Face transformers and computes what seqpar computed.

1. AutoModelForCausalLM.from_pretrained(dir) gives a BloomForCausalLM in float32 with
   config.json's sizes, nothing missing from model.safetensors but the tied lm_head.weight,
   nothing unexpected, and lm_head tied to the embedding.
2. AutoTokenizer.from_pretrained(dir): its special tokens carry config.json's ids, and the
   SeqGPT prompt of --text encodes to tokens that decode back to it.
3. A forward pass on that prompt gives finite logits of the config's vocabulary.
4. With --answer (what `seqgpt_ner predict --text TEXT` answered, decoding as the run that
   wrote the directory did): transformers' generate with nothing but the prompt, that is
   with the directory's generation_config.json (greedy or beam search, its repetition
   penalty), writes the same answer for every label chunk of --labels, joined by newlines as
   seqgpt_ner joins them.

Exits 0 when every check passes, 1 when one fails, 2 on bad input, and 77 (the test's
SKIP_RETURN_CODE) when torch or transformers is not installed.

Usage:
  python3 tools/check_hf_dir.py DIR --text "..." --labels a,b,c [--answer "..."]
      [--max-new-tokens N]
"""

import argparse
import json
import os
import sys

SKIP = 77
LABELS_PER_PROMPT = 6  # seqpar::labels_per_prompt


def seqgpt_prompt(text, labels):
    # seqpar/data/prompt.hpp's seqgpt_prompt for extraction (docs/ner.md gives the format).
    return f"输入: {text}\n抽取: {'，'.join(labels)}\n输出: [GEN]"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="the model directory")
    ap.add_argument("--text", default="张伟在杭州的华鼎科技有限公司担任工程师。",
                    help="a sentence to prompt with")
    ap.add_argument("--labels", default="name,address,company,organization,position",
                    help="label set in prompt order, comma-separated")
    ap.add_argument("--answer", help="seqgpt_ner predict's answer to --text, to compare with")
    ap.add_argument("--max-new-tokens", type=int,
                    help="default: generation_config.json's max_new_tokens")
    args = ap.parse_args()

    try:
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as e:
        print(f"skipped: transformers is not installed ({e})")
        return SKIP

    for name in ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                 "tokenizer_config.json"):
        if not os.path.isfile(os.path.join(args.dir, name)):
            print(f"error: {args.dir} has no {name}", file=sys.stderr)
            return 2
    with open(os.path.join(args.dir, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    problems = []

    try:
        model, info = AutoModelForCausalLM.from_pretrained(
            args.dir, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    except TypeError:  # transformers 4 names the dtype torch_dtype
        model, info = AutoModelForCausalLM.from_pretrained(
            args.dir, torch_dtype=torch.float32, attn_implementation="eager",
            output_loading_info=True)
    model.eval()
    print(f"transformers {transformers.__version__}: {type(model).__name__}, "
          f"{sum(p.numel() for p in model.parameters())} parameters")
    if type(model).__name__ != "BloomForCausalLM":
        problems.append(f"the model is a {type(model).__name__}, not a BloomForCausalLM")
    missing = sorted(set(info.get("missing_keys", [])) - {"lm_head.weight"})
    unexpected = sorted(info.get("unexpected_keys", []))
    mismatched = info.get("mismatched_keys", [])
    if missing or unexpected or mismatched:
        problems.append(f"model.safetensors: missing {missing}, unexpected {unexpected}, "
                        f"mismatched {mismatched}")
    if model.lm_head.weight.data_ptr() != model.transformer.word_embeddings.weight.data_ptr():
        problems.append("lm_head.weight is not tied to transformer.word_embeddings.weight")
    emb = model.transformer.word_embeddings.weight
    if list(emb.shape) != [config["vocab_size"], config["hidden_size"]]:
        problems.append(f"the embedding is {list(emb.shape)}; config.json says "
                        f"[{config['vocab_size']}, {config['hidden_size']}]")

    tok = AutoTokenizer.from_pretrained(args.dir)
    print(f"tokenizer: {type(tok).__name__}, {len(tok)} tokens, padding side {tok.padding_side}")
    for role in ("bos", "eos", "pad", "unk"):
        want = config.get(f"{role}_token_id")
        have = getattr(tok, f"{role}_token_id")
        if want is not None and have != want:
            problems.append(f"tokenizer {role}_token_id {have}; config.json says {want}")
    labels = [l for l in args.labels.split(",") if l]
    if not labels:
        print("FAIL: no --labels: no prompt to check the tokenizer and the model with")
        return 1
    chunks = [labels[i:i + LABELS_PER_PROMPT] for i in range(0, len(labels), LABELS_PER_PROMPT)]
    prompts = [seqgpt_prompt(args.text, c) for c in chunks]
    for p in prompts:
        ids = tok(p, add_special_tokens=False)["input_ids"]
        back = tok.decode(ids)
        if back != p:
            problems.append(f"the prompt does not round-trip through the tokenizer: {back!r}")

    with torch.no_grad():
        ids = torch.tensor([tok(prompts[0], add_special_tokens=False)["input_ids"]])
        logits = model(input_ids=ids).logits
    if not torch.isfinite(logits).all():
        problems.append("the forward pass gave non-finite logits")
    if logits.shape[-1] != config["vocab_size"]:
        problems.append(f"logits over {logits.shape[-1]} ids; config.json says {config['vocab_size']}")
    print(f"forward: {list(ids.shape)} -> logits {list(logits.shape)}")

    compared = False
    if args.answer is not None:
        with open(os.path.join(args.dir, "generation_config.json"), encoding="utf-8") as f:
            gen = json.load(f)
        max_new = args.max_new_tokens or gen.get("max_new_tokens", 64)
        beams = gen.get("num_beams", 1)
        mode = (f"{beams} beams" if beams > 1 else "greedy") + \
            f", repetition penalty {gen.get('repetition_penalty', 1.0)}"
        answers = []
        for p in prompts:
            ids = torch.tensor([tok(p, add_special_tokens=False)["input_ids"]])
            with torch.no_grad():
                # The directory's generation_config.json decides the decoding.
                out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                     max_new_tokens=max_new)
            answers.append(tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True))
        answer = "\n".join(answers)
        if answer != args.answer:
            problems.append(f"generation ({mode}) differs:\n  transformers {answer!r}\n"
                            f"  seqgpt_ner   {args.answer!r}")
        else:
            print(f"generate ({mode}, {len(prompts)} prompt(s), at most {max_new} new tokens): "
                  f"the same answer as seqgpt_ner: {answer!r}")
        compared = True

    for p in problems:
        print(f"FAIL: {p}")
    if problems:
        return 1
    if not compared:
        # Opening and a finite forward pass are no comparison: never said to pass.
        print(f"NOT COMPARED: {args.dir} opens in transformers, but no --answer of seqgpt_ner "
              "was given to compare its generation with")
        return 2
    print(f"PASS: {args.dir} opens in transformers and computes what seqgpt_ner computed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

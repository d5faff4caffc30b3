#!/usr/bin/env python3
"""Writes the BLOOM reference files under tests/golden/ from Hugging Face transformers.

Each file holds a small random BloomForCausalLM (float32, eager attention), one left-padded
batch, and what transformers and torch compute from them: logits, loss, every gradient, and
the parameters after three AdamW steps with warmup, linear decay and gradient clipping.
The C++ tests read these files; nothing at build or test time needs Python.

The same computation is repeated in float64 and the fp32/fp64 differences are printed, so
that the tests can state tolerances that fp32 arithmetic actually supports.

Usage: python3 tools/make_golden.py [--out tests/golden] [--only h16|h12]
See docs/golden.md for the contents of each file.
"""

import argparse
import json
import os
import struct
import sys

import torch
import transformers
from safetensors.torch import load_file, save
from transformers import BloomConfig, BloomForCausalLM, get_linear_schedule_with_warmup

SPECS = {
    "h16": dict(vocab_size=250, hidden_size=64, n_head=16, n_layer=2, seed=1601),
    "h12": dict(vocab_size=300, hidden_size=96, n_head=12, n_layer=3, seed=1203),
}

BATCH = 4
SEQ = 12
PAD_ID = 3
LEFT_PADS = [0, 3, 5, 1]  # pad positions at the start of each row
EXTRA_IGNORED = 4  # non-pad positions whose label is also set to -100
LAYER_NORM_EPS = 1e-5

LR = 1e-2
BETAS = (0.9, 0.95)
ADAM_EPS = 1e-8
WEIGHT_DECAY = 0.1
WARMUP_STEPS = 2
TOTAL_STEPS = 6
TRAIN_STEPS = 3
TIED = "lm_head.weight"


def make_model(spec):
    cfg = BloomConfig(
        vocab_size=spec["vocab_size"],
        hidden_size=spec["hidden_size"],
        n_head=spec["n_head"],
        n_layer=spec["n_layer"],
        layer_norm_epsilon=LAYER_NORM_EPS,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        apply_residual_connection_post_layernorm=False,
        pretraining_tp=1,
        slow_but_exact=False,
        use_cache=False,
        unk_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=PAD_ID,
        tie_word_embeddings=True,
    )
    try:
        model = BloomForCausalLM._from_config(cfg, attn_implementation="eager")
    except TypeError:  # versions without the argument only have eager attention for BLOOM
        model = BloomForCausalLM(cfg)
    impl = getattr(model.config, "_attn_implementation", "eager")
    if impl != "eager":
        sys.exit(f"expected eager attention, transformers chose {impl!r}")
    model = model.to(torch.float32)
    assert model.lm_head.weight is model.transformer.word_embeddings.weight, "LM head must be tied"

    # N(0, 0.02) weights, then layernorms and biases moved away from 1 / 0 so they are tested.
    gen = torch.Generator().manual_seed(spec["seed"])
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            if is_layernorm(name) and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * noise)
            elif name.endswith("bias"):
                p.copy_(0.1 * noise)
            else:
                p.copy_(0.02 * noise)
    return model


def is_layernorm(name):
    return "layernorm" in name or "ln_f" in name


def no_decay(name):
    return name.endswith("bias") or is_layernorm(name)


def make_batch(spec):
    gen = torch.Generator().manual_seed(spec["seed"] + 7)
    input_ids = torch.randint(4, spec["vocab_size"], (BATCH, SEQ), generator=gen, dtype=torch.int64)
    attention_mask = torch.ones(BATCH, SEQ, dtype=torch.int64)
    for row, pads in enumerate(LEFT_PADS):
        attention_mask[row, :pads] = 0
        input_ids[row, :pads] = PAD_ID
    labels = input_ids.clone()
    labels[attention_mask == 0] = -100
    real = attention_mask.flatten().nonzero().flatten()
    pick = real[torch.randperm(real.numel(), generator=gen)[:EXTRA_IGNORED]]
    labels.view(-1)[pick] = -100
    return input_ids, attention_mask, labels


def causal_lm_loss(logits, labels):
    # Same as transformers' ForCausalLMLoss (mean over labels != -100 after the shift), but in
    # the logits' own dtype: transformers casts logits to float32 first, which would hide
    # the float64 reference.
    v = logits.shape[-1]
    return torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, v), labels[:, 1:].reshape(-1), ignore_index=-100, reduction="mean"
    )


def param_names(model):
    return [n for n, _ in model.named_parameters()]


def forward_backward(model, batch, hf_loss):
    input_ids, attention_mask, labels = batch
    model.zero_grad(set_to_none=True)
    logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
    if hf_loss:
        out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels, use_cache=False)
        loss = out.loss
    else:
        out = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        loss = causal_lm_loss(out.logits, labels)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    return logits.detach(), loss.detach(), grads


def train(model, batch, max_grad_norm, hf_loss):
    input_ids, attention_mask, labels = batch
    named = list(model.named_parameters())
    groups = [
        {"params": [p for n, p in named if not no_decay(n)], "weight_decay": WEIGHT_DECAY},
        {"params": [p for n, p in named if no_decay(n)], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=LR, betas=BETAS, eps=ADAM_EPS, weight_decay=WEIGHT_DECAY)
    sched = get_linear_schedule_with_warmup(opt, num_warmup_steps=WARMUP_STEPS, num_training_steps=TOTAL_STEPS)
    losses, norms, lrs = [], [], []
    model.train()
    for _ in range(TRAIN_STEPS):
        opt.zero_grad(set_to_none=True)
        if hf_loss:
            loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels, use_cache=False).loss
        else:
            logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
            loss = causal_lm_loss(logits, labels)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=max_grad_norm)
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        norms.append(float(norm))
    final = {n: p.detach().clone() for n, p in model.named_parameters()}
    return losses, norms, lrs, final


def rel(a, b):
    """max |a - b| / max |b|, and max |a - b| (b is the float64 reference)."""
    a = a.double()
    b = b.double()
    diff = (a - b).abs().max().item()
    scale = b.abs().max().item()
    return (diff / scale if scale > 0 else diff), diff


def elem_rel(a, b, floor):
    """max |a - b| / max(|b|, floor): an elementwise relative error with an absolute floor."""
    a = a.double()
    b = b.double()
    return ((a - b).abs() / b.abs().clamp_min(floor)).max().item()


def report_diffs(tag, res32, res64, init):
    """Prints fp32-vs-fp64 differences per category; returns them as rows for docs/golden.md."""
    print(f"[{tag}] float32 vs float64 reference")
    print("  scaled = max|d| / max|ref| (worst tensor); abs = max|d| over all tensors;")
    print("  elem = max |d| / max(|ref|, 1e-3 max|ref|) per tensor; for step3 also max|d| / max|step3 - param|")
    rows = []

    def category(name, pairs, update=None):
        worst, worst_name, abs_max, elem_max, upd = 0.0, "", 0.0, 0.0, 0.0
        for n, (a, b) in pairs.items():
            s, d = rel(a, b)
            floor = 1e-3 * b.double().abs().max().item() if b.numel() > 1 else 1e-30
            elem_max = max(elem_max, elem_rel(a, b, max(floor, 1e-30)))
            abs_max = max(abs_max, d)
            if s >= worst:
                worst, worst_name = s, n
            if update is not None:
                step = (b.double() - update[n].double()).abs().max().item()
                upd = max(upd, d / step if step > 0 else 0.0)
        rows.append((name, worst, worst_name, abs_max, elem_max, upd if update is not None else None))

    category("logits", {"logits": (res32["logits"], res64["logits"])})
    category("loss", {"loss": (res32["loss"], res64["loss"])})
    category("grad", {n: (res32["grad"][n], res64["grad"][n]) for n in res32["grad"]})
    category("step3", {n: (res32["step3"][n], res64["step3"][n]) for n in res32["step3"]}, update=init)
    category("train.loss", {"train.loss": (torch.tensor(res32["train.loss"]),
                                           torch.tensor(res64["train.loss"], dtype=torch.float64))})
    category("train.grad_norm", {"train.grad_norm": (torch.tensor(res32["train.grad_norm"]),
                                                     torch.tensor(res64["train.grad_norm"], dtype=torch.float64))})
    for name, s, wn, d, e, u in rows:
        extra = f"  vs update {u:.3e}" if u is not None else ""
        where = f" ({wn})" if wn not in (name, "") else ""
        print(f"  {name:16s} scaled {s:.3e}  abs {d:.3e}  elem {e:.3e}{extra}{where}")
    return rows


class _SoftmaxInInputDtype:
    """Stands in for torch.nn.functional inside modeling_bloom for the float64 reference.

    BLOOM calls F.softmax(..., dtype=torch.float32), which would round float64 scores to
    float32 (and turn float64's lowest value into -inf, giving NaN rows). Everything else
    is torch.nn.functional itself.
    """

    def __getattr__(self, name):
        return getattr(torch.nn.functional, name)

    @staticmethod
    def softmax(x, dim=None, dtype=None, **kwargs):
        if x.dtype == torch.float64:
            return torch.nn.functional.softmax(x, dim=dim)
        return torch.nn.functional.softmax(x, dim=dim, dtype=dtype, **kwargs)


class float64_softmax:
    def __enter__(self):
        from transformers.models.bloom import modeling_bloom

        self.module = modeling_bloom
        self.saved = modeling_bloom.F
        modeling_bloom.F = _SoftmaxInInputDtype()

    def __exit__(self, *exc):
        self.module.F = self.saved


def run(spec, dtype, hf_loss, init_state, batch):
    model = make_model(spec)
    model.load_state_dict(init_state, strict=False)
    model = model.to(dtype)
    if hasattr(model, "tie_weights"):
        model.tie_weights()
    assert model.lm_head.weight is model.transformer.word_embeddings.weight
    logits, loss, grads = forward_backward(model, batch, hf_loss)
    return model, logits, loss, grads


def write_canonical(tensors, meta, path):
    """Writes with the safetensors library, then re-emits its JSON header with sorted keys.

    The library orders __metadata__ arbitrarily; sorting makes reruns byte-identical. Data
    offsets are relative to the end of the header, so they do not change.
    """
    raw = save(dict(sorted(tensors.items())), metadata=meta)
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + n])
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + raw[8 + n :])


def make_one(tag, out_dir):
    spec = SPECS[tag]
    torch.manual_seed(spec["seed"])
    model = make_model(spec)
    init_state = {n: p.detach().clone() for n, p in model.named_parameters()}
    batch = make_batch(spec)
    input_ids, attention_mask, labels = batch

    # float32, exactly as a user of transformers would compute it (loss from labels=...)
    model32, logits32, loss32, grads32 = run(spec, torch.float32, True, init_state, batch)
    first_norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads32.values()]))
    max_grad_norm = float(f"{0.5 * first_norm.item():.6g}")
    losses32, norms32, lrs32, final32 = train(model32, batch, max_grad_norm, True)

    # float64 reference of the same semantics
    with float64_softmax():
        model64, logits64, loss64, grads64 = run(spec, torch.float64, False, init_state, batch)
        losses64, norms64, lrs64, final64 = train(model64, batch, max_grad_norm, False)
    for t in [logits64, loss64, *grads64.values(), *final64.values()]:
        assert torch.isfinite(t).all(), "float64 reference is not finite"

    assert abs(losses32[0] - float(loss32)) <= 1e-6 * abs(float(loss32)), "first training loss must equal loss"
    assert norms32[0] > max_grad_norm, "clipping must be active on the first step"

    report_diffs(
        tag,
        dict(logits=logits32, loss=loss32.reshape(1), grad=grads32, step3=final32,
             **{"train.loss": losses32, "train.grad_norm": norms32}),
        dict(logits=logits64, loss=loss64.reshape(1), grad=grads64, step3=final64,
             **{"train.loss": losses64, "train.grad_norm": norms64}),
        init_state,
    )

    tensors = {}
    for n in param_names(model):
        if n == TIED:
            continue
        tensors["param." + n] = init_state[n].contiguous()
        tensors["grad." + n] = grads32[n].contiguous()
        tensors["step3." + n] = final32[n].contiguous()
    tensors["input_ids"] = input_ids.contiguous()
    tensors["attention_mask"] = attention_mask.contiguous()
    tensors["labels"] = labels.contiguous()
    tensors["logits"] = logits32.contiguous()
    tensors["loss"] = loss32.reshape(1).to(torch.float32).contiguous()
    tensors["train.loss"] = torch.tensor(losses32, dtype=torch.float32)
    tensors["train.grad_norm"] = torch.tensor(norms32, dtype=torch.float32)
    tensors["train.lr"] = torch.tensor(lrs32, dtype=torch.float32)
    # float32 ALiBi slopes exactly as transformers computes them (torch.pow in float32)
    from transformers.models.bloom import modeling_bloom

    tensors["alibi_slopes"] = modeling_bloom._get_alibi_slopes(spec["n_head"], torch.device("cpu")).float()

    meta = {
        "vocab_size": str(spec["vocab_size"]),
        "hidden_size": str(spec["hidden_size"]),
        "n_head": str(spec["n_head"]),
        "n_layer": str(spec["n_layer"]),
        "layer_norm_epsilon": repr(LAYER_NORM_EPS),
        "lr": repr(LR),
        "beta1": repr(BETAS[0]),
        "beta2": repr(BETAS[1]),
        "eps": repr(ADAM_EPS),
        "weight_decay": repr(WEIGHT_DECAY),
        "warmup_steps": str(WARMUP_STEPS),
        "total_steps": str(TOTAL_STEPS),
        "max_grad_norm": repr(max_grad_norm),
        "pad_token_id": str(PAD_ID),
        "seed": str(spec["seed"]),
        "transformers": transformers.__version__,
        "torch": torch.__version__,
    }
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"bloom_{tag}.safetensors")
    write_canonical(tensors, meta, path)
    back = load_file(path)
    assert all(torch.equal(back[k], v) for k, v in tensors.items()), "file does not read back"
    print(f"[{tag}] wrote {path} ({os.path.getsize(path)} bytes, {len(tensors)} tensors)")
    print(f"[{tag}] loss {float(loss32):.7f}  train.loss {losses32}  train.grad_norm {norms32}  "
          f"train.lr {lrs32}  max_grad_norm {max_grad_norm}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "golden"))
    ap.add_argument("--only", choices=sorted(SPECS), default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    for tag in SPECS:
        if args.only is None or args.only == tag:
            make_one(tag, os.path.normpath(args.out))


if __name__ == "__main__":
    main()

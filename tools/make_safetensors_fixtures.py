#!/usr/bin/env python3
"""Writes the safetensors fixtures of tests/fixtures/safetensors/ with the reference
`safetensors` library, so the C++ reader is checked against files it did not write.

    python3 tools/make_safetensors_fixtures.py [--out tests/fixtures/safetensors]
    python3 tools/make_safetensors_fixtures.py --check FILE   # read FILE with the reference reader

The C++ tests regenerate the arange values themselves; the rounding tensors carry
their own expected values (a 16-bit tensor next to its exact float32 upcast, made
by torch).
"""

import argparse
import pathlib

import torch
from safetensors import safe_open
from safetensors.torch import save_file


def arange_values():
    # (i - 12) / 4 for i in 0..23: exact in every float dtype.
    return (torch.arange(24, dtype=torch.float64) - 12) / 4


def rounding_sources():
    # Values that exercise rounding: ties, subnormals, overflow, signed zero, plus
    # fixed pseudo-random normals.
    special = torch.tensor(
        [1 / 3, -2 / 3, 65504.0, 65519.0, 65520.0, -1e6, 1e-7, 6.0e-8, 2.0 ** -24,
         3.0 * 2.0 ** -26, 6.1e-5, 3.14159265, -0.0, 1 + 2 ** -11, 1 + 3 * 2 ** -11,
         1 + 2 ** -8, 1 + 3 * 2 ** -8, 3.0e38],
        dtype=torch.float32)
    gen = torch.Generator().manual_seed(1234)
    noise = torch.randn(46, generator=gen, dtype=torch.float32) * 100
    return torch.cat([special, noise])


def mixed_tensors():
    v = arange_values()
    i = torch.arange(24, dtype=torch.int64)
    src = rounding_sources()
    f16 = src.to(torch.float16)
    bf16 = src.to(torch.bfloat16)
    return {
        "arange_f32": v.to(torch.float32).reshape(2, 3, 4),
        "arange_f16": v.to(torch.float16).reshape(2, 3, 4),
        "arange_bf16": v.to(torch.bfloat16).reshape(2, 3, 4),
        "arange_f64": v.reshape(24),
        "arange_i64": (i - 12).reshape(4, 6),
        "arange_i32": ((i - 12) * 100000).to(torch.int32).reshape(6, 4),
        "arange_i16": ((i - 12) * 1000).to(torch.int16).reshape(24),
        "arange_i8": (i - 12).to(torch.int8).reshape(3, 8),
        "arange_u8": (i * 10).to(torch.uint8).reshape(8, 3),
        "arange_bool": (i % 3 == 0).reshape(2, 12),
        "scalar_f32": torch.tensor(2.5, dtype=torch.float32),
        "empty_f32": torch.zeros(0, 3, dtype=torch.float32),
        "round_src_f32": src,
        "round_f16": f16,
        "round_f16_as_f32": f16.to(torch.float32),
        "round_bf16": bf16,
        "round_bf16_as_f32": bf16.to(torch.float32),
    }


def small_tensors():
    return {
        "w": torch.tensor([[1.0, -2.0], [0.5, 4.0]], dtype=torch.float32),
        "ids": torch.tensor([7, -1, 3], dtype=torch.int64),
        "h": torch.tensor(1.5, dtype=torch.float16),
    }


def metadata_tensors():
    return {
        "emb.权重": torch.tensor([1.0, 2.0, 3.0], dtype=torch.bfloat16),
        "a b/c:d": torch.tensor([[-1.0]], dtype=torch.float64),
    }


def write(out: pathlib.Path):
    out.mkdir(parents=True, exist_ok=True)
    # One metadata key each: the reference writer orders several keys unpredictably,
    # and the byte-for-byte tests need a fixed order.
    save_file(mixed_tensors(), str(out / "python_mixed.safetensors"), metadata={"format": "pt"})
    save_file(small_tensors(), str(out / "python_small.safetensors"), metadata={"format": "pt"})
    save_file(metadata_tensors(), str(out / "python_metadata.safetensors"),
              metadata={"format": "pt", "note": "héllo ✓ \"quoted\"\n", "empty": ""})
    for p in sorted(out.glob("*.safetensors")):
        print(p, p.stat().st_size, "bytes")


def check(path: str):
    with safe_open(path, framework="pt") as f:
        print("metadata:", f.metadata())
        for k in f.keys():
            t = f.get_tensor(k)
            print(k, t.dtype, list(t.shape), t.flatten()[:8].tolist())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parent.parent
                                         / "tests" / "fixtures" / "safetensors"))
    ap.add_argument("--check", metavar="FILE")
    args = ap.parse_args()
    if args.check:
        check(args.check)
    else:
        write(pathlib.Path(args.out))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes the PyTorch checkpoint fixtures of tests/io/test_torch_checkpoint*.cpp.

Usage: python3 tools/make_torch_fixtures.py [output folder]
(default: tests/fixtures/torch next to this script's repository root).
Needs torch, transformers (for the BLOOM key names) and safetensors.

Every tensor is filled from a formula of its name and element index that the C++
tests recompute, so the tests check values without trusting this script:

    seed(name)     = sum of the UTF-8 bytes of name, mod 61
    k(name, i)     = (7 * i + seed(name)) % 61
    float value    = k * 0.25 - 7.5          (exact in f16, bf16, f32, f64)
    int64 value    = k - 30 + (i % 3) * 2**40
    int32 value    = (k - 30) * 1000
    int16 value    = (k - 30) * 100
    int8 value     = k - 30
    uint8 value    = k * 4
    bool value     = k % 2 == 1

where i is the row-major index in the tensor (or, for views, in the storage).
"""

import collections
import io
import os
import struct
import sys
import zipfile
import zlib

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def seed(name):
    return sum(name.encode()) % 61


def ks(name, n):
    s = seed(name)
    return torch.tensor([(7 * i + s) % 61 for i in range(n)], dtype=torch.int64)


def formula(name, shape, dtype):
    n = 1
    for d in shape:
        n *= d
    k = ks(name, n)
    i = torch.arange(n, dtype=torch.int64)
    if dtype.is_floating_point:
        v = k.to(torch.float64) * 0.25 - 7.5
    elif dtype == torch.int64:
        v = k - 30 + (i % 3) * 2**40
    elif dtype == torch.int32:
        v = (k - 30) * 1000
    elif dtype == torch.int16:
        v = (k - 30) * 100
    elif dtype == torch.int8:
        v = k - 30
    elif dtype == torch.uint8:
        v = k * 4
    elif dtype == torch.bool:
        v = k % 2 == 1
    else:
        raise ValueError(dtype)
    return v.to(dtype).reshape(shape)


def bloom_state_dict():
    """A tiny BloomForCausalLM state dict (vocab 40, hidden 8, 2 layers, 2 heads) in fp16
    with the published key names; lm_head.weight is the embedding's storage."""
    from transformers import BloomConfig, BloomForCausalLM

    cfg = BloomConfig(vocab_size=40, hidden_size=8, n_layer=2, n_head=2, tie_word_embeddings=True)
    model = BloomForCausalLM(cfg).half()
    sd = model.state_dict()
    with torch.no_grad():
        done = set()
        for name, t in sd.items():
            if t.data_ptr() in done:
                continue
            done.add(t.data_ptr())
            t.copy_(formula(name, tuple(t.shape), t.dtype))
    emb, head = sd["transformer.word_embeddings.weight"], sd["lm_head.weight"]
    assert emb.untyped_storage().data_ptr() == head.untyped_storage().data_ptr(), "not tied"
    return sd


def dtypes_dict():
    d = {}
    for name, shape, dtype in [
        ("f16", (3, 5), torch.float16),
        ("bf16", (4, 3), torch.bfloat16),
        ("f32", (2, 3, 4), torch.float32),
        ("f64", (7,), torch.float64),
        ("i64", (6,), torch.int64),
        ("i32", (5,), torch.int32),
        ("i16", (5,), torch.int16),
        ("i8", (5,), torch.int8),
        ("u8", (5,), torch.uint8),
        ("bool", (6,), torch.bool),
        ("scalar", (), torch.float32),
        ("empty", (0, 3), torch.float32),
    ]:
        d[name] = formula(name, shape, dtype)
    d["param"] = torch.nn.Parameter(formula("param", (4,), torch.float32))
    # Values at the edges of the 16-bit formats (all exactly representable).
    d["f16_special"] = torch.tensor(
        [65504.0, 2.0**-14, 2.0**-24, -0.0, float("inf"), -2.5, float("nan")], dtype=torch.float16)
    d["bf16_special"] = torch.tensor(
        [3.3895313892515355e38, 2.0**-126, 2.0**-133, -1.5, float("-inf"), 1.0 + 2.0**-7],
        dtype=torch.bfloat16)
    return d


def views_dict():
    base = formula("base", (40,), torch.float32)
    b = formula("bbase", (24,), torch.bfloat16)
    d = collections.OrderedDict()
    d["slice"] = base[7:19]                        # offset 7, [12], (1)
    d["transposed"] = base[:30].view(5, 6).t()     # offset 0, [6, 5], (1, 6)
    d["strided"] = base.view(8, 5)[1:6:2, ::2]     # offset 5, [3, 3], (10, 2)
    d["expanded"] = base[3:6].expand(4, 3)         # offset 3, [4, 3], (0, 1)
    d["last"] = base[39]                           # offset 39, [], ()
    d["base"] = base
    d["b_rows"] = b.view(4, 6)[2:]                 # offset 12, [2, 6], (6, 1)
    d["b_cols"] = b.view(4, 6)[:, 1:5:3]           # offset 1, [4, 2], (6, 3)
    return d


def nested_dict():
    model = collections.OrderedDict()
    model["embed.weight"] = formula("model.embed.weight", (5, 2), torch.float16)
    model["norm.bias"] = formula("model.norm.bias", (2,), torch.float32)
    model["head.weight"] = model["embed.weight"]  # tied inside the nested dict
    return {
        "epoch": 3,
        "model": model,
        "optimizer": {
            "state": {0: {"exp_avg": formula("exp_avg", (2,), torch.float32)}},
            "param_groups": [{"lr": 0.1, "params": [0], "betas": (0.9, 0.999)}],
            "scale": formula("optimizer.scale", (1,), torch.float32),
        },
        "note": "a run",
        "best": None,
        "top": formula("top", (3,), torch.float64),
    }


def proto4_dict():
    d = collections.OrderedDict()
    d["a"] = formula("a", (2, 3), torch.float16)
    d["b"] = formula("b", (4,), torch.bfloat16)
    d["b_tail"] = d["b"][1:]
    d["n"] = 2**40
    d["x"] = -1.25
    return d


class CustomObject:
    def __init__(self):
        self.value = 1


class CallsSystem:
    def __reduce__(self):
        return (os.system, ("echo this must never run",))


class CallsEval:
    def __reduce__(self):
        return (eval, ("__import__('os').system('echo this must never run')",))


def torch_records(data):
    """The (name, bytes) records of a torch.save zip, in file order."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return [(i.filename, z.read(i.filename)) for i in z.infolist()]


def write_zip64(path, records):
    """A stored zip whose every size and offset goes through zip64 fields, and a zip64
    end of central directory (what torch writes for files over 4 GiB)."""
    out, central = bytearray(), bytearray()
    for name, data in records:
        nb = name.encode()
        crc = zlib.crc32(data)
        off = len(out)
        extra = struct.pack("<HHQQ", 1, 16, len(data), len(data))
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, 0, 0, 0, crc, 0xFFFFFFFF,
                           0xFFFFFFFF, len(nb), len(extra)) + nb + extra + data
        cextra = struct.pack("<HHQQQ", 1, 24, len(data), len(data), off)
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, 0, 0, 0, crc,
                               0xFFFFFFFF, 0xFFFFFFFF, len(nb), len(cextra), 0, 0, 0, 0,
                               0xFFFFFFFF) + nb + cextra
    cd_off = len(out)
    out += central
    end64 = len(out)
    n = len(records)
    out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, len(central), cd_off)
    out += struct.pack("<IIQI", 0x07064B50, 0, end64, 1)
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFFFFFF,
                       0xFFFFFFFF, 0)
    with open(path, "wb") as f:
        f.write(out)


def write_deflated(path, records):
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, data in records:
            z.writestr(name, data)


def write_handmade(path, archive, pickle_bytes):
    """A stored zip laid out like torch.save's, around a hand-written data.pkl."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
        z.writestr(archive + "/data.pkl", pickle_bytes)
        z.writestr(archive + "/byteorder", b"little")
        z.writestr(archive + "/version", b"3\n")


def same(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride() and bool(
            torch.equal(a, b) or (a.is_floating_point() and torch.equal(a.nan_to_num(), b.nan_to_num())))
    return a == b


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "fixtures", "torch")
    os.makedirs(out, exist_ok=True)
    path = lambda name: os.path.join(out, name)
    from safetensors.torch import save_file

    # (1) BLOOM state dict, and a safetensors copy for an independent cross-check.
    sd = bloom_state_dict()
    torch.save(sd, path("bloom_tiny_f16.bin"))
    save_file({k: v.clone().contiguous() for k, v in sd.items()}, path("bloom_tiny_f16.safetensors"))

    # (2) dtypes; (3) views of shared storages, with a contiguous safetensors copy.
    dt = dtypes_dict()
    torch.save(dt, path("dtypes.bin"))
    views = views_dict()
    torch.save(views, path("views.bin"))
    save_file({k: v.clone().contiguous() for k, v in views.items()}, path("views.safetensors"))

    # Nested dicts; a protocol 4 pickle (FRAME, MEMOIZE, STACK_GLOBAL).
    torch.save(nested_dict(), path("nested.bin"))
    torch.save(proto4_dict(), path("proto4.bin"), pickle_protocol=4)

    # The dtypes archive repacked with zip64 fields, and re-zipped with compression.
    buf = io.BytesIO()
    torch.save(dt, buf)
    records = torch_records(buf.getvalue())
    write_zip64(path("zip64.bin"), records)
    write_deflated(path("compressed.bin"), records)

    # (4) Disallowed globals.
    torch.save({"w": formula("w", (2,), torch.float32), "obj": CustomObject()},
               path("custom_object.bin"))
    torch.save({"w": formula("w", (2,), torch.float32), "obj": CallsEval()},
               path("builtins_eval.bin"))
    # {'x': os.system('echo ...')} written by hand with GLOBAL 'os system'.
    cmd = b"echo this must never run"
    evil = (b"\x80\x02}q\x00X\x01\x00\x00\x00xcos\nsystem\nq\x01X" + struct.pack("<I", len(cmd)) +
            cmd + b"\x85q\x02Rq\x03s.")
    write_handmade(path("os_system.bin"), "os_system", evil)

    # A dtype outside seqpar's (float8 goes through _rebuild_tensor_v3 and UntypedStorage).
    torch.save({"w": formula("w", (2,), torch.float32),
                "f8": torch.zeros(3, dtype=torch.float8_e4m3fn)}, path("float8.bin"))

    # (5) The legacy (non-zip) format.
    torch.save({"w": formula("w", (2,), torch.float32)}, path("legacy.bin"),
               _use_new_zipfile_serialization=False)

    # Checks that torch itself reads the files back as written.
    for name, expect in [("bloom_tiny_f16.bin", sd), ("dtypes.bin", dt), ("views.bin", views),
                         ("zip64.bin", dt), ("proto4.bin", proto4_dict()),
                         ("nested.bin", nested_dict())]:
        got = torch.load(path(name), weights_only=False)  # written just above
        assert same(expect, got), name
    for name in ["custom_object.bin", "builtins_eval.bin", "os_system.bin"]:
        try:
            torch.load(path(name), weights_only=True)
        except Exception:
            pass
        else:
            raise AssertionError(name + " loaded under weights_only")
    raw = open(path("bloom_tiny_f16.bin"), "rb").read()
    with zipfile.ZipFile(path("bloom_tiny_f16.bin")) as z:
        data = [i for i in z.infolist() if "/data/" in i.filename]
    # Data starts after the 30-byte local header, the name and the local extra field.
    starts = [i.header_offset + 30 + sum(struct.unpack_from("<HH", raw, i.header_offset + 26))
              for i in data]
    aligned = all(s % 64 == 0 for s in starts)
    for name in sorted(os.listdir(out)):
        print(f"{os.path.getsize(path(name)):7d}  {name}")
    print("storage records 64-byte aligned:", aligned, "| torch", torch.__version__)


if __name__ == "__main__":
    main()

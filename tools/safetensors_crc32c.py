#!/usr/bin/env python3
"""The CRC-32C checksums seqpar stores in safetensors files, computed and checked in Python
(docs/safetensors.md#checksums), with the `crc32c` package rather than seqpar's code.

    python3 tools/safetensors_crc32c.py FILE...        # verify; exit 1 on the first mismatch
    python3 tools/safetensors_crc32c.py --fixture OUT  # write tests/fixtures/.../python_crc32c.safetensors

Needs `pip install crc32c` (and `safetensors numpy` for --fixture). Each tensor's checksum
is the CRC-32C of its bytes as stored, under the metadata key "seqpar.crc32c.<name>"; the
metadata's own, "seqpar.crc32c.__metadata__", covers every other metadata entry in key order,
each as the key's UTF-8 length (8 bytes, little-endian), the key, the value's length and
the value.
"""

import argparse
import json
import struct
import sys

import crc32c

PREFIX = "seqpar.crc32c."


def metadata_crc(meta):
    crc = 0
    for key, value in sorted(meta.items(), key=lambda kv: kv[0].encode()):
        if key.startswith(PREFIX):
            continue
        for s in (key.encode(), value.encode()):
            crc = crc32c.crc32c(struct.pack("<Q", len(s)), crc)
            crc = crc32c.crc32c(s, crc)
    return crc


def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    return header.pop("__metadata__", None) or {}, header, raw[8 + n :]


def verify(path):
    meta, tensors, data = read(path)
    sums = {k[len(PREFIX) :]: v for k, v in meta.items() if k.startswith(PREFIX)}
    if not sums:
        print(f"{path}: no checksums")
        return True
    ok = True
    want = sums.pop("__metadata__", None)
    got = f"{metadata_crc(meta):08x}"
    if want != got:
        print(f"{path}: metadata: CRC-32C {got}, the file records {want}")
        ok = False
    for name, entry in tensors.items():
        begin, end = entry["data_offsets"]
        got = f"{crc32c.crc32c(data[begin:end]):08x}"
        if sums.get(name) != got:
            print(f"{path}: tensor '{name}': CRC-32C {got}, the file records {sums.get(name)}")
            ok = False
    if ok:
        print(f"{path}: {len(tensors)} tensors and the metadata match their checksums")
    return ok


def fixture(out):
    import numpy as np
    from safetensors.numpy import save_file

    tensors = {
        "w": (np.arange(24, dtype=np.float32) - 12).reshape(4, 6) / 4,
        "ids": np.array([7, -1, 3], dtype=np.int64),
        "h": np.array([1.5, -0.25], dtype=np.float16),
    }
    meta = {"format": "pt", "note": "héllo ✓"}
    meta[PREFIX + "__metadata__"] = f"{metadata_crc(meta):08x}"
    for name, t in tensors.items():
        meta[PREFIX + name] = f"{crc32c.crc32c(t.tobytes()):08x}"
    save_file(tensors, out, metadata=meta)
    print(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="*")
    ap.add_argument("--fixture", metavar="OUT")
    args = ap.parse_args()
    if args.fixture:
        fixture(args.fixture)
    ok = all([verify(p) for p in args.files])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

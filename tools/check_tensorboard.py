#!/usr/bin/env python3
"""Checks a run's TensorBoard event files against its metrics.jsonl, with TensorBoard's own
reader.

    tools/check_tensorboard.py OUT [--logdir DIR]   (DIR: default OUT/runs)

Every record of every event file must pass TensorBoard's length and data CRC checks and parse
as an Event, the first of each file its version. Then TensorBoard's EventAccumulator loads the
folder as TensorBoard does (the files in name order; a session start drops what earlier files
hold from its step on): its scalars must be exactly the numbers of metrics.jsonl's train and
eval rows, tagged "<event>/<field>" ("<event>/<field>/<key>" inside objects), at each row's
step and time, as float32. Exits 0 when they agree, 1 naming the first difference, 77 when
the tensorboard package is missing.
"""

import argparse
import json
import math
import os
import struct
import sys

SKIP = 77


def expected_scalars(metrics):
    """tag -> [(step, value, time)] from the train and eval rows of metrics.jsonl."""
    out = {}

    def add(prefix, obj, step, time):
        for key, v in obj.items():
            if isinstance(v, dict):
                add(f"{prefix}{key}/", v, step, time)
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                out.setdefault(prefix + key, []).append((step, v, time))
            elif v is None and key not in ("event", "step", "time"):
                # A non-finite number: JSON has none, so nlohmann writes null.
                out.setdefault(prefix + key, []).append((step, None, time))

    with open(metrics, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            row = json.loads(line)
            if row.get("event") not in ("train", "eval"):
                continue
            fields = {k: v for k, v in row.items() if k not in ("event", "step", "time")}
            add(row["event"] + "/", fields, row["step"], row["time"])
    return out


def as_float32(x):
    """x as a summary's float (beyond its range: an infinity, as the writer makes it)."""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def check_records(files):
    """Every record through TensorBoard's record reader (CRCs) and Event parser; the count."""
    from tensorboard.compat.proto import event_pb2
    from tensorboard.compat.tensorflow_stub import errors, pywrap_tensorflow

    records = 0
    for path in files:
        reader = pywrap_tensorflow.PyRecordReader_New(path.encode())
        for number in range(1, sys.maxsize):
            try:
                reader.GetNext()
            except errors.OutOfRangeError:
                break
            except errors.DataLossError as e:
                sys.exit(f"{path}: record {number}: TensorBoard's reader refuses it ({e.message})")
            event = event_pb2.Event()
            event.ParseFromString(reader.record())
            if number == 1 and event.file_version != "brain.Event:2":
                sys.exit(f"{path}: the first event is not the file version: {event}")
            records += 1
    return records


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="the run's output folder (with metrics.jsonl)")
    ap.add_argument("--logdir", help="the event files' folder (default: OUT/runs)")
    args = ap.parse_args()
    try:
        from tensorboard.backend.event_processing import event_accumulator
    except ImportError:
        print("skipped: the tensorboard package is not installed")
        sys.exit(SKIP)

    logdir = args.logdir or os.path.join(args.out, "runs")
    files = sorted(
        os.path.join(logdir, n) for n in os.listdir(logdir) if n.startswith("events.out.tfevents.")
    ) if os.path.isdir(logdir) else []
    if not files:
        sys.exit(f"{logdir}: no event files")
    records = check_records(files)

    want = expected_scalars(os.path.join(args.out, "metrics.jsonl"))
    acc = event_accumulator.EventAccumulator(logdir, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    have_tags = set(acc.Tags()["scalars"])
    if have_tags != set(want):
        sys.exit(f"tags differ: only in the event files {sorted(have_tags - set(want))}, only in "
                 f"metrics.jsonl {sorted(set(want) - have_tags)}")
    count = 0
    for tag, rows in sorted(want.items()):
        got = [(e.step, e.value, e.wall_time) for e in acc.Scalars(tag)]
        if [g[0] for g in got] != [r[0] for r in rows]:
            sys.exit(f"{tag}: steps {[g[0] for g in got]} in TensorBoard, "
                     f"{[r[0] for r in rows]} in metrics.jsonl")
        for (step, value, time), (_, tb_value, tb_time) in zip(rows, got):
            same = (not math.isfinite(tb_value)) if value is None else (
                as_float32(value) == tb_value or (math.isnan(value) and math.isnan(tb_value)))
            if not same or tb_time != time:
                sys.exit(f"{tag} at step {step}: {tb_value} at {tb_time!r} in TensorBoard, "
                         f"{value} at {time!r} in metrics.jsonl")
            count += 1
    print(f"{len(files)} event file(s), {records} records with valid CRCs; {len(want)} tags, "
          f"{count} scalars as metrics.jsonl has them")


if __name__ == "__main__":
    main()

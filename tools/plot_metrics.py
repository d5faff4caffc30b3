#!/usr/bin/env python3
"""Draws a seqgpt_ner run's metrics.jsonl into one PNG: loss, learning rate, tokens/s and
dev F1 against the step.

    tools/plot_metrics.py OUT/metrics.jsonl [-o metrics.png]

A resumed run drops from the file the rows of the steps it redoes (seqpar::MetricsLog), so
the file holds each step once; a file written before that still works: its "resume" event
names the step of the checkpoint it started from, and the train and eval events logged
before it above that step are dropped here (the newest record of each step wins). Steps
that made no update (a non-finite loss or gradient norm: "skipped") are not drawn. Needs
matplotlib; nothing in the build or the tests uses this script.
"""

import argparse
import json
import sys


def read_events(path):
    """The events of the file in order; a line that is not JSON is reported and passed over."""
    events = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError as e:
                print(f"{path}:{number}: not JSON ({e}); line skipped", file=sys.stderr)
    return events


def live_events(events):
    """Train and eval events that a later resume did not redo, in step order."""
    train, dev = {}, {}
    for e in events:
        kind = e.get("event")
        if kind == "resume":
            # Everything above the resumed step was done again after this point.
            step = e.get("step", 0)
            train = {s: v for s, v in train.items() if s <= step}
            dev = {s: v for s, v in dev.items() if s <= step}
        elif kind == "train" and not e.get("skipped", False):
            train[e["step"]] = e
        elif kind == "eval" and e.get("split", "dev") == "dev":
            dev[e["step"]] = e
    return [train[s] for s in sorted(train)], [dev[s] for s in sorted(dev)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("metrics", help="metrics.jsonl written by seqgpt_ner")
    ap.add_argument("-o", "--output", default=None, help="PNG to write (default: next to the metrics)")
    args = ap.parse_args()
    train, dev = live_events(read_events(args.metrics))
    if not train:
        sys.exit(f"{args.metrics}: no train events to draw")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [e["step"] for e in train]
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    panels = [
        (axes[0][0], "loss", [e["loss"] for e in train], "loss (token mean)"),
        (axes[0][1], "lr", [e["lr"] for e in train], "learning rate"),
        (axes[1][0], "tokens/s",
         [e.get("tokens_per_s", e["tokens"] / e["seconds"] if e.get("seconds") else 0) for e in train],
         "tokens/s"),
    ]
    for ax, _, values, title in panels:
        ax.plot(steps, values, linewidth=1)
        ax.set_title(title)
        ax.grid(alpha=0.3)
    ax = axes[1][1]
    if dev:
        ax.plot([e["step"] for e in dev], [e["f1"] for e in dev], marker="o")
    ax.set_title("dev F1" if dev else "dev F1 (no evaluation logged)")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("step")
    fig.tight_layout()
    out = args.output or args.metrics.rsplit(".", 1)[0] + ".png"
    fig.savefig(out, dpi=110)
    print(f"wrote {out}: {len(train)} steps, {len(dev)} evaluations")


if __name__ == "__main__":
    main()

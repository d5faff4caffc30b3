#!/usr/bin/env python3
"""Draws a seqgpt_ner run's metrics.jsonl into one PNG: loss, learning rate, gradient norm and
tokens/s against the step, and each evaluated split's scores and counts, whatever the task.

    tools/plot_metrics.py OUT/metrics.jsonl [-o metrics.png] [--describe]

An eval row's fractional numbers are its scores (NER and relations: precision, recall, f1;
classification: accuracy, macro_f1), drawn in one panel; its whole numbers (records, gold,
garbled answers, ...) in another; its "seconds" and nested objects (per label, the baseline)
are not drawn. --describe prints the panels and their series instead of drawing (no
matplotlib needed); without matplotlib the script says so and exits with 3.

A resumed run drops from the file the rows of the steps it redoes (seqpar::MetricsLog), so
the file holds each step once; a file written before that still works: its "resume" event
names the step of the checkpoint it started from, and the train and eval events logged
before it above that step are dropped here (the newest record of each step wins). Steps
that made no update (a non-finite loss or gradient norm: "skipped") are not drawn.
"""

import argparse
import json
import sys

NO_MATPLOTLIB = 3


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
    """Train events and each split's eval events that a later resume did not redo, in step
    order: (train, {split: evals})."""
    train, evals = {}, {}
    for e in events:
        kind = e.get("event")
        if kind == "resume":
            # Everything above the resumed step was done again after this point.
            step = e.get("step", 0)
            train = {s: v for s, v in train.items() if s <= step}
            evals = {k: v for k, v in evals.items() if k[1] <= step}
        elif kind == "train" and not e.get("skipped", False):
            train[e["step"]] = e
        elif kind == "eval":
            evals[(e.get("split", "dev"), e["step"])] = e
    by_split = {}
    for split, step in sorted(evals):
        by_split.setdefault(split, []).append(evals[(split, step)])
    return [train[s] for s in sorted(train)], by_split


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def panels(train, by_split):
    """[(title, [(label, steps, values)])]: what the figure draws, panel by panel."""
    def series(rows, field, value=None):
        rows = [r for r in rows if value is not None or is_number(r.get(field))]
        return (field, [r["step"] for r in rows], [value(r) if value else r[field] for r in rows])

    def tokens_per_s(e):
        return e.get("tokens_per_s", e["tokens"] / e["seconds"] if e.get("seconds") else 0)

    out = [("loss (token mean)", [series(train, "loss")]),
           ("learning rate", [series(train, "lr")]),
           ("gradient norm", [series(train, "grad_norm")]),
           ("tokens/s", [series(train, "tokens_per_s", tokens_per_s)])]
    for split, rows in by_split.items():
        fields = sorted({k for r in rows for k, v in r.items() if is_number(v)} -
                        {"step", "time", "seconds"})
        scores = [f for f in fields if any(isinstance(r.get(f), float) for r in rows)]
        counts = [f for f in fields if f not in scores]
        out.append((f"{split} scores", [series(rows, f) for f in scores]))
        out.append((f"{split} counts", [series(rows, f) for f in counts]))
    return [(title, [s for s in lines if s[1]]) for title, lines in out]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("metrics", help="metrics.jsonl written by seqgpt_ner")
    ap.add_argument("-o", "--output", default=None, help="PNG to write (default: next to the metrics)")
    ap.add_argument("--describe", action="store_true", help="print the panels instead of drawing")
    args = ap.parse_args()
    train, by_split = live_events(read_events(args.metrics))
    if not train:
        sys.exit(f"{args.metrics}: no train events to draw")
    figure = panels(train, by_split)
    if args.describe:
        for title, lines in figure:
            print(f"{title}: " + ", ".join(f"{label} ({len(steps)})" for label, steps, _ in lines))
        return

    try:
        import matplotlib
    except ImportError:
        print("plot_metrics: matplotlib is not installed (pip install matplotlib); --describe "
              "lists what would be drawn", file=sys.stderr)
        sys.exit(NO_MATPLOTLIB)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = 2
    rows = (len(figure) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(11, 3.5 * rows), squeeze=False)
    for ax, (title, lines) in zip(axes.flat, figure):
        for label, steps, values in lines:
            ax.plot(steps, values, linewidth=1, marker="o" if len(steps) < 30 else None,
                    label=label)
        if len(lines) > 1:
            ax.legend(fontsize="small")
        ax.set_title(title if lines else f"{title} (none logged)")
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(figure):]:
        ax.set_visible(False)
    fig.tight_layout()
    out = args.output or args.metrics.rsplit(".", 1)[0] + ".png"
    fig.savefig(out, dpi=110)
    evals = sum(len(rows) for rows in by_split.values())
    print(f"wrote {out}: {len(train)} steps, {evals} evaluations")


if __name__ == "__main__":
    main()

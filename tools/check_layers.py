#!/usr/bin/env python3
"""Checks that every header under include/seqpar/ includes only its own layer or the
layers below it. Exits 1 naming each file and line that includes a layer above its own.

Usage: check_layers.py [ROOT]   (ROOT: the folder holding include/seqpar; default: the repo)
"""
import pathlib
import re
import sys

# Each layer and the layers directly below it; a layer may include itself and, through
# these, every layer further down. docs/architecture.md draws the same graph.
BELOW = {
    "core": [],
    "config": ["core"],
    "backend": ["config"],
    "io": ["config"],
    "comm": ["backend"],
    "optim": ["backend"],
    "data": ["io"],
    "parallel": ["comm", "optim"],
    "plan": ["parallel"],
    "nn": ["parallel"],
    "train": ["nn", "plan", "data"],
}


def allowed(layer):
    seen, todo = {layer}, [layer]
    while todo:
        for lower in BELOW[todo.pop()]:
            if lower not in seen:
                seen.add(lower)
                todo.append(lower)
    return seen


INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]seqpar/([A-Za-z0-9_]+)/')


def check(root):
    base = root / "include" / "seqpar"
    if not base.is_dir():
        print(f"check_layers: {base} is not a folder", file=sys.stderr)
        return 2
    errors = []
    for path in sorted(base.rglob("*")):
        if path.suffix not in (".hpp", ".cuh", ".h") or path.parent == base:
            continue  # the umbrella header seqpar.hpp includes everything by design
        layer = path.relative_to(base).parts[0]
        if layer not in BELOW:
            errors.append(f"{path.relative_to(root)}: folder '{layer}' is not a known layer")
            continue
        ok = allowed(layer)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            m = INCLUDE.match(line)
            if m and m.group(1) not in ok:
                target = m.group(1)
                errors.append(f"{path.relative_to(root)}:{number}: layer '{layer}' includes "
                              f"'{target}', which is not below it (allowed: {', '.join(sorted(ok))})")
    for e in errors:
        print(e)
    if errors:
        print(f"check_layers: {len(errors)} include(s) against the layering", file=sys.stderr)
        return 1
    print("check_layers: every include looks down")
    return 0


if __name__ == "__main__":
    default = pathlib.Path(__file__).resolve().parent.parent
    sys.exit(check(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else default))

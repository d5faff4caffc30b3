#!/usr/bin/env python3
"""seqgpt_ner --report_to jsonl,tensorboard, read by TensorBoard itself: a short run on the
classification fixture (evaluated on the way) stops after step 4, is resumed from its step-2
checkpoint (so the first attempt's steps 3 and 4 and its step-3 evaluation are superseded) and
finishes; tools/check_tensorboard.py then requires TensorBoard's scalars to be exactly
metrics.jsonl's numbers, each step once. Exits 77 (skipped) without the tensorboard package.

    tensorboard_check.py --exe SEQGPT_NER --tool tools/check_tensorboard.py --fixtures DIR --out DIR
"""

import argparse
import os
import shutil
import subprocess
import sys


def run(*command):
    r = subprocess.run(command, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(command)}: exit code {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    for a in ("--exe", "--tool", "--fixtures", "--out"):
        ap.add_argument(a, required=True)
    args = ap.parse_args()
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        print("skipped: the tensorboard package is not installed")
        sys.exit(77)

    shutil.rmtree(args.out, ignore_errors=True)
    data = os.path.join(args.out, "data")
    os.makedirs(data)
    for split in ("train", "dev"):
        shutil.copy(os.path.join(args.fixtures, "classification_fixture.jsonl"),
                    os.path.join(data, f"{split}.jsonl"))
    out = os.path.join(args.out, "run")
    common = [args.exe, "train", "--data_dir", data, "--out", out, "--quiet", "--seed", "5",
              "--plan", "single", "--threads", "1", "--batch", "2", "--max-steps", "6",
              "--save-steps", "2", "--save_total_limit", "3", "--eval-steps", "3", "--eval-limit", "3",
              "--max-new-tokens", "6", "--report_to", "jsonl,tensorboard"]
    run(*common, "--stop-after", "4")
    run(*common, "--resume_from_checkpoint", os.path.join(out, "step-2.safetensors"))
    files = sorted(os.listdir(os.path.join(out, "runs")))
    if len(files) != 2 or not all(f.startswith("events.out.tfevents.") for f in files):
        sys.exit(f"{out}/runs holds {files}; expected an event file for each of the 2 attempts")
    r = subprocess.run([sys.executable, args.tool, out], capture_output=True, text=True)
    print(r.stdout + r.stderr, end="")
    sys.exit(r.returncode)


if __name__ == "__main__":
    main()

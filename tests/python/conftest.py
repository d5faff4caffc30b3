"""What the tests of the seqpar package share: the bundled corpus as dicts, the seqgpt_ner
program of the same build (the reference every Python run is held to), and helpers."""

import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "examples" / "data"


def read_records(name, limit=0):
    with open(DATA / name, encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    return records[:limit] if limit else records


def losses(run_dir):
    """The loss of each train row of a run's metrics.jsonl, by step."""
    rows = [json.loads(line) for line in open(pathlib.Path(run_dir) / "metrics.jsonl", encoding="utf-8")]
    return {r["step"]: r["loss"] for r in rows if r.get("event") == "train"}


def seqgpt_ner():
    exe = os.environ.get("SEQPAR_NER_EXE")
    if not exe or not os.path.exists(exe):
        pytest.skip("SEQPAR_NER_EXE names no seqgpt_ner program (ctest sets it)")
    return exe


def run_cli(words, cwd=None):
    """seqgpt_ner with `words`; returns its stdout, failing the test on a non-zero exit."""
    done = subprocess.run([seqgpt_ner()] + words, cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, f"seqgpt_ner {' '.join(words)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="session")
def train_records():
    return read_records("train.jsonl", 96)


@pytest.fixture(scope="session")
def dev_records():
    return read_records("dev.jsonl", 24)

"""examples/python/finetune.py trains, evaluates, predicts and saves, and its run is the
command line's: the same losses for the same seed and layout, alone and under mpirun -np 2."""

import os
import shlex
import subprocess
import sys

import pytest

from conftest import losses, run_cli

EXAMPLE = os.environ.get("SEQPAR_EXAMPLE", "")


def run_example(out, launch=()):
    if not os.path.exists(EXAMPLE):
        pytest.skip("SEQPAR_EXAMPLE names no example script (ctest sets it)")
    done = subprocess.run(list(launch) + [sys.executable, EXAMPLE, "--output_dir", str(out),
                                          "--max_steps", "6", "--train_records", "96",
                                          "--eval_records", "8"],
                          capture_output=True, text=True)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return done.stdout


def command_line(stdout):
    """The words of the 'command line:' line the example prints."""
    line = next(l for l in stdout.splitlines() if l.startswith("command line: seqgpt_ner train"))
    return shlex.split(line[len("command line: seqgpt_ner "):])


def check_output(stdout, out):
    assert "trained 6 steps" in stdout
    assert "evaluate: {" in stdout and "eval_f1" in stdout
    assert stdout.count("predict: {") == 2
    for name in ("config.json", "model.safetensors", "tokenizer.json", "seqgpt_task.json"):
        assert (out.parent / (out.name + "_model") / name).exists(), name


def test_the_example_is_the_command_lines_run(tmp_path):
    out = tmp_path / "example"
    stdout = run_example(out)
    check_output(stdout, out)
    words = command_line(stdout)
    cli = tmp_path / "cli"
    run_cli([w if not w.startswith("--output_dir=") else f"--output_dir={cli}" for w in words])
    assert losses(out) == losses(cli)
    assert sorted(losses(out)) == [1, 2, 3, 4, 5, 6]  # metrics.jsonl has every step


def test_under_mpirun_each_process_is_a_rank(tmp_path):
    launch = shlex.split(os.environ.get("SEQPAR_MPIEXEC", ""))
    if not launch:
        pytest.skip("no mpirun in this build (SEQPAR_MPIEXEC)")
    out = tmp_path / "mpirun"
    stdout = run_example(out, launch + ["2"])
    check_output(stdout, out)
    start = next(l for l in open(out / "metrics.jsonl", encoding="utf-8") if '"start"' in l)
    assert '"launch":"mpirun"' in start and '"world":2' in start
    words = command_line(stdout)
    cli = tmp_path / "cli"
    exe = os.environ["SEQPAR_NER_EXE"]
    done = subprocess.run(launch + ["2", exe] +
                          [w if not w.startswith("--output_dir=") else f"--output_dir={cli}"
                           for w in words], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert losses(out) == losses(cli)
    # and the thread ranks of one process compute the same run
    alone = tmp_path / "threads"
    run_example(alone)
    assert losses(alone) == pytest.approx(losses(out), rel=1e-6)

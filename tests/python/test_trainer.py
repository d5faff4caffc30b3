"""Trainer: a run from Python is seqgpt_ner's run (its losses, files and answers), with
transformers' calls and Python's exceptions."""

import json
import os
import signal
import threading
import time

import pytest

import seqpar
from conftest import losses, run_cli


def small_args(out, **more):
    return seqpar.TrainingArguments(out, plan="dp2", max_steps=4, per_device_train_batch_size=4,
                                    learning_rate=5e-3, logging_steps=1, eval_limit=8,
                                    per_device_eval_batch_size=8, seed=3, **more)


def test_train_equals_the_command_line(tmp_path, train_records, dev_records):
    args = small_args(str(tmp_path / "py"))
    trainer = seqpar.Trainer(model="tiny", args=args, train_dataset=train_records,
                             eval_dataset=dev_records)
    out = trainer.train()
    assert out.global_step == 4
    py = losses(tmp_path / "py")
    assert sorted(py) == [1, 2, 3, 4]
    assert out.training_loss == pytest.approx(sum(py.values()) / 4)
    assert set(out.metrics) >= {"eval_f1", "eval_precision", "eval_recall"}
    # The same words on the command line, on the records the Trainer wrote: the same run.
    data = tmp_path / "py" / "datasets"
    assert (data / "train.jsonl").read_text(encoding="utf-8").count("\n") == len(train_records)
    run_cli(["train"] + args.replace(output_dir=str(tmp_path / "cli")).to_args() +
            ["--model=tiny", f"--data_dir={data}"])
    assert losses(tmp_path / "cli") == py


def test_evaluate_predict_and_save_model(tmp_path, train_records, dev_records):
    trainer = seqpar.Trainer(model="tiny", args=small_args(str(tmp_path / "run")),
                             train_dataset=train_records, eval_dataset=dev_records)
    trainer.train()
    metrics = trainer.evaluate(limit=8)
    assert set(metrics) >= {"eval_f1", "eval_precision", "eval_recall"}
    scores = json.loads((tmp_path / "run" / "dev.scores.json").read_text(encoding="utf-8"))
    assert metrics["eval_f1"] == pytest.approx(scores["f1"])
    # eval on the command line scores the same weights on the same sample alike
    run_cli(["eval", f"--output_dir={tmp_path / 'run'}", "--eval_limit=8", "--seed=3"])
    again = json.loads((tmp_path / "run" / "dev.scores.json").read_text(encoding="utf-8"))
    assert again["f1"] == pytest.approx(metrics["eval_f1"])

    texts = ["蒋军宁从珠海出发，前往南昌渝中区。", "韩鑫鹏说上海足球俱乐部是我最喜欢的地方。"]
    answers = trainer.predict(texts)
    cli = [json.loads(line) for line in
           run_cli(["predict", f"--output_dir={tmp_path / 'run'}"] +
                   [f"--text={t}" for t in texts]).splitlines() if line.startswith("{")]
    assert answers == cli
    assert [a["text"] for a in answers] == texts
    for a in answers:  # each mention found in the text is where its offsets say (end inclusive)
        for e in a["entities"]:
            if e["start"] is not None:
                assert a["text"][e["start"]:e["end"] + 1] == e["text"]

    saved = trainer.save_model(tmp_path / "model")
    for name in ("config.json", "model.safetensors", "tokenizer.json", "seqgpt_task.json"):
        assert (tmp_path / "model" / name).exists(), name
    # The directory alone answers as the run did.
    alone = seqpar.Trainer(model=saved, args=seqpar.TrainingArguments(str(tmp_path / "none")))
    assert alone.predict(texts) == answers


def test_resume_continues_the_same_run(tmp_path, train_records, dev_records):
    whole = seqpar.Trainer(model="tiny", args=small_args(str(tmp_path / "whole")),
                           train_dataset=train_records, eval_dataset=dev_records)
    whole.train()
    cut = seqpar.Trainer(model="tiny", args=small_args(str(tmp_path / "cut"), stop_after=2),
                         train_dataset=train_records, eval_dataset=dev_records)
    first = cut.train()
    assert first.global_step == 2 and not first.run["completed"]
    cut.args = small_args(str(tmp_path / "cut"))
    second = cut.train(resume_from_checkpoint=True)
    assert second.global_step == 4 and second.run["completed"]
    assert losses(tmp_path / "cut") == losses(tmp_path / "whole")


def test_interrupt_stops_with_a_checkpoint(tmp_path, train_records, dev_records):
    out = tmp_path / "stopped"
    args = small_args(str(out)).replace(max_steps=100000, eval_limit=0, eval_strategy="no")
    trainer = seqpar.Trainer(model="tiny", args=args, train_dataset=train_records,
                             eval_dataset=dev_records)

    def interrupt_after_a_step():  # as Ctrl-C in a notebook: SIGINT to the process
        deadline = time.time() + 120
        while time.time() < deadline:
            if (out / "metrics.jsonl").exists() and losses(out):
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.05)

    threading.Thread(target=interrupt_after_a_step, daemon=True).start()
    with pytest.raises(KeyboardInterrupt, match="by SIGINT"):
        trainer.train()
    step = trainer.state["global_step"]
    assert 1 <= step < 100000
    assert (out / f"step-{step}.safetensors").exists()


def test_the_gil_is_released_while_it_trains(tmp_path, train_records, dev_records):
    trainer = seqpar.Trainer(model="tiny", args=small_args(str(tmp_path / "gil")),
                             train_dataset=train_records, eval_dataset=dev_records)
    worker = threading.Thread(target=trainer.train)
    started = time.perf_counter()
    worker.start()
    ticks = 0
    while worker.is_alive():
        ticks += 1
        time.sleep(0.001)
    seconds = time.perf_counter() - started
    # With the GIL held the whole run, this thread would tick only before and after it.
    assert seconds > 0.2 and ticks > seconds * 100


def test_errors_are_pythons(tmp_path, train_records, dev_records):
    with pytest.raises(FileNotFoundError, match="no-such-model"):
        seqpar.Trainer(model=str(tmp_path / "no-such-model"),
                       args=small_args(str(tmp_path / "a")), train_dataset=train_records,
                       eval_dataset=dev_records).train()
    with pytest.raises(ValueError, match="plan dp2 needs 2 ranks"):  # a layout 3 cannot hold
        seqpar.Trainer(model="tiny", args=small_args(str(tmp_path / "b")).replace(ranks=3),
                       train_dataset=train_records, eval_dataset=dev_records).train()
    bad = list(train_records) + [{"text": "没有标签", "label": "not a span map"}]
    with pytest.raises(ValueError, match="train.jsonl:97"):
        seqpar.Trainer(model="tiny", args=small_args(str(tmp_path / "c")), train_dataset=bad,
                       eval_dataset=dev_records).train()
    with pytest.raises(ValueError, match="record 2 is a str"):
        seqpar.Trainer(model="tiny", args=small_args(str(tmp_path / "d")),
                       train_dataset=[train_records[0], "text"], eval_dataset=dev_records).train()
    with pytest.raises(FileNotFoundError, match="no weights"):
        seqpar.Trainer(model="tiny", args=small_args(str(tmp_path / "never"))).predict("文本")


class Rows:
    """Records as a datasets.Dataset hands them: an iterable of dicts that is not a list."""

    def __init__(self, records):
        self._records = records

    def __len__(self):
        return len(self._records)

    def __iter__(self):
        return (dict(r) for r in self._records)


def test_classification_with_a_deepspeed_config(tmp_path):
    from conftest import ROOT

    fixture = ROOT / "tests" / "data" / "fixtures" / "classification_fixture.jsonl"
    records = [json.loads(line) for line in fixture.read_text(encoding="utf-8").splitlines()]
    config = tmp_path / "ds_config.json"
    config.write_text(json.dumps({"zero_optimization": {"stage": 2},
                                  "gradient_clipping": 0.5}), encoding="utf-8")
    args = seqpar.TrainingArguments(str(tmp_path / "cls"), deepspeed=str(config), max_steps=3,
                                    per_device_train_batch_size=2, gradient_accumulation_steps=1,
                                    logging_steps=1, seed=5,
                                    ranks=2)
    trainer = seqpar.Trainer(model="tiny", args=args, train_dataset=Rows(records),
                             eval_dataset=Rows(records), task="classification")
    out = trainer.train()
    assert out.global_step == 3
    start = next(r for r in trainer.log_history() if r["event"] == "start")
    assert start["plan"] == "zero2x2" and start["world"] == 2  # ZeRO-2, as the config names
    metrics = trainer.evaluate()
    assert 0.0 <= metrics["eval_accuracy"] <= 1.0 and "eval_macro_f1" in metrics


def test_training_from_a_model_directory(tmp_path, train_records, dev_records):
    first = seqpar.Trainer(model="tiny", args=small_args(str(tmp_path / "first")),
                           train_dataset=train_records, eval_dataset=dev_records)
    first.train()
    saved = first.save_model(tmp_path / "model")
    again = seqpar.Trainer(model=saved, args=small_args(str(tmp_path / "again")),
                           train_dataset=train_records, eval_dataset=dev_records)
    assert again.train().global_step == 4
    # It started from the saved weights, not afresh: its first loss is below the first run's.
    assert losses(tmp_path / "again")[1] < losses(tmp_path / "first")[1]


SIGTERM_SCRIPT = r'''
import json, os, signal, sys, threading, time
import seqpar
out, data = sys.argv[1], sys.argv[2]
records = [json.loads(l) for l in open(os.path.join(data, "train.jsonl"), encoding="utf-8")][:64]
args = seqpar.TrainingArguments(out, max_steps=100000, per_device_train_batch_size=4,
                                eval_strategy="no", seed=3)
trainer = seqpar.Trainer(model="tiny", args=args, train_dataset=records, eval_dataset=records[:8])
def stop():
    while not any('"train"' in l for l in open(os.path.join(out, "metrics.jsonl"))
                  if os.path.exists(os.path.join(out, "metrics.jsonl"))):
        time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGTERM)   # as Slurm's scancel or mpirun's teardown
def watch():
    while not os.path.exists(os.path.join(out, "metrics.jsonl")):
        time.sleep(0.05)
    stop()
threading.Thread(target=watch, daemon=True).start()
try:
    trainer.train()
except KeyboardInterrupt as e:
    print("interrupted:", e, flush=True)
    sys.exit(3)
'''


def test_sigterm_stops_with_a_checkpoint(tmp_path):
    import subprocess
    import sys

    from conftest import DATA

    done = subprocess.run([sys.executable, "-c", SIGTERM_SCRIPT, str(tmp_path / "run"), str(DATA)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 3, done.stdout + done.stderr
    line = next(l for l in done.stdout.splitlines() if l.startswith("interrupted:"))
    assert "by SIGTERM" in line
    step = int(line.split("stopped after step ")[1].split()[0])
    assert (tmp_path / "run" / f"step-{step}.safetensors").exists()

"""seqpar from Python: SeqGPT and BLOOM fine-tuning with transformers' Trainer habits.

    import seqpar
    args = seqpar.TrainingArguments(output_dir="run", max_steps=200, eval_strategy="steps",
                                    eval_steps=50, plan="dp2")
    trainer = seqpar.Trainer(model="tiny", args=args, train_dataset=train, eval_dataset=dev)
    trainer.train()
    trainer.evaluate()                      # {"eval_f1": ..., ...}
    trainer.predict(["明天北京天气怎么样"])   # the answers, with character offsets
    trainer.save_model("model")             # a transformers model directory

A run is seqgpt_ner's run (docs/ner.md): the same arguments under the same names, the same
progress lines, metrics.jsonl, checkpoints and resume; TrainingArguments takes every option
of `seqgpt_ner --help` as a keyword. CompiledTrainer steps one rank's trainer on NumPy
arrays (docs/python.md).
"""

from __future__ import annotations

import atexit
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from . import _seqpar

__all__ = [
    "CompiledTrainer",
    "TrainOutput",
    "Trainer",
    "TrainingArguments",
    "compiled_models",
    "compiled_precisions",
    "process_count",
    "process_rank",
]

PathLike = Union[str, "os.PathLike[str]"]

# The MPI session the module began under mpirun or srun ends with the interpreter.
atexit.register(_seqpar.finalize)


def compiled_models() -> List[str]:
    """The models this build compiled, by the names `model=` takes ("tiny", "seqgpt560m", ...)."""
    return _seqpar.compiled_models()


def compiled_precisions(device: str = "cpu") -> List[str]:
    """The precisions this build compiled for `device` ("fp32", "bf16", ...)."""
    return _seqpar.compiled_precisions(device)


def process_rank() -> int:
    """This process's rank among those mpirun or srun started (0 when run alone)."""
    return _seqpar.process_rank()


def process_count() -> int:
    """How many processes mpirun or srun started (1 when run alone)."""
    return _seqpar.process_count()


def _words(name: str, value: Any) -> List[str]:
    """The command-line words of one argument: --name=value (lists comma-joined; text repeated)."""
    if value is None:
        return []
    if isinstance(value, bool):
        return [f"--{name}={'True' if value else 'False'}"]
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, (list, tuple)):
        if name == "text":
            return [f"--text={v}" for v in value]
        return [f"--{name}={','.join(str(v) for v in value)}"]
    if isinstance(value, float):
        return [f"--{name}={value!r}"]
    return [f"--{name}={value}"]


class TrainingArguments:
    """What a run is asked to do, under transformers' names: every option of `seqgpt_ner --help`.

    Keywords are the command line's options with `-` written `_` (learning_rate,
    per_device_train_batch_size, eval_strategy, deepspeed, plan, zero_stage, tensor_parallel,
    pipeline_parallel, precision, bf16, ...). They are checked when made, by the command line's
    own parser: an unknown name (with the nearest known ones) or a bad value raises ValueError.
    Every argument reads back as an attribute, given or not (`args.learning_rate`).
    """

    def __init__(self, output_dir: PathLike = "seqpar_out", **kwargs: Any) -> None:
        given = {"output_dir": os.fspath(output_dir)}
        given.update(kwargs)
        object.__setattr__(self, "_given", given)
        object.__setattr__(self, "_values", _seqpar.argument_values(self.to_args()))

    def to_args(self) -> List[str]:
        """The command-line words of the arguments given (what seqgpt_ner would be passed)."""
        words: List[str] = []
        for name, value in self._given.items():
            words += _words(name, value)
        return words

    def to_dict(self) -> Dict[str, Any]:
        """Every argument by name, as the run reads it."""
        return dict(self._values)

    def replace(self, **changes: Any) -> "TrainingArguments":
        """A copy with `changes` made (the others as given)."""
        given = dict(self._given)
        given.update(changes)
        output_dir = given.pop("output_dir")
        return TrainingArguments(output_dir, **given)

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("_values", {})
        if name in values:
            return values[name]
        raise AttributeError(f"TrainingArguments has no argument '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("TrainingArguments is read-only; use args.replace(name=value)")

    def __repr__(self) -> str:
        given = ", ".join(f"{k}={v!r}" for k, v in self._given.items())
        return f"TrainingArguments({given})"


@dataclass
class TrainOutput:
    """What train() returns, as transformers' TrainOutput, with the run's own facts in `run`."""

    global_step: int
    training_loss: float
    metrics: Dict[str, float]
    run: Dict[str, Any] = field(default_factory=dict)


def _json_value(value: Any) -> Any:
    # NumPy scalars and arrays (datasets' columns may hold them) as JSON has them.
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"a record holds {type(value).__name__}, which JSON cannot hold")


def _write_records(records: Iterable[Mapping[str, Any]], path: str, what: str) -> None:
    """`records` as JSON lines at `path` (docs/tasks.md's shapes), replaced whole and only when
    they changed: every process of a job writes the same file."""
    lines = []
    for i, record in enumerate(records):
        if not isinstance(record, Mapping):
            raise ValueError(f"{what}: record {i + 1} is a {type(record).__name__}; expected a dict "
                             "in the shapes of docs/tasks.md (text with spans, label or relations)")
        lines.append(json.dumps(dict(record), ensure_ascii=False, default=_json_value))
    if not lines:
        raise ValueError(f"{what} holds no records")
    text = "\n".join(lines) + "\n"
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    except FileNotFoundError:
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(temporary, path)


def _model_words(model: str) -> List[str]:
    """--model for a compiled model's name (unless a folder of that name is meant), else
    --weights: a Hugging Face folder or a weights file."""
    if model in compiled_models() and not os.path.exists(model):
        return [f"--model={model}"]
    return [f"--weights={model}"]


def _run(words: List[str], print_predictions: bool = False) -> Any:
    outcome = json.loads(_seqpar.run(words, print_predictions))
    return outcome["value"]


class Trainer:
    """A fine-tune of a compiled model, or of a Hugging Face model directory, on datasets.

    model: a compiled model's name (compiled_models()), or a folder that transformers wrote
        (config.json, the weights, tokenizer.json), whose shape picks the compiled model.
    args: TrainingArguments (the defaults when None).
    train_dataset, eval_dataset: iterables of dicts in the record shapes of docs/tasks.md
        (a list, a datasets.Dataset: each train() reads them again, so not a one-pass
        generator); None: args.data_dir's train and dev files (the bundled corpus when that
        is not given either).
    task: "ner", "classification" or "relation"; None: the records' shape says.
    labels: the label set; None: the training records'.
    tokenizer: a tokenizer.json; None: the model directory's, or one made from the data.

    Under mpirun or srun every process makes the same Trainer and each is one rank of the
    run; run alone, the ranks are threads (args.ranks, else the layout's).
    """

    def __init__(self, model: PathLike = "tiny", args: Optional[TrainingArguments] = None,
                 train_dataset: Optional[Iterable[Mapping[str, Any]]] = None,
                 eval_dataset: Optional[Iterable[Mapping[str, Any]]] = None,
                 task: Optional[str] = None, labels: Optional[Sequence[str]] = None,
                 tokenizer: Optional[PathLike] = None) -> None:
        self.args = args if args is not None else TrainingArguments()
        self.model = os.fspath(model)
        self.train_dataset = train_dataset
        self.eval_dataset = eval_dataset
        self.task = task
        self.labels = list(labels) if labels is not None else None
        self.tokenizer = os.fspath(tokenizer) if tokenizer is not None else None
        self.state: Dict[str, Any] = {}  # the last run's outcome (train())

    @property
    def output_dir(self) -> str:
        return self.args.output_dir

    def _data_words(self) -> List[str]:
        if self.train_dataset is None:
            return []
        if self.eval_dataset is None:
            raise ValueError("eval_dataset is None: a run with train_dataset needs its dev records "
                             "too (they are scored at the end and by eval_strategy)")
        folder = os.path.join(self.output_dir, "datasets")
        _write_records(self.train_dataset, os.path.join(folder, "train.jsonl"), "train_dataset")
        _write_records(self.eval_dataset, os.path.join(folder, "dev.jsonl"), "eval_dataset")
        return [f"--data_dir={folder}"]

    def _task_words(self) -> List[str]:
        words: List[str] = []
        if self.task is not None:
            words.append(f"--task={self.task}")
        if self.labels is not None:
            words += _words("labels", self.labels)
        if self.tokenizer is not None:
            words.append(f"--tokenizer={self.tokenizer}")
        return words

    def train(self, resume_from_checkpoint: Union[None, bool, PathLike] = None) -> TrainOutput:
        """Trains as `seqgpt_ner train` does with these arguments; returns the steps taken, the
        mean training loss of the steps logged and the final evaluation's metrics.

        resume_from_checkpoint: True: the newest complete checkpoint in output_dir; a path: that
        checkpoint (or run folder). SIGINT (Ctrl-C, a notebook's interrupt) or SIGTERM stops the
        run at the next step with a checkpoint, then raises KeyboardInterrupt.
        """
        run = _run(self.train_args(resume_from_checkpoint))
        self.state = run
        if run.get("signal"):
            raise KeyboardInterrupt(
                f"stopped after step {run['global_step']} by {run['stopped_by']}; checkpoint "
                f"{run['last_checkpoint']}; train(resume_from_checkpoint=True) continues it")
        losses = [row["loss"] for row in self.log_history() if row.get("event") == "train"]
        metrics = {f"eval_{k}": v for k, v in run.get("metrics", {}).items()}
        return TrainOutput(run["global_step"], sum(losses) / len(losses) if losses else float("nan"),
                           metrics, run)

    def train_args(self, resume_from_checkpoint: Union[None, bool, PathLike] = None) -> List[str]:
        """The command line train() runs (`seqgpt_ner` and these words make the same run),
        the datasets written where it reads them."""
        words = ["train"] + self.args.to_args() + _model_words(self.model) + self._data_words()
        words += self._task_words()
        if resume_from_checkpoint is True:
            words.append("--resume_from_checkpoint")
        elif resume_from_checkpoint not in (None, False):
            words.append(f"--resume_from_checkpoint={os.fspath(resume_from_checkpoint)}")
        return words

    def log_history(self) -> List[Dict[str, Any]]:
        """The rows of the run's metrics.jsonl (start, train, eval and end events)."""
        path = os.path.join(self.output_dir, "metrics.jsonl")
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    def _weights_words(self) -> List[str]:
        # A model directory given as the model and not trained here answers as itself.
        words = _model_words(self.model)
        if os.path.exists(os.path.join(self.output_dir, "run.json")) or \
                words[0].startswith("--model="):
            return []
        return words

    def evaluate(self, eval_dataset: Optional[Iterable[Mapping[str, Any]]] = None,
                 limit: int = 0) -> Dict[str, float]:
        """Scores the run's weights on eval_dataset (else the data the run was trained on) as
        `seqgpt_ner eval` does; returns its metrics named as transformers names them (eval_f1,
        eval_accuracy, ...). limit: a stratified sample of that many records (0: all). Under a
        launcher rank 0 evaluates and every process returns its metrics."""
        words = ["eval", f"--output_dir={self.output_dir}", f"--eval_limit={limit}",
                 f"--seed={self.args.seed}"] + self._weights_words() + self._task_words()
        words += _words("threads", self.args.threads or None)
        if eval_dataset is not None:
            folder = os.path.join(self.output_dir, "datasets", "evaluate")
            _write_records(eval_dataset, os.path.join(folder, "dev.jsonl"), "eval_dataset")
            words.append(f"--data_dir={folder}")
        elif self.train_dataset is not None:
            words.append(f"--data_dir={os.path.join(self.output_dir, 'datasets')}")
        result = _run(words)
        return {f"eval_{k}": v for k, v in result["metrics"].items()}

    def predict(self, texts: Union[str, Sequence[str]]) -> List[Dict[str, Any]]:
        """The run's task on each text, as `seqgpt_ner predict --text` answers: a dict each, with
        the answers and their character offsets (docs/tasks.md). Under a launcher rank 0
        predicts and every process returns its answers."""
        if isinstance(texts, str):
            texts = [texts]
        if not texts:
            raise ValueError("predict: no texts")
        words = ["predict", f"--output_dir={self.output_dir}"] + self._weights_words()
        words += self._task_words() + _words("text", list(texts))
        return _run(words)

    def save_model(self, output_dir: PathLike, checkpoint: Optional[PathLike] = None,
                   overwrite: bool = False) -> str:
        """Writes the transformers model directory (config.json, model.safetensors,
        tokenizer.json, seqgpt_task.json) of the run's final weights, or of `checkpoint`, as
        `seqgpt_ner export` does; returns its path."""
        weights = os.fspath(checkpoint) if checkpoint is not None else os.path.join(
            self.output_dir, "model.safetensors")
        words = ["export", f"--checkpoint={weights}", f"--to={os.fspath(output_dir)}",
                 f"--overwrite_output_dir={overwrite}"]
        _run(words)
        return os.fspath(output_dir)


class CompiledTrainer:
    """One run's trainer, stepped by the caller: `step(input_ids, labels)` on int32 arrays.

    model: a compiled model's name or a Hugging Face model directory (its weights loaded).
    args: TrainingArguments; max_steps is the length of the learning-rate schedule, plan (or
        zero_stage, tensor_parallel, pipeline_parallel) the layout, precision the arithmetic.

    Every rank passes the same global batch. Run alone, the ranks are threads of this process
    (args.ranks, else the layout's world, else tensor x pipeline); under mpirun or srun each
    process is one rank. Arrays are read in place: NumPy arrays, or anything with the buffer
    protocol or DLPack (torch CPU tensors), C-contiguous int32 of shape (rows, seq).
    """

    def __init__(self, model: PathLike = "tiny", args: Optional[TrainingArguments] = None) -> None:
        args = args if args is not None else TrainingArguments(max_steps=1000)
        model = os.fspath(model)
        self._trainer = _seqpar.CompiledTrainer(["train"] + args.to_args() + _model_words(model))
        self.args = args

    def step(self, input_ids: Any, labels: Any, attention_mask: Any = None) -> Dict[str, Any]:
        """One optimizer step on the global batch; returns its statistics (step, loss,
        grad_norm, lr, tokens, targets, seconds, tokens_per_s, skipped, overflow, loss_scale).
        labels follow transformers: labels[t] is the token expected at t, -100 ignored."""
        return self._trainer.step(input_ids, labels, attention_mask)

    def evaluate(self, input_ids: Any, labels: Any, attention_mask: Any = None) -> float:
        """The loss of a batch, the weights untouched."""
        return self._trainer.evaluate(input_ids, labels, attention_mask)

    def memory(self) -> Dict[str, tuple]:
        """This rank's memory by kind (parameters, gradients, optimizer, activations, ...):
        (current bytes, peak bytes) each, and their total."""
        return self._trainer.memory()

    def save(self, path: PathLike) -> None:
        """The whole training state (weights, optimizer, step) as a checkpoint."""
        self._trainer.save(os.fspath(path))

    def load(self, path: PathLike) -> None:
        """The training state of a checkpoint save() (or a run) wrote."""
        self._trainer.load(os.fspath(path))

    def save_weights(self, path: PathLike) -> None:
        """The model's weights, whole, in transformers' names (model.safetensors)."""
        self._trainer.save_weights(os.fspath(path))

    @property
    def steps_taken(self) -> int:
        return self._trainer.steps_taken

    @property
    def plan(self) -> str:
        return self._trainer.plan

    @property
    def ranks(self) -> int:
        return self._trainer.ranks

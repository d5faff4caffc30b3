"""TrainingArguments: the command line's options under the same names, checked by its parser."""

import pytest

import seqpar


def test_given_arguments_read_back_as_the_run_reads_them():
    args = seqpar.TrainingArguments("out", learning_rate=1e-3, per_device_train_batch_size=3,
                                    eval_strategy="steps", eval_steps=7, bf16=True,
                                    labels=["name", "address"], report_to=["jsonl", "tensorboard"])
    assert args.learning_rate == 1e-3
    assert args.per_device_train_batch_size == 3
    assert args.eval_steps == 7
    assert args.output_dir == "out"
    assert args.precision == "bf16"  # --bf16 True is precision bf16
    assert args.labels == ["name", "address"]
    assert "eval_strategy" in args.to_dict()


def test_defaults_are_the_command_lines():
    args = seqpar.TrainingArguments()
    # seqgpt_ner's own defaults (docs/ner.md), not transformers'
    assert args.num_train_epochs == 15
    assert args.weight_decay == 0.01
    assert args.seed == 42
    assert args.output_dir == "seqpar_out"


def test_words_are_flags():
    args = seqpar.TrainingArguments("o", zero_stage=2, gradient_checkpointing=False,
                                    text=["a", "b"], warmup_ratio=0.1)
    words = args.to_args()
    assert "--zero_stage=2" in words
    assert "--gradient_checkpointing=False" in words
    assert words.count("--text=a") == 1 and "--text=b" in words
    assert "--warmup_ratio=0.1" in words


def test_an_unknown_name_is_refused_with_the_nearest():
    with pytest.raises(ValueError, match=r"unknown option '--learning_rat'.*--learning_rate"):
        seqpar.TrainingArguments("o", learning_rat=1e-3)


def test_a_bad_value_is_refused_by_name():
    with pytest.raises(ValueError, match="per_device_train_batch_size"):
        seqpar.TrainingArguments("o", per_device_train_batch_size="many")
    with pytest.raises(ValueError, match="eval_strategy"):
        seqpar.TrainingArguments("o", eval_strategy="sometimes")


def test_replace_keeps_the_rest():
    args = seqpar.TrainingArguments("o", learning_rate=1e-3, seed=7)
    other = args.replace(seed=8)
    assert other.seed == 8 and other.learning_rate == 1e-3 and args.seed == 7
    with pytest.raises(AttributeError):
        args.seed = 9


def test_the_build_says_what_it_compiled():
    assert "tiny" in seqpar.compiled_models()
    assert "fp32" in seqpar.compiled_precisions("cpu")
    assert seqpar.process_rank() == 0 and seqpar.process_count() == 1


def test_the_type_stub_lists_the_compiled_arguments():
    import subprocess
    import sys

    from conftest import ROOT

    done = subprocess.run([sys.executable, str(ROOT / "tools" / "python_stubs.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    stub = (ROOT / "python" / "seqpar" / "__init__.pyi").read_text(encoding="utf-8")
    for name in ("learning_rate: Optional[float]", "zero_stage:", "eval_strategy:", "bf16: Optional[bool]"):
        assert name in stub

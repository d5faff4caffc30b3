"""CompiledTrainer: one step at a time on arrays, held to the single-rank run and to itself."""

import numpy as np
import pytest

import seqpar

VOCAB = 4608  # the tiny model's (examples/seqgpt_ner/model_list.hpp)


def batch(rows=4, seq=16, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, VOCAB, size=(rows, seq), dtype=np.int32)
    labels = ids.copy()
    labels[:, : seq // 2] = -100  # only the answer half is trained, as prompts are
    return ids, labels


def make(plan="single", **more):
    args = seqpar.TrainingArguments("unused", plan=plan, max_steps=10, learning_rate=1e-2,
                                    warmup_ratio=0.0, seed=11, **more)
    return seqpar.CompiledTrainer("tiny", args)


def test_steps_learn_and_report():
    t = make()
    ids, labels = batch()
    first = t.step(ids, labels)
    for _ in range(4):
        last = t.step(ids, labels)
    assert first["step"] == 1 and last["step"] == 5 and t.steps_taken == 5
    assert first["loss"] > last["loss"]  # the same batch five times: it is learned
    assert first["tokens"] == 64 and first["targets"] == 4 * 8
    assert first["lr"] == pytest.approx(1e-2)
    memory = t.memory()
    assert memory["parameters"][0] > 0 and memory["total"][1] >= memory["total"][0] > 0


def test_data_parallel_ranks_equal_one_rank():
    ids, labels = batch(seed=1)
    one, two = make("single"), make("dp2")
    assert two.ranks == 2 and one.ranks == 1
    for _ in range(3):
        a, b = one.step(ids, labels), two.step(ids, labels)
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5)
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-4)


def test_python_steps_equal_steps_in_cpp():
    ids, labels = batch(seed=2)
    a, b = make(), make()
    for _ in range(2):
        a.step(ids, labels)
    b._trainer.steps_in_cpp(ids, labels, 2)
    assert a.evaluate(ids, labels) == b.evaluate(ids, labels)


def test_other_layouts_and_dtypes_are_converted():
    ids, labels = batch(seed=3)
    a, b = make(), make()
    want = a.step(ids, labels)["loss"]
    # int64 in Fortran order: converted (copied) to C-contiguous int32
    got = b.step(np.asfortranarray(ids.astype(np.int64)), np.asfortranarray(labels.astype(np.int64)))
    assert got["loss"] == want


def test_torch_tensors_through_dlpack():
    torch = pytest.importorskip("torch")
    ids, labels = batch(seed=4)
    a, b = make(), make()
    assert b.step(torch.from_numpy(ids), torch.from_numpy(labels))["loss"] == \
        a.step(ids, labels)["loss"]


def test_bad_batches_are_refused_and_change_nothing():
    t = make()
    ids, labels = batch(seed=5)
    bad = ids.copy()
    bad[1, 3] = VOCAB
    with pytest.raises(ValueError, match=r"input_ids\[1\]\[3\]"):
        t.step(bad, labels)
    with pytest.raises(ValueError, match="labels: shape"):
        t.step(ids, labels[:, :8].copy())
    assert t.steps_taken == 0
    assert t.step(ids, labels)["step"] == 1


def test_save_and_load_resume_the_same_steps(tmp_path):
    ids, labels = batch(seed=6)
    a = make()
    a.step(ids, labels)
    a.save(tmp_path / "state.safetensors")
    a.step(ids, labels)
    want = a.step(ids, labels)["loss"]
    b = make()
    b.load(tmp_path / "state.safetensors")
    assert b.steps_taken == 1
    b.step(ids, labels)
    assert b.step(ids, labels)["loss"] == want
    b.save_weights(tmp_path / "model.safetensors")
    assert (tmp_path / "model.safetensors").stat().st_size > 0


def test_a_schedule_needs_its_length():
    with pytest.raises(ValueError, match="max_steps"):
        seqpar.CompiledTrainer("tiny", seqpar.TrainingArguments("unused"))

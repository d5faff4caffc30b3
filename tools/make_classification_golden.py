#!/usr/bin/env python3
"""Writes tests/data/fixtures/classification_golden.json: classification scores computed by
scikit-learn, for tests/data/test_classification.cpp to hold ClassificationScore to.

Sixty (gold, answer) pairs over six classes, drawn with a fixed seed: mostly right, some
wrong, and some garbled answers (null: the answer named no class of the set), one class
that is answered but never gold and one that is gold but never answered. The scores are
scikit-learn's accuracy_score and precision_recall_fscore_support / f1_score with
average='macro' over the classes that are gold or answered (a garbled answer counts as a
wrong answer that predicts no class), zero_division=0. Nothing at build or test time needs
Python.

Usage: python3 tools/make_classification_golden.py [--out tests/data/fixtures]
"""

import argparse
import json
import os
import random

import sklearn
from sklearn.metrics import accuracy_score, f1_score, precision_recall_fscore_support

GARBLED = "<garbled>"  # stands for a null answer in scikit-learn's label lists


def cases(seed=2929, n=56):
    rng = random.Random(seed)
    classes = ["体育", "财经", "科技", "娱乐"]
    gold, answers = [], []
    for _ in range(n):
        g = rng.choice(classes)
        u = rng.random()
        a = g if u < 0.6 else rng.choice(classes + ["军事"]) if u < 0.8 else None
        gold.append(g)
        answers.append(a)
    # 教育 is gold but never answered; 军事 (above) is answered but never gold.
    gold += ["教育", "教育", "教育", "娱乐"]
    answers += ["体育", None, "财经", "军事"]
    return gold, answers


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join("tests", "data", "fixtures"))
    args = parser.parse_args()
    gold, answers = cases()
    y_pred = [a if a is not None else GARBLED for a in answers]
    labels = sorted(set(gold) | {a for a in answers if a is not None})
    assert "军事" in labels and "军事" not in gold, "a class answered but never gold"
    assert "教育" in gold and "教育" not in answers, "a class gold but never answered"
    assert None in answers, "garbled answers"
    p, r, f, s = precision_recall_fscore_support(
        gold, y_pred, labels=labels, average=None, zero_division=0
    )
    out = {
        "made_by": "tools/make_classification_golden.py with scikit-learn " + sklearn.__version__,
        "gold": gold,
        "answers": answers,
        "accuracy": accuracy_score(gold, y_pred),
        "macro_f1": f1_score(gold, y_pred, labels=labels, average="macro", zero_division=0),
        "per_label": {
            label: {"precision": float(p[i]), "recall": float(r[i]), "f1": float(f[i]),
                    "support": int(s[i])}
            for i, label in enumerate(labels)
        },
    }
    path = os.path.join(args.out, "classification_golden.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(out, fh, ensure_ascii=False, indent=1)
        fh.write("\n")
    print(f"wrote {path}: accuracy {out['accuracy']:.6f}, macro-F1 {out['macro_f1']:.6f}")


if __name__ == "__main__":
    main()

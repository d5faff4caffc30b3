"""Fine-tune a model on Chinese NER from Python, as a notebook would: records as dicts, then
train, evaluate, predict and save (docs/python.md).

    python examples/python/finetune.py                       # the tiny model, 2 thread ranks
    python examples/python/finetune.py --plan zero2 --max_steps 60
    mpirun -np 2 python examples/python/finetune.py          # one rank per process
    python examples/python/finetune.py --model SeqGPT-560M --data ../shared/data/cluener

--data is a folder with train and dev files in CLUENER's JSON lines (the bundled corpus by
default); any list of dicts in docs/tasks.md's shapes, or a datasets.Dataset, does as well.
"""

import argparse
import json
import os
import shlex

import seqpar


def read_records(path, limit):
    with open(path, encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    return records[:limit] if limit > 0 else records


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="tiny", help="a compiled model, or a transformers folder")
    p.add_argument("--data", default=os.path.join(here, "..", "data"))
    p.add_argument("--output_dir", default="finetune_out")
    p.add_argument("--plan", default="dp2")
    p.add_argument("--max_steps", type=int, default=400)
    p.add_argument("--train_records", type=int, default=0, help="the first N (0: all)")
    p.add_argument("--eval_records", type=int, default=40)
    p.add_argument("--seed", type=int, default=42)
    a = p.parse_args()

    train = read_records(os.path.join(a.data, "train.jsonl"), a.train_records)
    dev = read_records(os.path.join(a.data, "dev.jsonl"), 0)

    args = seqpar.TrainingArguments(
        output_dir=a.output_dir,
        plan=a.plan,
        max_steps=a.max_steps,
        per_device_train_batch_size=4,
        learning_rate=5e-3,
        logging_steps=5,
        eval_strategy="steps",
        eval_steps=max(1, a.max_steps // 2),
        per_device_eval_batch_size=20,
        eval_limit=a.eval_records,
        metric_for_best_model="f1",
        load_best_model_at_end=True,
        save_total_limit=2,
        seed=a.seed,
        overwrite_output_dir=True,
    )
    trainer = seqpar.Trainer(model=a.model, args=args, train_dataset=train, eval_dataset=dev)
    if seqpar.process_rank() == 0:  # the same run from the command line
        print("command line: seqgpt_ner", shlex.join(trainer.train_args()), flush=True)
    out = trainer.train()
    metrics = trainer.evaluate(limit=a.eval_records)
    answers = trainer.predict(["蒋军宁从珠海出发，前往南昌渝中区。", "韩鑫鹏说上海足球俱乐部是我最喜欢的地方。"])
    # The model directory goes beside the run folder (export never writes inside it).
    saved = trainer.save_model(a.output_dir.rstrip("/") + "_model", overwrite=True)

    if seqpar.process_rank() == 0:
        print(f"trained {out.global_step} steps, mean loss {out.training_loss:.4f}")
        print("evaluate:", json.dumps(metrics, ensure_ascii=False, sort_keys=True))
        for answer in answers:
            print("predict:", json.dumps(answer, ensure_ascii=False))
        print("saved", saved)


if __name__ == "__main__":
    main()

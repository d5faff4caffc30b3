#!/usr/bin/env python3
"""Side-by-side encode throughput: seqpar's Tokenizer against Hugging Face tokenizers.

Both encode the same corpus (tests/fixtures/tokenizer/bench_corpus.json) with the
same tokenizer.json (default: the 3000-token BLOOM-layout fixture), one text at a
time, on one thread. tokenizers is measured twice: a Python loop over
`encode(text)`, and `encode_batch(texts)` with its thread pool held to one
thread (RAYON_NUM_THREADS=1). seqpar is measured by its Google Benchmark binary
(BM_TokenizerEncode), whose token count and id checksum must equal tokenizers'.
All times are CPU time of the process (what Google Benchmark reports by
default), so a busy machine disturbs both sides alike.

With --large, also times loading a synthetic tokenizer.json of BLOOM's size
(250680 tokens, made by tools/make_tokenizer_fixtures.py --large in a temporary
folder) in both.

Usage: python3 tools/bench_tokenizer.py [--seqpar build/benchmarks/bench_tokenizer_encode]
                                        [--tokenizer PATH] [--corpus PATH] [--repeats N] [--large]
"""

import os

# The pool size is read when tokenizers starts its pool: set it before the import.
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import tokenizers  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(REPO, "tests", "fixtures", "tokenizer")


def best_of(repeats, fn):
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def run_seqpar(binary, args, bench_filter, min_time):
    cmd = [binary, f"--benchmark_filter={bench_filter}", "--benchmark_format=json",
           f"--benchmark_min_time={min_time}"] + args
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return {b["name"]: b for b in json.loads(out)["benchmarks"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seqpar", default=os.path.join(REPO, "build", "benchmarks", "bench_tokenizer_encode"),
                    help="the bench_tokenizer_encode binary")
    ap.add_argument("--tokenizer", default=os.path.join(FIXTURES, "bpe3000.json"))
    ap.add_argument("--corpus", default=os.path.join(FIXTURES, "bench_corpus.json"))
    ap.add_argument("--repeats", type=int, default=5, help="runs of tokenizers per measurement (best counts)")
    ap.add_argument("--min-time", type=float, default=1.0, help="Google Benchmark --benchmark_min_time")
    ap.add_argument("--large", action="store_true", help="also time loading a 250k-token tokenizer.json")
    args = ap.parse_args()

    with open(args.corpus, encoding="utf-8") as f:
        texts = json.load(f)
    nbytes = sum(len(t.encode("utf-8")) for t in texts)
    tok = Tokenizer.from_file(args.tokenizer)

    encodings = [tok.encode(t, add_special_tokens=False).ids for t in texts]
    ntokens = sum(len(e) for e in encodings)
    id_sum = sum(sum(e) for e in encodings)

    def loop():
        for t in texts:
            tok.encode(t, add_special_tokens=False)

    def batch():
        tok.encode_batch(texts, add_special_tokens=False)

    t_loop = best_of(args.repeats, loop)
    t_batch = best_of(args.repeats, batch)

    sp = run_seqpar(args.seqpar, [f"--tokenizer={args.tokenizer}", f"--corpus={args.corpus}"],
                    "BM_TokenizerEncode$", args.min_time)["BM_TokenizerEncode"]
    if int(sp["tokens"]) != ntokens or int(sp["id_sum"]) != id_sum or int(sp["texts"]) != len(texts):
        sys.exit(f"seqpar produced {sp['tokens']} tokens (id sum {sp['id_sum']}); tokenizers {ntokens} ({id_sum})")
    sp_bps = sp["bytes_per_second"]
    sp_tps = sp["tokens/s"]

    rows = [
        (f"tokenizers {tokenizers.__version__}, encode() loop", nbytes / t_loop, ntokens / t_loop),
        (f"tokenizers {tokenizers.__version__}, encode_batch, 1 thread", nbytes / t_batch, ntokens / t_batch),
        ("seqpar Tokenizer::encode (BM_TokenizerEncode)", sp_bps, sp_tps),
    ]
    print(f"corpus: {len(texts)} texts, {nbytes / 1e3:.1f} kB, {ntokens} tokens; tokenizer: {args.tokenizer}")
    print(f"{'implementation':<52} {'MB/s':>9} {'Mtokens/s':>10} {'seqpar is':>10}")
    for name, bps, tps in rows:
        print(f"{name:<52} {bps / 1e6:>9.2f} {tps / 1e6:>10.3f} {sp_bps / bps:>9.2f}x")
    print(f"ids identical: {ntokens} tokens, id sum {id_sum}")

    if args.large:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import make_tokenizer_fixtures as fixtures  # noqa: E402

        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "tokenizer.json")
            base = json.loads(Tokenizer.from_file(os.path.join(FIXTURES, "bpe500.json")).to_str())
            fixtures.write_large(path, base)
            t_hf = best_of(3, lambda: Tokenizer.from_file(path))
            load = run_seqpar(args.seqpar, [f"--load={path}"], "BM_TokenizerLoad", 0.01)["BM_TokenizerLoad"]
            unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[load["time_unit"]]
            t_sp = load["cpu_time"] * unit
            print(f"load of {os.path.getsize(path) / 1e6:.1f} MB, {int(load['vocab'])} tokens: "
                  f"tokenizers {t_hf:.3f} s, seqpar {t_sp:.3f} s ({t_hf / t_sp:.1f}x)")


if __name__ == "__main__":
    main()

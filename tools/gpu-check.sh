#!/usr/bin/env bash
# tools/gpu-check.sh OUTDIR: everything seqpar checks on a GPU, in one run of a few minutes.
#
#   1. tests:   test_cuda, Ops<Cuda> against Ops<Cpu> on the same random inputs, and
#               Trainer<..., Cuda, Fp32 | Bf16Mixed | Fp16Mixed> against Trainer<..., Cpu>
#      ranks:   test_cuda's "multi-rank" suite on its own (CudaThreadComm, multi-rank
#               plans on one GPU), so that a failure there cannot hide the other results
#      nccl:    test_nccl, NcclComm as a one-rank group (its streams, every collective)
#      separate: test_cuda_separate, Cuda trainers compiled by the host compiler against
#               the kernels compiled once (SEQPAR_SEPARATE_COMPILATION), against Trainer<Cpu>
#   2. seqpar:  training-step throughput on SeqGPT-560M's shape (bench_cuda_train_step)
#   3. pytorch: the same steps in PyTorch, Hugging Face BloomForCausalLM
#               (tools/bench_torch_gpu.py: autocast bf16, fp32 weights, fused AdamW)
#   4. ops:     per-op timings at SeqGPT-560M's shapes (bench_cuda_ops)
#   5. ner:     examples/seqgpt_ner --device cuda end to end on the bundled CLUENER sample:
#               the tiny model under dp2 in bf16 (CudaThreadComm, two ranks on the GPU) with
#               an evaluation generated on the GPU; a CPU run's checkpoint resumed on the
#               GPU in bf16; then SeqGPT-560M's shape (random init,
#               --model seqgpt560m) in bf16 on one GPU for SEQPAR_NER_STEPS steps, its
#               tokens/s and per-rank memory lines (GPU, arena peaks by category)
#
# A step whose program is missing is skipped with a message saying what to build. Full
# logs go to OUTDIR (created; twelve files at most: environment.log, test_cuda.log,
# test_cuda_ranks.log, test_nccl.log, test_cuda_separate.log, seqpar_bench.log, torch_bench.log, cuda_ops.log,
# ner_tiny.log, ner_resume.log, ner_560m.log, summary.txt; seqgpt_ner's outputs go to a temporary folder,
# removed after); the last lines printed, and summary.txt, are a table of the test results
# and one of tokens/s, MFU and peak memory per shape (and seqpar variant) for seqpar and
# PyTorch side by side.
#
# The binaries are built elsewhere (no GPU needed) and travel here:
#   cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSEQPAR_WITH_CUDA=ON \
#         -DCMAKE_CUDA_ARCHITECTURES=90 -DSEQPAR_NATIVE_ARCH=OFF
#         -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON
#   cmake --build build-gpu --target test_cuda test_nccl test_cuda_separate bench_cuda_ops bench_cuda_train_step seqgpt_ner -j2
#   mkdir -p build-gpu/lib && cp /usr/lib/x86_64-linux-gnu/libbenchmark.so.1debian build-gpu/lib/
#   cp /usr/lib/x86_64-linux-gnu/libgomp.so.1 /usr/lib/x86_64-linux-gnu/libonig.so.5 build-gpu/lib/
# (Without MPI seqgpt_ner needs no Open MPI libraries there; its single-GPU and CudaThreadComm
# runs are what this machine checks. It needs Oniguruma's libonig.so.5 for its tokenizer.)
# They need libcublas.so.13 and libcublasLt.so.13 (the benchmarks libcudart.so.13, test_nccl
# libnccl.so.2):
# from the CUDA toolkit, or from the nvidia-* wheels next to PyTorch (both are searched
# below). Other shared libraries a binary needs that the GPU machine lacks (the
# benchmarks' libbenchmark.so.1debian; test_cuda's libgomp.so.1, which a system with GCC has)
# travel in $SEQPAR_GPU_BUILD/lib.
#
# Environment:
#   SEQPAR_GPU_BUILD     build folder of the CUDA programs (default: build-gpu)
#   SEQPAR_CUDA_TEST     test binary (default: $SEQPAR_GPU_BUILD/tests/cuda/test_cuda)
#   SEQPAR_NCCL_TEST     NcclComm test binary (default: $SEQPAR_GPU_BUILD/tests/cuda/test_nccl)
#   SEQPAR_SEPARATE_TEST separately compiled trainers (default: $SEQPAR_GPU_BUILD/tests/cuda/test_cuda_separate)
#   SEQPAR_CUDA_OPS      per-op benchmark (default: $SEQPAR_GPU_BUILD/benchmarks/bench_cuda_ops)
#   SEQPAR_CUDA_BENCH    throughput binary (default: $SEQPAR_GPU_BUILD/benchmarks/bench_cuda_train_step)
#   SEQPAR_BENCH_ARGS    its arguments (default: --logits-mib=0,16,4096 --recompute-attention=0,1
#                        --fused-attention=0,1:
#                        8x512 and 16x512, whole batch per micro-batch, under the LM head's
#                        default 256 MiB logits budget, 16 MiB (chunks that may stay in L2)
#                        and 4 GiB (those shapes' logits whole), each with attention
#                        probabilities kept and recomputed, and with fused attention; e.g. add
#                        --micro-batch-rows=8). It reports each configuration as one JSON line
#                        (or Google Benchmark JSON) with tokens_per_s and, when it knows them,
#                        mfu, peak_bytes, batch, seq and variant (a table row of its own, set
#                        against PyTorch's row of the same shape).
#   SEQPAR_TORCH_SHAPES  PyTorch batch shapes (default: 8x512,16x512)
#   SEQPAR_NER_BIN       seqgpt_ner built with CUDA (default: $SEQPAR_GPU_BUILD/examples/seqgpt_ner/seqgpt_ner)
#   SEQPAR_NER_STEPS     SeqGPT-560M's training steps in stage 5 (default: 300)
#   SEQPAR_NER_TIMEOUT   seconds each seqgpt_ner run of stage 5 may take (default: 240; at
#                        most what SEQPAR_STEP_TIMEOUT / SEQPAR_TOTAL_TIMEOUT leave)
#   SEQPAR_STEP_TIMEOUT  seconds each step may take (default: 600)
#   SEQPAR_TOTAL_TIMEOUT seconds the whole run may take (default: none): each step gets at
#                        most what is left, less 20 s for the table
#   SEQPAR_REQUIRE_GPU   1 (the default: this script is for a GPU machine): a step that finds no
#                        usable GPU (a broken driver or setup included) fails instead of
#                        skipping; 0 lets such a step be skipped (exit 77)
#   PYTHON               python with torch and transformers (default: python3)
#
# Exit status: 0 when no step failed (skipped steps do not fail), 1 otherwise.
set -uo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: tools/gpu-check.sh OUTDIR" >&2
  exit 2
fi
out=$1
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${SEQPAR_GPU_BUILD:-$root/build-gpu}
test_bin=${SEQPAR_CUDA_TEST:-$build/tests/cuda/test_cuda}
nccl_bin=${SEQPAR_NCCL_TEST:-$build/tests/cuda/test_nccl}
separate_bin=${SEQPAR_SEPARATE_TEST:-$build/tests/cuda/test_cuda_separate}
ops_bin=${SEQPAR_CUDA_OPS:-$build/benchmarks/bench_cuda_ops}
ner_bin=${SEQPAR_NER_BIN:-$build/examples/seqgpt_ner/seqgpt_ner}
ner_steps=${SEQPAR_NER_STEPS:-300}
ner_timeout=${SEQPAR_NER_TIMEOUT:-240}
bench_bin=${SEQPAR_CUDA_BENCH:-$build/benchmarks/bench_cuda_train_step}
torch_shapes=${SEQPAR_TORCH_SHAPES:-8x512,16x512}
limit=${SEQPAR_STEP_TIMEOUT:-600}
total=${SEQPAR_TOTAL_TIMEOUT:-0}
require_gpu=${SEQPAR_REQUIRE_GPU:-1}
export SEQPAR_REQUIRE_GPU=$require_gpu  # the test programs fail, not skip, without a GPU
python=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
summary=$out/summary.txt
: >"$summary"

note() { echo "gpu-check: $*"; }
# record STEP STATUS DETAIL: one line of the final table
record() { printf '%-8s %-5s %s\n' "$1" "$2" "$3" >>"$summary"; }
have_python() { command -v "$python" >/dev/null 2>&1; }
# no_gpu STEP WHY: a step that found no usable GPU fails under SEQPAR_REQUIRE_GPU=1, else skips.
no_gpu() {
  if [[ $require_gpu == 1 ]]; then
    record "$1" FAIL "$2"
    failed=1
  else
    record "$1" SKIP "$2"
  fi
}
# step_limit: the seconds the next step may take (SEQPAR_STEP_TIMEOUT, or what is left of
# SEQPAR_TOTAL_TIMEOUT less 20 s for the table, at least 5).
step_limit() {
  local t=$limit left
  if ((total > 0)); then
    left=$((total - SECONDS - 20))
    ((left < t)) && t=$left
    ((t < 5)) && t=5
  fi
  echo "$t"
}
# run_limited LOG CMD...: CMD with the step's time limit, its output in OUTDIR/LOG; the exit
# status is CMD's, 124 past the limit (then killed 10 s later if it ignored the signal).
run_limited() {
  local log=$1
  shift
  timeout -k 10 "$(step_limit)" "$@" >"$out/$log" 2>&1
}
# skipped RC: whether exit status RC means "no GPU here" and that is allowed.
skipped() { [[ $1 -eq 77 && $require_gpu != 1 ]]; }
# conclude STEP LOG RC DETAIL: the table's line for a step whose program exited with RC.
conclude() {
  local step=$1 log=$2 rc=$3 detail=$4
  if [[ $rc -eq 0 ]]; then
    record "$step" PASS "$detail"
  elif skipped "$rc"; then
    record "$step" SKIP "$(head -1 "$out/$log")"
  else
    local why="exit $rc"
    [[ $rc -eq 124 ]] && why="$why, timed out"
    [[ $rc -gt 128 ]] && why="$why, killed by signal $((rc - 128))"
    record "$step" FAIL "$why; $detail"
    failed=1
  fi
}
# run_step STEP LOG CMD...: CMD under run_limited, then its line of the table.
run_step() {
  local step=$1 log=$2
  shift 2
  run_limited "$log" "$@"
  conclude "$step" "$log" $? "see $log"
}

# Libraries that travelled with the binaries, then cuBLAS, the CUDA runtime and NCCL: the
# toolkit's first, then those of the wheels PyTorch loads.
lib_dirs=()
[[ -d $build/lib ]] && lib_dirs+=("$build/lib")
for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/lib64 /usr/local/cuda/lib; do
  if [[ -e $d/libcublas.so.13 || -e $d/libnccl.so.2 ]]; then
    lib_dirs+=("$d")
  fi
done
if have_python; then
  while IFS= read -r d; do
    [[ -n $d ]] && lib_dirs+=("$d")
  done < <("$python" - <<'PY' 2>/dev/null
import glob, os, site, sysconfig
roots = set(site.getsitepackages() + [sysconfig.get_paths()["purelib"]])
dirs = []
for r in sorted(roots):
    for name in ("libcublas.so.13", "libcudart.so.13", "libnccl.so.2"):
        for f in sorted(glob.glob(os.path.join(r, "nvidia", "**", name), recursive=True)):
            if os.path.dirname(f) not in dirs:
                dirs.append(os.path.dirname(f))
print("\n".join(dirs))
PY
)
fi
if [[ ${#lib_dirs[@]} -gt 0 ]]; then
  joined=$(IFS=:; echo "${lib_dirs[*]}")
  export LD_LIBRARY_PATH=$joined${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "repository: $root"
  echo "LD_LIBRARY_PATH: ${LD_LIBRARY_PATH:-}"
  command -v nvidia-smi >/dev/null && nvidia-smi
  command -v nvcc >/dev/null && nvcc --version
} >"$out/environment.log" 2>&1
note "logs in $out"

failed=0

# --- 1. tests ----------------------------------------------------------------------------
# run_tests STEP LOG BINARY ARGS...: a doctest binary with arguments, one line of the table.
run_tests() {
  local step=$1 log=$2 bin=$3
  shift 3
  note "$step: $bin $*"
  run_limited "$log" "$bin" --duration=true "$@"
  local rc=$?
  local cases asserts
  cases=$(grep -E '^\[doctest\] test cases:' "$out/$log" | tail -1 | sed 's/^\[doctest\] //; s/  */ /g')
  asserts=$(grep -E '^\[doctest\] assertions:' "$out/$log" | tail -1 | sed 's/^\[doctest\] //; s/  */ /g')
  if [[ $rc -eq 0 ]]; then
    conclude "$step" "$log" 0 "$cases; $asserts"
  else
    conclude "$step" "$log" "$rc" "$cases; $asserts (see $log)"
  fi
  tail -3 "$out/$log"
}

if [[ ! -x $test_bin ]]; then
  note "tests: skipped, $test_bin not found (build target test_cuda with SEQPAR_WITH_CUDA=ON)"
  record tests SKIP "no $test_bin"
else
  run_tests tests test_cuda.log "$test_bin" --test-suite-exclude=multi-rank
  run_tests ranks test_cuda_ranks.log "$test_bin" --test-suite=multi-rank
fi
if [[ ! -x $nccl_bin ]]; then
  note "nccl: skipped, $nccl_bin not found (build target test_nccl: SEQPAR_WITH_CUDA=ON and NCCL found)"
  record nccl SKIP "no $nccl_bin"
else
  run_tests nccl test_nccl.log "$nccl_bin"
fi
if [[ ! -x $separate_bin ]]; then
  note "separate: skipped, $separate_bin not found (build target test_cuda_separate with SEQPAR_WITH_CUDA=ON)"
  record separate SKIP "no $separate_bin"
else
  run_tests separate test_cuda_separate.log "$separate_bin"
fi

# --- 2. seqpar throughput ---------------------------------------------------------------
if [[ ! -x $bench_bin ]]; then
  note "seqpar: skipped, $bench_bin not found (build target bench_cuda_train_step with SEQPAR_WITH_CUDA=ON)"
  record seqpar SKIP "no $bench_bin"
else
  bench_args=${SEQPAR_BENCH_ARGS-"--logits-mib=0,16,4096 --recompute-attention=0,1 --fused-attention=0,1"}
  note "seqpar: $bench_bin $bench_args"
  # shellcheck disable=SC2086  # the arguments are meant to split
  run_step seqpar seqpar_bench.log "$bench_bin" $bench_args
  grep -v '^{' "$out/seqpar_bench.log" | tail -n 24
fi

# --- 3. PyTorch throughput ---------------------------------------------------------------
if ! have_python; then
  note "pytorch: skipped, no $python"
  record pytorch SKIP "no $python"
elif ! "$python" -c "import torch, transformers; assert torch.cuda.is_available()" >"$out/torch_bench.log" 2>&1; then
  note "pytorch: $python lacks torch/transformers or sees no GPU (see torch_bench.log)"
  no_gpu pytorch "$python lacks torch/transformers or CUDA (see torch_bench.log)"
else
  note "pytorch: tools/bench_torch_gpu.py --shapes $torch_shapes"
  run_step pytorch torch_bench.log "$python" "$root/tools/bench_torch_gpu.py" --shapes "$torch_shapes"
  tail -4 "$out/torch_bench.log"
fi

# --- 4. per-op timings --------------------------------------------------------------------
if [[ ! -x $ops_bin ]]; then
  note "ops: skipped, $ops_bin not found (build target bench_cuda_ops with SEQPAR_WITH_CUDA=ON)"
  record ops SKIP "no $ops_bin"
else
  note "ops: $ops_bin"
  run_step ops cuda_ops.log "$ops_bin" --benchmark_min_time=0.2
  cat "$out/cuda_ops.log"
fi

# --- 5. seqgpt_ner on the GPU -------------------------------------------------------------
# run_ner STEP LOG ARGS...: seqgpt_ner train ARGS, at most SEQPAR_NER_TIMEOUT seconds, in a
# fresh output folder; the table gets its tokens/s (the last progress line) and peak memory.
run_ner() {
  local step=$1 log=$2
  shift 2
  local dir
  dir=$(mktemp -d "${TMPDIR:-/tmp}/seqpar-gpu-ner.XXXXXX")
  local t
  t=$(step_limit)
  ((ner_timeout < t)) && t=$ner_timeout
  note "$step: $ner_bin train $* --out $dir"
  timeout -k 10 "$t" "$ner_bin" train --out "$dir" "$@" >"$out/$log" 2>&1
  local rc=$?
  rm -rf "$dir"
  # "step 300/300 ... 51234 tok/s ..." and "rank 0  pid N  cuda:0 NVIDIA H200  12345.6: ..."
  local tps mem f1
  tps=$(grep -E '^step [0-9]+/[0-9]+ ' "$out/$log" | tail -1 | grep -oE '[0-9]+ tok/s')
  mem=$(grep -E '^  rank 0  pid ' "$out/$log" | tail -1 | sed -E 's/^  rank 0  pid [0-9]+  //; s/:.*//')
  f1=$(grep -E '^dev F1 ' "$out/$log" | tail -1 | cut -d' ' -f3)
  conclude "$step" "$log" "$rc" "${tps:-no tok/s}${mem:+, rank 0 peak $mem MiB}${f1:+, dev F1 $f1}; see $log"
  grep -E '^(plan |step [0-9]+/|peak memory|  rank |dev F1|seqgpt_ner:)' "$out/$log" | tail -n 12
}

if [[ ! -x $ner_bin ]]; then
  note "ner: skipped, $ner_bin not found (build target seqgpt_ner with SEQPAR_WITH_CUDA=ON)"
  record ner SKIP "no $ner_bin"
elif ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  no_gpu ner "no GPU (nvidia-smi -L)"
else
  # Two ranks sharing the GPU, bf16, evaluation (greedy, on the GPU) at the end.
  run_ner ner-tiny ner_tiny.log --device cuda --precision bf16 --plan dp2 --model tiny \
    --max-steps 60 --batch 16 --log-every 20 --save-steps 1000000 --save-total-limit 1
  # A checkpoint of a CPU run (fp32, dp2 on threads) resumes on the GPU (bf16, one rank):
  # the checkpoint format does not depend on the device, the precision or the plan.
  dir=$(mktemp -d "${TMPDIR:-/tmp}/seqpar-gpu-ner.XXXXXX")
  resume_args=(--model tiny --max-steps 20 --batch 16 --no-eval --log-every 5 --seed 3)
  note "ner-resume: $ner_bin train --device cpu --plan dp2 --stop-after 10, then --device cuda --resume"
  timeout -k 10 "$(step_limit)" "$ner_bin" train --out "$dir" "${resume_args[@]}" --device cpu \
    --plan dp2 --stop-after 10 >"$out/ner_resume.log" 2>&1 &&
    timeout -k 10 "$(step_limit)" "$ner_bin" train --out "$dir" "${resume_args[@]}" --device cuda \
      --precision bf16 --plan single --resume >>"$out/ner_resume.log" 2>&1
  rc=$?
  rm -rf "$dir"
  if [[ $rc -eq 0 ]] && ! grep -q '^resumed from .* at step 10 ' "$out/ner_resume.log"; then
    echo "gpu-check: the CUDA run did not resume at step 10" >>"$out/ner_resume.log"
    rc=1
  fi
  conclude ner-resume ner_resume.log "$rc" "CPU checkpoint at step 10 resumed on the GPU; see ner_resume.log"
  grep -E '^(resumed from|step (10|15|20)/)' "$out/ner_resume.log" | tail -n 4
  # SeqGPT-560M's shape, bf16, one GPU: throughput and memory (no evaluation: beam search
  # over the dev split would take most of the time).
  run_ner ner-560m ner_560m.log --device cuda --precision bf16 --plan single --model seqgpt560m \
    --max-steps "$ner_steps" --batch 16 --lr 2e-5 --no-eval --log-every 50 \
    --save-steps 1000000 --save-total-limit 1
fi

# --- the table --------------------------------------------------------------------------
echo
echo "== gpu-check summary ($(date -u +%H:%M:%SZ)) =="
cat "$summary"
if have_python; then
  "$python" - "$out/seqpar_bench.log" "$out/torch_bench.log" <<'PY' | tee -a "$summary"
import json, sys

def records(path):
    """The JSON lines of a throughput log (or a Google Benchmark JSON report), by shape."""
    try:
        text = open(path).read()
    except OSError:
        return {}
    found = []
    try:  # Google Benchmark's JSON report: user counters sit in each entry
        doc = json.loads(text[text.index("{"):])
        found = [b for b in doc.get("benchmarks", []) if "tokens_per_s" in b]
    except ValueError:
        pass
    if not found:
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    found.append(json.loads(line))
                except ValueError:
                    pass
    return {" ".join(filter(None, [f"{r.get('batch', '?')}x{r.get('seq', '?')}", r.get("variant")])): r
            for r in found}

def cells(r):
    """tokens/s, MFU and peak GiB of one record; a failed one shows its error."""
    if r is None:
        return ["-", "-", "-"]
    if "tokens_per_s" not in r:
        return [str(r.get("error", "failed"))[:12], "-", "-"]
    mfu, peak = r.get("mfu"), r.get("peak_bytes")
    return [f"{r['tokens_per_s']:,.0f}",
            f"{100 * mfu:.1f}%" if isinstance(mfu, (int, float)) else "-",
            f"{peak / 2**30:.2f}" if isinstance(peak, (int, float)) else "-"]

ours, theirs = records(sys.argv[1]), records(sys.argv[2])
def order(key):
    """By batch, then seq; a variant after the plain row of its shape."""
    shape, _, variant = key.partition(" ")
    return [int(x) if x.isdigit() else 0 for x in shape.split("x")] + [variant]

shapes = sorted(set(ours) | set(theirs), key=order)
width = max([11] + [len(s) for s in shapes])
print()
print(f"{'batch x seq':>{width}} | {'seqpar tok/s':>12} {'MFU':>6} {'peak GiB':>8} | "
      f"{'torch tok/s':>12} {'MFU':>6} {'peak GiB':>8} | {'speed':>6} {'memory':>6}")
for shape in shapes:
    a, b = ours.get(shape), theirs.get(shape.partition(" ")[0])
    ratio = memory = "-"
    if a and b and "tokens_per_s" in a and "tokens_per_s" in b:
        ratio = f"{a['tokens_per_s'] / b['tokens_per_s']:.2f}x"
        if a.get("peak_bytes") and b.get("peak_bytes"):
            memory = f"{a['peak_bytes'] / b['peak_bytes']:.0%}"
    print(f"{shape:>{width}} | " + " ".join(f"{c:>{w}}" for c, w in zip(cells(a), (12, 6, 8))) + " | "
          + " ".join(f"{c:>{w}}" for c, w in zip(cells(b), (12, 6, 8))) + f" | {ratio:>6} {memory:>6}")
if not shapes:
    print("(no throughput figures)")
print("speed: seqpar tokens/s over PyTorch's; memory: seqpar's peak over PyTorch's.")
PY
fi
exit "$failed"

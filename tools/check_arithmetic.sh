#!/usr/bin/env bash
# Whether this working tree computes what revision REV computes, bit for bit: builds
# tests/fingerprints' plan_fingerprints at REV (in a temporary copy of it) and here, runs
# both and compares their lines. Each line is one rank of one run: the bits of its losses,
# gradient norms, rates and loss scales, and hashes of its evaluations, logits, weights,
# gradients, memory peaks and checkpoint (tests/fingerprints/plan_fingerprints.cpp).
# A revision's lines are kept in build-fingerprints/<commit>.txt and reused.
#
# Usage: tools/check_arithmetic.sh [REV] [BUILD]   (defaults: HEAD; build-test, preset test)
# Exit status: 0 the same lines, 1 lines differ (printed as a diff), 2 it could not compare.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

rev=${1:-HEAD}
build=${2:-build-test}
commit=$(git rev-parse --verify --quiet "$rev^{commit}") || {
  echo "check_arithmetic: '$rev' is not a revision" >&2
  exit 2
}
cache=build-fingerprints
mkdir -p "$cache"
base=$cache/$commit.txt
if [[ ! -s $base ]]; then
  src=$(mktemp -d)
  trap 'rm -rf "$src"' EXIT
  git archive "$commit" | tar -x -C "$src"
  if [[ ! -f $src/tests/fingerprints/CMakeLists.txt ]]; then
    echo "check_arithmetic: $rev has no tests/fingerprints to build" >&2
    exit 2
  fi
  echo "check_arithmetic: building plan_fingerprints at $rev (${commit:0:7})"
  cmake -S "$src" -B "$src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSEQPAR_WITH_CUDA=OFF \
    -DSEQPAR_BUILD_BENCHMARKS=OFF -DSEQPAR_BUILD_EXAMPLES=OFF -DSEQPAR_BUILD_APPS=OFF \
    -DSEQPAR_INSTALL=OFF >"$src/configure.log" || {
    cat "$src/configure.log" >&2
    exit 2
  }
  cmake --build "$src/build" --target plan_fingerprints -j2 || exit 2
  OMP_NUM_THREADS=1 "$src/build/tests/fingerprints/plan_fingerprints" >"$base.part" || exit 2
  mv "$base.part" "$base"
fi

[[ -f $build/CMakeCache.txt ]] || cmake --preset test >/dev/null
echo "check_arithmetic: building plan_fingerprints in $build"
cmake --build "$build" --target plan_fingerprints -j2 || exit 2
here=$cache/working-tree.txt
OMP_NUM_THREADS=1 "$build/tests/fingerprints/plan_fingerprints" >"$here" || exit 2
if diff -u "$base" "$here"; then
  echo "check_arithmetic: the same bits as $rev ($(wc -l <"$here") rank runs)"
else
  echo "check_arithmetic: the lines above differ from $rev" >&2
  exit 1
fi

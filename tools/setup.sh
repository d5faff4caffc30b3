#!/usr/bin/env bash
# Installs the Debian 12 packages that seqpar's build, tests, benchmarks and examples
# need. Quick and silent when they are all present already; otherwise runs
# `apt-get update` and installs only the missing ones (through sudo unless root).
set -euo pipefail

packages=(
  build-essential     # g++ 12 (C++20), make
  cmake               # >= 3.25: workflow presets
  ninja-build         # the presets' generator
  pkg-config          # finds Oniguruma
  git
  ca-certificates
  libeigen3-dev       # seqpar::cpu
  nlohmann-json3-dev  # checkpoint headers (safetensors)
  doctest-dev         # tests
  libbenchmark-dev    # benchmarks
  libopenmpi-dev      # seqpar::mpi
  openmpi-bin         # mpirun, for the multi-process tests
  slurmctld           # srun, for the multi-process tests (a one-node cluster:
  slurmd              #   tools/start_slurm.sh)
  slurm-client
  munge
  libonig-dev         # seqpar::tokenizer
  libboost-context-dev  # the emulated CUDA device's kernel threads (tests/emulation)
  zlib1g-dev
  clang-format        # 14: tools/check_format.sh holds C++ files to .clang-format
  clang               # the fuzzers (libFuzzer), .ci/run's fuzz stage
  libclang-rt-14-dev  # libFuzzer and the sanitizer runtimes for clang
  python3-dev         # the Python package (python/): headers for its module
  python3-pip
)
# One dpkg-query for all of them; a package it does not know counts as missing.
installed=$(dpkg-query -W -f='${Package} ${Status}\n' "${packages[@]}" 2>/dev/null |
  awk '/ install ok installed$/ { sub(/:.*/, "", $1); print $1 }' || true)
missing=()
for name in "${packages[@]}"; do
  if ! grep -qxF "$name" <<<"$installed"; then
    missing+=("$name")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages are installed"
else
  echo "setup: installing ${missing[*]}"
  as_root=()
  if [[ $(id -u) -ne 0 ]]; then
    if ! command -v sudo >/dev/null; then
      echo "setup: not root and no sudo; install as root: apt-get install ${missing[*]}" >&2
      exit 1
    fi
    as_root=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Workflow presets (cmake --workflow) need CMake 3.25, which Debian 12 ships.
version=$(cmake --version | head -n1 | sed -E 's/[^0-9]*([0-9]+)\.([0-9]+).*/\1 \2/')
read -r major minor <<<"$version"
if ((major < 3 || (major == 3 && minor < 25))); then
  echo "setup: CMake $major.$minor is too old; seqpar's presets need 3.25 or newer" >&2
  exit 1
fi

# The Python package's own build and test tools (docs/python.md), for the python3 on PATH (the
# one CMake finds): nanobind and scikit-build-core build it, pytest and NumPy test it. Without
# them its tests say they are skipped. A python3 whose pip refuses (Debian's system one is
# "externally managed") is told why; a virtual environment's or pyenv's takes them.
python=${SEQPAR_PYTHON_EXECUTABLE:-python3}
if command -v "$python" >/dev/null; then
  wanted=()
  for pair in nanobind:nanobind scikit_build_core:scikit-build-core pytest:pytest numpy:numpy; do
    "$python" -c "import ${pair%%:*}" 2>/dev/null || wanted+=("${pair#*:}")
  done
  if ((${#wanted[@]} == 0)); then
    echo "setup: $python has nanobind, scikit-build-core, pytest and numpy"
  else
    echo "setup: $python -m pip install ${wanted[*]}"
    "$python" -m pip install --quiet --disable-pip-version-check "${wanted[@]}" ||
      echo "setup: pip could not install ${wanted[*]} for $python: the Python package is" \
        "not built or tested (use a virtual environment: docs/python.md)" >&2
  fi
fi

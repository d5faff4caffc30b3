#!/usr/bin/env bash
# Checks that every tracked C++ file (*.hpp, *.cpp, *.cu, *.cuh) is formatted as
# .clang-format says: runs `clang-format --dry-run -Werror` on each and fails, naming
# every file that differs. clang-format 14 (Debian 12's `clang-format`, from
# tools/setup.sh); another version may format differently, so a different one is refused
# unless CLANG_FORMAT names it explicitly.
#
# Usage: tools/check_format.sh [ROOT]   (ROOT: a git checkout; default: this repository)
set -euo pipefail

root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
tool=${CLANG_FORMAT:-clang-format}
if ! command -v "$tool" >/dev/null; then
  echo "check_format: $tool not found (Debian: apt-get install clang-format, or tools/setup.sh)" >&2
  exit 2
fi
version=$("$tool" --version | sed -nE 's/.*version ([0-9]+)\..*/\1/p')
if [[ -z ${CLANG_FORMAT:-} && $version != 14 ]]; then
  echo "check_format: $tool is version ${version:-unknown}, the tree is formatted by 14" \
    "(set CLANG_FORMAT to use it anyway)" >&2
  exit 2
fi

mapfile -d '' files < <(git ls-files -z -- '*.hpp' '*.cpp' '*.cu' '*.cuh')
bad=()
for f in "${files[@]}"; do
  if ! "$tool" --dry-run -Werror --style=file "$f" >/dev/null 2>&1; then
    bad+=("$f")
  fi
done

if ((${#bad[@]} > 0)); then
  echo "check_format: ${#bad[@]} of ${#files[@]} files differ from .clang-format" \
    "(fix: $tool -i --style=file FILE):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check_format: all ${#files[@]} C++ files match .clang-format"

#!/usr/bin/env bash
# Checks that every C++ and CUDA file tracked by git is in the house style
# (.clang-format); with --fix, formats them in place. Needs clang-format 14
# (Debian bookworm's `clang-format`, installed by scripts/install-deps.sh):
# another major version formats some constructs differently.
set -euo pipefail
cd "$(dirname "$0")/.."
fix=0
[[ "${1:-}" == "--fix" ]] && fix=1
version=$(clang-format --version | grep -oE '[0-9]+\.[0-9]+' | head -1)
if [[ "${version%%.*}" != "14" ]]; then
  echo "check-format: clang-format 14 is required, found $version" >&2
  exit 2
fi
# Tracked files and new ones git does not ignore: a file is checked before its first commit.
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.cpp' '*.hpp' '*.cu' '*.cuh' '*.h')
if (( fix )); then
  clang-format -i --style=file "${files[@]}"
  exit 0
fi
if ! clang-format --dry-run --Werror --style=file "${files[@]}" 2>/tmp/kvtier-format.$$; then
  grep -E "^[^ ].*: (warning|error):" /tmp/kvtier-format.$$ | cut -d: -f1 | sort -u | sed 's/^/check-format: not formatted: /' >&2
  rm -f /tmp/kvtier-format.$$
  echo "check-format: run scripts/check-format.sh --fix" >&2
  exit 1
fi
rm -f /tmp/kvtier-format.$$
echo "check-format: ${#files[@]} files in the house style"

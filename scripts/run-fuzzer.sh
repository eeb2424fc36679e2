#!/usr/bin/env bash
# Runs the script-line fuzzer (libFuzzer + ASan + UBSan) for SECONDS, seeded
# with the test scripts. Build it first: cmake --preset fuzz && cmake --build --preset fuzz
# Usage: scripts/run-fuzzer.sh [SECONDS] [CORPUS_DIR]
# A finding leaves crash-* / leak-* / timeout-* files in the current folder and exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
corpus=${2:-build/fuzz/corpus}
fuzzer=build/fuzz/tests/kvtier_script_fuzzer
[[ -x $fuzzer ]] || { echo "run-fuzzer: $fuzzer is not built (cmake --preset fuzz && cmake --build --preset fuzz)" >&2; exit 2; }
mkdir -p "$corpus"
# Each input builds a small pool; 1 s per input and 1 GiB are generous bounds.
exec "$fuzzer" "$corpus" tests/scripts examples -dict=tests/fuzz/script.dict -max_total_time="$seconds" \
  -timeout=1 -rss_limit_mb=1024 -max_len=4096 -print_final_stats=1

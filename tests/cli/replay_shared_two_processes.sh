#!/usr/bin/env bash
# Two `kvtier replay` processes on one Redis store (G4): the second, with a
# cold G1 and G2, hits what the first published, with zero mismatches.
# Usage: replay_shared_two_processes.sh KVTIER REDIS_CLUSTER_SH WORKDIR
set -euo pipefail
kvtier=$1 redis=$2 work=$3
command -v redis-server >/dev/null || { echo "no redis-server: skipped"; exit 0; }
port=$((30000 + $$ % 500 * 4))
export KVTIER_REDIS_DIR="$work/redis-$port"
trap 'bash "$redis" stop 1 "$port"' EXIT
url=$(bash "$redis" start 1 "$port")
args=(replay --device host --backend kvbm --capacity 256 --host-blocks 256 --verify full --shared-tier "$url"
      --shared-namespace "two-processes-$$")
"$kvtier" "${args[@]}" --json "$work/first.json" >/dev/null
"$kvtier" "${args[@]}" --json "$work/second.json" >/dev/null
grep -q '"g4_blocks_published": [1-9]' "$work/first.json"
grep -q '"g4_hit_blocks": [1-9]' "$work/second.json"
grep -q '"g4_blocks_fetched": [1-9]' "$work/second.json"
grep -q '"mismatches": 0' "$work/first.json"
grep -q '"mismatches": 0' "$work/second.json"
grep -q '"g4_checksum_failures": 0' "$work/second.json"
# kvtier bench shared on the same store: every block verified, each row next to its ceiling
# and to what verifying and copying cost on the ceiling's own replies (a fraction below 1).
# Two iterations: one store publishes blocks of its own in each (a block published twice is refused).
"$kvtier" bench shared --shared-tier "$url" --page-bytes 16384,65536 --batches 1,8 --megabytes 1 --iterations 2 \
  --json "$work/bench.json" >/dev/null
[[ $(grep -c '"get_of_ceiling"' "$work/bench.json") -eq 4 ]]
! grep -q '"verified_reads": 0' "$work/bench.json"
[[ $(grep -cE '"verified_ceiling_of_ceiling": 0\.[0-9]*[1-9]' "$work/bench.json") -eq 4 ]]
! grep -qE '"verify_copy_batch_ms": 0(\.0*)?,' "$work/bench.json"
# Bad input: a malformed URL and a G4 without G2 are refused (exit 2), and a
# store that is down is a miss, not a wrong byte: the run ends, says so, and
# exits 3 (0 when told to tolerate it).
set +e
"$kvtier" replay --shared-tier http://127.0.0.1:1 --host-blocks 64 >/dev/null 2>&1; [[ $? -eq 2 ]] || exit 1
"$kvtier" replay --shared-tier "$url" >/dev/null 2>&1; [[ $? -eq 2 ]] || exit 1
"$kvtier" bench shared --shared-tier redis://127.0.0.1:1 --megabytes 1 >/dev/null 2>&1; [[ $? -eq 2 ]] || exit 1
"$kvtier" bench shared --shared-tier "$url" --page-bytes 100 >/dev/null 2>&1; [[ $? -eq 2 ]] || exit 1
"$kvtier" replay --device host --capacity 256 --host-blocks 64 --max-requests 48 --shared-tier redis://127.0.0.1:1 \
  --json "$work/down.json" >/dev/null 2>"$work/down.err"; [[ $? -eq 3 ]] || exit 1
"$kvtier" replay --device host --capacity 256 --host-blocks 64 --max-requests 48 --shared-tier redis://127.0.0.1:1 \
  --shared-tolerate-down >/dev/null 2>&1 || exit 1
set -e
grep -q '"g4_errors": [1-9]' "$work/down.json"
grep -q '"mismatches": 0' "$work/down.json"
[[ $(grep -c "the shared tier failed" "$work/down.err") -eq 1 ]]  # said once
grep -q "never answered" "$work/down.err"
echo "two processes shared G4"

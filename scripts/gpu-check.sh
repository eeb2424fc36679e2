#!/usr/bin/env bash
# The device check for a machine with an NVIDIA GPU: build the release preset
# there, run the `gpu` ctest label (then the cpu label, for completeness) and the
# copy_pages bandwidth bench.
# Logs go to $OUT when set (the device tool), else to build/gpu-check/.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-build/gpu-check}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/nvidia-smi.csv" 2>&1
cmake --preset release -DKVTIER_BUILD_BENCH=ON > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build --preset release -j "$(nproc)" > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
./build/release/kvtier info | tee "$out/info.txt"
ctest --preset release -L gpu --output-on-failure 2>&1 | tee "$out/ctest-gpu.log" | tail -15
gpu_rc=${PIPESTATUS[0]}
ctest --preset release -L cpu 2>&1 | tee "$out/ctest-cpu.log" | tail -3
./build/release/kvtier_copy_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true 2>&1 | tee "$out/copy-bench.txt" | tail -8
exit "$gpu_rc"

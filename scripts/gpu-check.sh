#!/usr/bin/env bash
# The device check: one command for a machine with an NVIDIA GPU and no
# package registry. It unpacks the Debian packages carried in .deps/debs
# (scripts/fetch-device-deps.sh, run beforehand where a registry is reachable)
# into a prefix, configures with CUDA forced on for sm_90, builds, runs the
# `gpu` label (failing if any gpu test skipped) beside the `cpu` label,
# compute-sanitizer memcheck and racecheck over the GPU tests, the copy bench,
# `kvtier bench swap` and `kvtier replay` on device memory. It prints a short
# summary; logs and the swap CSV go to $OUT when set (the device tool), else
# build/gpu-check/results — 9 files: summary.txt (device facts included),
# build.log, ctest-cpu.log, ctest-gpu.log, sanitizer.log, bench.log,
# swap-bench.csv, replay.log, python-gpu.log (the Python module built in the
# tree, its gpu-marked PyTorch comparison and the DLPack tests, on the
# image's PyTorch; nanobind from .deps/wheels when carried), python-models.log
# (the real transformers models through kvtier's CUDA kernels, transformers
# from .deps/wheels).
#
# Usage: scripts/gpu-check.sh            the whole check; fails without a GPU
#        scripts/gpu-check.sh --no-gpu   only the steps a CPU machine can run
#                                        (deps, configure, build, cpu label)
#        scripts/gpu-check.sh --prebuilt DIR
#                                        the GPU steps on the programs
#                                        scripts/pack-gpu-prebuilt.sh packed
#                                        into DIR (no build but the Python
#                                        module's, in the background; no cpu
#                                        label: CI runs it)
# Device carry list: .deps (the packages), and DIR with --prebuilt. Budget:
# under 8 minutes on 16 cores.
set -uo pipefail
cd "$(dirname "$0")/.."
no_gpu=false
prebuilt=""
[[ ${1:-} == --no-gpu ]] && no_gpu=true
cpu_label=true  # --prebuilt leaves the cpu label to CI, even when it falls back to building
if [[ ${1:-} == --prebuilt ]]; then
  prebuilt=$(cd "${2:?--prebuilt DIR}" && pwd) || exit 1
  cpu_label=false
fi
out=${OUT:-build/gpu-check/results}
build=build/gpu-check
mkdir -p "$out" "$build"
summary="$out/summary.txt"
: > "$summary"
failed=0
began=$(date +%s)

# step NAME SECONDS LOG COMMAND...: runs with a time limit, records the outcome.
step() {
  local name=$1 limit=$2 log=$3
  shift 3
  local t0=$(date +%s)
  timeout "$limit" "$@" >> "$log" 2>&1
  local rc=$?
  local verdict=ok
  ((rc == 0)) || { verdict="FAILED (status $rc; $log)"; failed=1; }
  printf '%-28s %4ss  %s\n' "$name" "$(($(date +%s) - t0))" "$verdict" | tee -a "$summary"
  return $rc
}

echo "kvtier gpu-check $(date -u +%FT%TZ) on $(hostname), $(nproc) cores" | tee -a "$summary"
if $no_gpu; then
  echo "--no-gpu: the GPU steps are NOT run; nothing here says anything about a GPU" | tee -a "$summary"
else
  device=$(nvidia-smi -L 2>&1)
  echo "$device" >> "$summary"
  if ! grep -q '^GPU ' <<< "$device"; then
    echo "gpu-check: nvidia-smi lists no GPU; refusing to report a GPU check without one" | tee -a "$summary"
    exit 1
  fi
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> "$summary" 2>&1
fi

# Dependencies: the carried packages when present, else whatever the machine has.
if compgen -G ".deps/debs/*.deb" > /dev/null; then
  deps_env=$(bash scripts/unpack-device-deps.sh "$build/deps") || { echo "gpu-check: unpacking .deps failed" | tee -a "$summary"; exit 1; }
  eval "$deps_env"
fi

# nanobind for the Python module: the carried wheel, else the image's.
python_flags=()
if compgen -G ".deps/wheels/nanobind-*.whl" > /dev/null; then
  python3 -m pip install --quiet --no-index --no-deps --target "$build/pydeps" .deps/wheels/nanobind-*.whl
  export PYTHONPATH="$PWD/$build/pydeps${PYTHONPATH:+:$PYTHONPATH}"
fi
if python3 -m nanobind --cmake_dir > /dev/null 2>&1; then
  python_flags=(-DKVTIER_BUILD_PYTHON=ON "-DPython_EXECUTABLE=$(command -v python3)")
fi

log="$out/build.log"
if [[ -n $prebuilt ]]; then
  echo "prebuilt: $(head -1 "$prebuilt/commit") $(grep -c '^changed:' "$prebuilt/commit") files changed" | tee -a "$summary"
  if ! LD_LIBRARY_PATH="$prebuilt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$prebuilt/kvtier" --version >> "$summary" 2>&1; then
    echo "prebuilt: does not run here ($(LD_LIBRARY_PATH="$prebuilt/lib" ldd "$prebuilt/kvtier" | grep 'not found' |
      tr -s ' \n' ' ')); building instead" | tee -a "$summary"
    prebuilt=""
  fi
fi
if [[ -n $prebuilt ]]; then
  # The carried programs; only the Python module is built here, beside the GPU steps.
  bin=$prebuilt
  export LD_LIBRARY_PATH="$prebuilt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  python_build_pid=""
  if ((${#python_flags[@]} > 0)); then
    (cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVTIER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DKVTIER_BUILD_TESTS=OFF -DKVTIER_BUILD_BENCH=OFF -DKVTIER_BUILD_APPS=OFF -DKVTIER_UNITY_BUILD=ON \
      "${python_flags[@]}" && cmake --build "$build" -j "$(nproc)") > "$out/python-build.log" 2>&1 &
    python_build_pid=$!
  fi
  (exit 0) &
  cpu_pid=$!
else
  bin=$build
  step configure 120 "$log" cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVTIER_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DKVTIER_BUILD_BENCH=ON "${python_flags[@]}" || { tail -20 "$log"; exit 1; }
  step build 360 "$log" cmake --build "$build" -j "$(nproc)" || { tail -30 "$log"; exit 1; }
  python_build_pid=""
  # The cpu label in the background while the GPU is busy.
  if $cpu_label; then
    ctest --test-dir "$build" -L cpu -j "$(($(nproc) / 2))" --timeout 600 > "$out/ctest-cpu.log" 2>&1 &
  else
    (exit 0) &
  fi
  cpu_pid=$!
fi
gpu_tests="$bin/kvtier_gpu_tests"
[[ -x $gpu_tests ]] || gpu_tests="$bin/tests/kvtier_gpu_tests"

if ! $no_gpu; then
  "$bin/kvtier" info >> "$summary" 2>&1
  gpu_log="$out/ctest-gpu.log"
  if [[ -n $prebuilt ]]; then  # no ctest files travel: the gpu label is this one program
    step "gpu tests" 120 "$gpu_log" "$gpu_tests"
    skipped=$(grep -c '^\[  SKIPPED \]' "$gpu_log")
  else
    step "ctest -L gpu" 240 "$gpu_log" ctest --test-dir "$build" -L gpu --output-on-failure --timeout 120
    skipped=$(grep -c 'Skipped' "$gpu_log")
  fi
  if ((skipped > 0)); then
    echo "gpu tests skipped: $skipped (a GPU check with skipped tests is a failed check)" | tee -a "$summary"
    failed=1
  fi
  # The main job on device memory: K/V through the write_kv kernel, every reused page checked.
  step "replay (cuda)" 90 "$out/replay.log" "$bin/kvtier" replay --device cuda --verify full
  step "replay (cuda, G2 tier)" 90 "$out/replay.log" "$bin/kvtier" replay --device cuda --capacity 1024 \
    --host-blocks 4096 --verify full
  # A real model's KV cache groups on device memory, its real 576 KiB pages, beside --no-hybrid (issue 32).
  trace=data/traces/mooncake_synthetic_trace.jsonl
  # The model's real pages: every K/V byte is synthesized on the host, so few requests.
  step "replay --model (cuda)" 150 "$out/replay.log" "$bin/kvtier" replay --device cuda --model gpt-oss-120b \
    --gpu-memory-gb 8 --check-page-bytes 0 --trace "$trace" --max-requests 20 --time-scale 0 --no-compare
  # Quantized and MLA page formats through the CUDA group kernels (one small head a page).
  # With G2 under the groups: every group's blocks swapped out and back through the device's copies (issue 33).
  step "replay --model nvfp4 + G2 (cuda)" 90 "$out/replay.log" "$bin/kvtier" replay --device cuda \
    --model gpt-oss-120b --kv-cache-dtype nvfp4 --gpu-memory-gb 1 --host-blocks 8192 --trace "$trace" \
    --max-requests 200 --time-scale 0 --no-compare --attention-every 4 --verify full
  step "replay --model fp8_ds_mla (cuda)" 90 "$out/replay.log" "$bin/kvtier" replay --device cuda \
    --model deepseek-v3 --kv-cache-dtype fp8_ds_mla --trace "$trace" --max-requests 200 --time-scale 0 \
    --attention-every 4
  # Swap bandwidth of the offload tier per copy path, each next to the link's ceiling (issues #8, #9).
  step "kvtier bench swap" 120 "$out/bench.log" "$bin/kvtier" bench swap --device cuda \
    --paths batched,staged,per_page,engine --iterations 5 --csv "$out/swap-bench.csv"
  # Python: torch.from_dlpack of the pages and tables, SDPA against kvtier's kernel (issue #11).
  py_log="$out/python-gpu.log"
  if [[ -n $python_build_pid ]] && ! wait "$python_build_pid"; then
    echo "python: the module did not build ($out/python-build.log)" | tee -a "$summary"
    tail -20 "$out/python-build.log"
    failed=1
  elif ((${#python_flags[@]} == 0)); then
    echo "python: no nanobind on this machine (scripts/fetch-device-deps.sh carries it)" | tee -a "$summary"
    failed=1
  else
    step "pytest (gpu, dlpack)" 120 "$py_log" env PYTHONPATH="$PWD/$build/python:${PYTHONPATH:-}" python3 -m pytest -q \
      -p no:cacheprovider -rs tests/python/test_gpu_attention.py tests/python/test_dlpack_views.py
    if grep -q 'SKIPPED.*test_gpu_attention' "$py_log"; then
      echo "python gpu tests skipped (a GPU check with skipped tests is a failed check)" | tee -a "$summary"
      failed=1
    fi
    # Real transformers models through kvtier's CUDA kernels (issue 34): transformers from the carried wheels.
    if compgen -G ".deps/wheels/transformers-*.whl" > /dev/null; then
      python3 -m pip install --quiet --no-index --no-deps --target "$build/pydeps" .deps/wheels/*.whl
      step "pytest (real models)" 240 "$out/python-models.log" env KVTIER_REQUIRE_MODEL_TESTS=1 \
        PYTHONPATH="$PWD/$build/python:$PWD/$build/pydeps:${PYTHONPATH:-}" python3 -m pytest -q -p no:cacheprovider \
        -rs tests/python/test_real_models.py
      cuda_cases=$(PYTHONPATH="$PWD/$build/python:$PWD/$build/pydeps:${PYTHONPATH:-}" python3 -m pytest -q \
        -p no:cacheprovider --collect-only tests/python/test_real_models.py 2>/dev/null | grep -c -- '-cuda\]')
      echo "real models: $cuda_cases cases on the GPU" | tee -a "$summary"
      ((cuda_cases > 0)) || { echo "real models: no case ran on the GPU" | tee -a "$summary"; failed=1; }
    else
      echo "real models: no transformers wheel in .deps/wheels (scripts/fetch-device-deps.sh)" | tee -a "$summary"
      failed=1
    fi
  fi
  step "copy bench" 120 "$out/bench.log" "$bin/kvtier_copy_bench" --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true
  san_log="$out/sanitizer.log"
  # The 2 and 4 GiB tests are left out: memcheck makes them minutes long.
  step "memcheck (gpu tests)" 150 "$san_log" compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$gpu_tests" --gtest_filter='-*SlabOverFourGiB*:*PendingEvent*'
  step "racecheck (kernels)" 90 "$san_log" compute-sanitizer --tool racecheck --error-exitcode 9 \
    "$gpu_tests" --gtest_filter='Layouts/KvKernels.*:CudaPath.Attention*:CudaPath.CopyPages*'
fi

wait "$cpu_pid"
cpu_rc=$?
if ! $cpu_label; then
  printf '%-28s %4s   %s\n' "ctest -L cpu" "" "not run (--prebuilt: CI runs the cpu label)" | tee -a "$summary"
else
  printf '%-28s %4s   %s\n' "ctest -L cpu" "" "$( ((cpu_rc == 0)) && echo ok || echo "FAILED ($out/ctest-cpu.log)")" | tee -a "$summary"
fi
((cpu_rc == 0)) || failed=1
! $cpu_label || grep -E 'tests passed|tests failed' "$out/ctest-cpu.log" | tail -1 | tee -a "$summary"
$no_gpu || grep -E 'tests passed|tests failed|^\[  (PASSED|FAILED) \]' "$out/ctest-gpu.log" | tail -3 | tee -a "$summary"
$no_gpu || grep -E '^BM_.*_(median)' "$out/bench.log" | tee -a "$summary"
$no_gpu || grep -E ' (out|in) +(batched|staged) ' "$out/bench.log" | tee -a "$summary"
$no_gpu || grep -E '^(prefix hits|offload|integrity|attention|concurrency|group [0-9]):|^hybrid /' "$out/replay.log" | tee -a "$summary"
$no_gpu || grep -E '(passed|failed)' "$out/python-gpu.log" | tail -1 | tee -a "$summary"
echo "gpu-check: $( ((failed == 0)) && echo PASSED || echo FAILED) in $(($(date +%s) - began)) s" | tee -a "$summary"
exit "$failed"

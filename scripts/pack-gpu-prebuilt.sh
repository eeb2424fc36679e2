#!/usr/bin/env bash
# Builds the device check's programs here (CUDA forced on, sm_90, release)
# and packs them with the shared libraries they load beyond glibc and
# libstdc++ into .gpu-prebuilt/ (ignored by git): the device tool carries
# that folder, and `scripts/gpu-check.sh --prebuilt .gpu-prebuilt` runs them
# there without spending the lease's minutes on compiling. The Python module
# is still built on the device (its Python is not this machine's).
# Usage: scripts/pack-gpu-prebuilt.sh [BUILD_DIR]   (default build/cuda)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/cuda}
KVTIER_UNITY_BUILD=ON cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVTIER_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DKVTIER_BUILD_BENCH=ON > /dev/null
cmake --build "$build" -j "$(nproc)" --target kvtier kvtier_gpu_tests kvtier_copy_bench
out=.gpu-prebuilt
rm -rf "$out" && mkdir -p "$out/lib"
cp "$build/kvtier" "$build/tests/kvtier_gpu_tests" "$build/kvtier_copy_bench" "$out/"
# Every library the programs load, but the C and C++ runtimes and the zlib and
# OpenSSL every Python image has: the folder goes first on the device's
# LD_LIBRARY_PATH, where its Python and PyTorch must keep their own.
for program in "$out"/kvtier "$out"/kvtier_gpu_tests "$out"/kvtier_copy_bench; do
  ldd "$program" | awk '/=> \// {print $3}'
done | sort -u | grep -Ev '/(libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s|libz|libcrypto|libssl|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$out/lib/"; done
git rev-parse HEAD > "$out/commit"
git status --short --untracked-files=no | sed 's/^/changed: /' >> "$out/commit"
du -sh "$out"

#!/usr/bin/env bash
# Unpacks .deps/debs/*.deb (scripts/fetch-device-deps.sh) into PREFIX with
# dpkg -x — nothing goes into / — and prints the environment that points
# CMake and the loader at it: eval "$(scripts/unpack-device-deps.sh PREFIX)".
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:?usage: unpack-device-deps.sh PREFIX}
shopt -s nullglob
debs=(.deps/debs/*.deb)
if ((${#debs[@]} == 0)); then
  echo "unpack-device-deps: no packages in .deps/debs (run scripts/fetch-device-deps.sh first)" >&2
  exit 1
fi
mkdir -p "$prefix"
for deb in "${debs[@]}"; do dpkg -x "$deb" "$prefix"; done
prefix=$(cd "$prefix" && pwd)
echo "export CMAKE_PREFIX_PATH=$prefix/usr\${CMAKE_PREFIX_PATH:+:\$CMAKE_PREFIX_PATH}"
echo "export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"

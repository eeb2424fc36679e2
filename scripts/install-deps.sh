#!/usr/bin/env bash
# Installs the Debian packages kvtier builds with, when any is missing.
# Usage: install-deps.sh [--fuzz]. Run as root (or with sudo available).
# The CUDA toolkit is optional and is not installed here: without it the CUDA
# targets are simply off.
set -euo pipefail

packages=(cmake ninja-build g++ libxxhash-dev nlohmann-json3-dev libcli11-dev
          libgtest-dev libbenchmark-dev gnuplot-nox libzmq3-dev libmsgpack-cxx-dev prometheus-cpp-dev python3-venv python3-dev
          iproute2 clang-format liburing-dev redis-server redis-tools libhiredis-dev libsodium-dev libssl-dev)
# --fuzz: also clang and its runtime (libFuzzer, ASan, UBSan) for the fuzz preset.
if [[ ${1:-} == --fuzz ]]; then
  packages+=(clang libclang-rt-dev)
fi
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]} > 0)); then
  echo "kvtier: installing ${missing[*]}" >&2
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The Python test dependencies (pytest, pyzmq, msgpack; pinned) in .venv.
bash "$(dirname "$0")/install-python-deps.sh"

#!/usr/bin/env bash
# Downloads (never installs) the Debian packages a build needs beyond what a
# GPU machine's image has, into .deps/debs (ignored by git), so they travel
# with the work tree to a machine that reaches no registry. There,
# scripts/unpack-device-deps.sh unpacks them into a prefix. Run here, as root.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
packages=(libgtest-dev libgmock-dev googletest libbenchmark-dev libbenchmark1debian libxxhash-dev libxxhash0
          nlohmann-json3-dev libcli11-dev)
mkdir -p .deps/debs
cd .deps/debs
rm -f ./*.deb
apt-get update -qq
apt-get download "${packages[@]}"
ls -l --block-size=K ./*.deb
# nanobind for the Python module (the image's may be older than the pin): a
# pure-Python wheel, installed there with --no-index into the build folder.
cd .. && rm -rf wheels && mkdir wheels
python3 -m pip download --quiet --no-deps --only-binary=:all: -d wheels "$(grep -o 'nanobind==[0-9.]*' "$root/pyproject.toml")"
# transformers (pinned in tests/python/model-requirements.txt) and what it needs beyond the image's
# PyTorch and numpy, for the real-model tests on the GPU: installed there with --no-index --no-deps.
python3 -m pip download --quiet --only-binary=:all: -d wheels \
  "$(grep -o '^transformers==[0-9.]*' "$root/tests/python/model-requirements.txt")"
rm -f wheels/numpy-*.whl
ls -l --block-size=K wheels

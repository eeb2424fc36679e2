#!/usr/bin/env bash
# The pinned real-model and engine test dependencies (tests/python/model-requirements.txt:
# vLLM, torch and transformers) in a virtual environment of their own, installed once
# per machine (torch from PyPI brings several GB of CUDA libraries) and kept
# between runs: $KVTIER_MODEL_VENV, default ~/.cache/kvtier/model-venv,
# reinstalled when the pins change. With a virtual environment as argument, its
# Python sees them through a .pth file (after its own packages, so its pinned
# numpy stays first). Usage: install-model-deps.sh [VENV]
set -euo pipefail
cd "$(dirname "$0")/.."
requirements=tests/python/model-requirements.txt
venv="${KVTIER_MODEL_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/kvtier/model-venv}"
stamp="$venv/.kvtier-requirements"
if ! { [[ -x $venv/bin/python ]] && cmp -s "$requirements" "$stamp"; }; then
  echo "kvtier: installing $(grep -v '^#' "$requirements" | tr '\n' ' ')into $venv (once per machine)" >&2
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
  cp "$requirements" "$stamp"
fi
if [[ $# -ge 1 ]]; then
  site() { "$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
  site "$venv" >"$(site "$1")/kvtier-model-deps.pth"
fi

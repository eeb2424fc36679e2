#!/usr/bin/env bash
# The pinned engine test dependencies, each engine in a virtual environment of its
# own (each pins its own torch), installed once per machine (torch from PyPI brings
# several GB of CUDA libraries) and kept between runs, reinstalled when the pins change:
#   --engine vllm (default): tests/python/model-requirements.txt (vLLM, torch,
#     transformers; the real-model and vLLM tests), in $KVTIER_MODEL_VENV, default
#     ~/.cache/kvtier/model-venv;
#   --engine sglang: tests/python/sglang-requirements.txt (SGLang; the SGLang tests),
#     in $KVTIER_SGLANG_VENV, default ~/.cache/kvtier/sglang-venv.
# With a virtual environment as argument, its Python sees them through a .pth file
# (after its own packages, so its pinned packages stay first). Two runs at once
# (CI starts the installs early, in the background) take turns on a lock: the
# second finds the environment installed.
# Usage: install-model-deps.sh [--engine vllm|sglang] [VENV]
set -euo pipefail
cd "$(dirname "$0")/.."
engine=vllm
if [[ ${1:-} == --engine ]]; then
  engine=${2:?--engine needs vllm or sglang}
  shift 2
fi
cache="${XDG_CACHE_HOME:-$HOME/.cache}/kvtier"
case $engine in
  vllm) requirements=tests/python/model-requirements.txt venv="${KVTIER_MODEL_VENV:-$cache/model-venv}" ;;
  sglang) requirements=tests/python/sglang-requirements.txt venv="${KVTIER_SGLANG_VENV:-$cache/sglang-venv}" ;;
  *) echo "install-model-deps.sh: --engine vllm or sglang, not $engine" >&2; exit 2 ;;
esac
stamp="$venv/.kvtier-requirements"
mkdir -p "$(dirname "$venv")"
exec {lock}>"$venv.lock"
flock "$lock"
if ! { [[ -x $venv/bin/python ]] && cmp -s "$requirements" "$stamp"; }; then
  echo "kvtier: installing $(grep -v '^#' "$requirements" | tr '\n' ' ')into $venv (once per machine)" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir -r "$requirements"
  cp "$requirements" "$stamp"
fi
flock -u "$lock"
if [[ $# -ge 1 ]]; then
  site() { "$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
  site "$venv" >"$(site "$1")/kvtier-$engine-deps.pth"
fi

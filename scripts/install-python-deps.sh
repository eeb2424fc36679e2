#!/usr/bin/env bash
# Makes .venv (ignored by git) with the pinned Python test dependencies from
# PyPI (tests/python/requirements.txt), unless it already has them. Needs
# python3 with venv (Debian: python3-venv, which install-deps.sh installs).
set -euo pipefail
cd "$(dirname "$0")/.."
requirements=tests/python/requirements.txt
stamp=.venv/.kvtier-requirements
if [[ -x .venv/bin/python ]] && [[ -f $stamp ]] && cmp -s "$requirements" "$stamp"; then
  exit 0
fi
echo "kvtier: making .venv with $(grep -v '^#' "$requirements" | tr '\n' ' ')" >&2
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r "$requirements"
cp "$requirements" "$stamp"

#!/usr/bin/env bash
# Builds and tests the Python package as a user installs it: a fresh virtual
# environment (build/python-venv), `pip install .` from this checkout (the
# build backend and nanobind come pinned from pyproject.toml), the pinned test
# dependencies, then pytest over tests/python. Needs the Debian build
# dependencies (scripts/install-deps.sh); vLLM, torch and transformers for the real-model and
# vLLM tests come from scripts/install-model-deps.sh (once per machine). The ZMQ wire test also runs the CLI
# (KVTIER_BIN, default build/release/kvtier) and skips its script comparison
# when it is absent. Then the SGLang tests, in a second fresh environment
# (build/sglang-venv: pytest, SGLang's own environment through a .pth file, the
# same wheel): SGLang pins another torch.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
venv=build/python-venv
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r tests/python/requirements.txt
# vLLM, torch and transformers for the real-model and vLLM tests: installed once per machine, seen through a .pth file.
bash scripts/install-model-deps.sh "$venv"
# The first build compiles the library (minutes); its log is kept, and shown on failure.
# `pip install .` in two steps: the wheel it would build (kept, so that SGLang's environment
# below installs the same one instead of building it again), then that wheel.
log=build/python-install.log
wheels=build/python-wheel
rm -rf "$wheels"
echo "kvtier: pip install . (log: $log)" >&2
if ! { "$venv/bin/python" -m pip wheel --verbose --disable-pip-version-check --no-deps --wheel-dir "$wheels" . &&
  "$venv/bin/python" -m pip install --disable-pip-version-check "$wheels"/kvtier-*.whl; } >"$log" 2>&1; then
  tail -n 60 "$log" >&2
  echo "kvtier: pip install . failed" >&2
  exit 1
fi
grep -E "^ *-- kvtier:" "$log" | sed "s/^ *//" >&2 || true
# Run from outside the source tree so `import kvtier` is the installed package.
cd tests/python
# The real-model and vLLM tests run here, never skip: their dependencies were installed above.
# The SGLang tests need SGLang's environment: they run below.
KVTIER_REQUIRE_MODEL_TESTS=1 KVTIER_REQUIRE_VLLM_TESTS=1 KVTIER_BIN="${KVTIER_BIN:-$root/build/release/kvtier}" "$root/$venv/bin/python" -m pytest -q -p no:cacheprovider -c "$root/pyproject.toml" --rootdir . . --ignore-glob='test_sglang_*.py'

cd "$root"
sglang_venv=build/sglang-venv
rm -rf "$sglang_venv"
python3 -m venv "$sglang_venv"
"$sglang_venv/bin/python" -m pip install --quiet --disable-pip-version-check "$(grep '^pytest==' tests/python/requirements.txt)"
bash scripts/install-model-deps.sh --engine sglang "$sglang_venv"
if ! "$sglang_venv/bin/python" -m pip install --disable-pip-version-check "$wheels"/kvtier-*.whl >>"$log" 2>&1; then
  tail -n 60 "$log" >&2
  echo "kvtier: installing kvtier in SGLang's environment failed" >&2
  exit 1
fi
cd tests/python
# The SGLang tests run here, never skip: SGLang was installed above.
KVTIER_REQUIRE_SGLANG_TESTS=1 "$root/$sglang_venv/bin/python" -m pytest -q -p no:cacheprovider -c "$root/pyproject.toml" --rootdir . test_sglang_*.py

"""A clone stands alone (issue 48): no tracked file names a path outside the
repository — the shipped trace, the specs, every default and doc live in it.
scripts/check-self-contained.py is the check; it runs on this repository, and
on a small repository made here it must name each path that reaches out (the
paths are built from parts so this file never holds one itself)."""
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CHECK = os.path.join(ROOT, "scripts", "check-self-contained.py")
UP = os.pardir + "/"


def check(repo):
    return subprocess.run([sys.executable, CHECK, repo], capture_output=True, text=True, timeout=120)


def test_no_tracked_file_reaches_outside_the_repository():
    if not os.path.isdir(os.path.join(ROOT, ".git")):
        return  # an installed copy without the repository: nothing tracked to read
    run = check(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_shipped_trace_is_in_the_repository():
    trace = os.path.join(ROOT, "data", "traces", "mooncake_synthetic_trace.jsonl")
    with open(trace, encoding="utf-8") as f:
        assert sum(1 for _ in f) == 3993


def make_repo(tmp_path, files):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    subprocess.run(["git", "-C", str(tmp_path), "add", "-A"], check=True)
    return str(tmp_path)


def test_paths_out_of_the_repository_are_named(tmp_path):
    sibling = UP + "shared/traces/mooncake_synthetic_trace.jsonl"
    machine = "/" + "work/main/data/trace.jsonl"
    repo = make_repo(
        tmp_path,
        {
            "docs/run.md": f"kvtier replay --trace {sibling}\n",
            "tests/CMakeLists.txt": "set(T \"${PROJECT_SOURCE_DIR}/" + UP + "x.jsonl\")\n",
            "scripts/run.sh": f"cat {machine}\n",
            "src/deep/a.cpp": '#include "' + UP + UP + UP + UP + 'outside.hpp"\n',
        },
    )
    run = check(repo)
    assert run.returncode == 1
    for where in ("docs/run.md:1", "tests/CMakeLists.txt:1", "scripts/run.sh:1", "src/deep/a.cpp:1"):
        assert where in run.stdout, run.stdout


def test_paths_that_stay_inside_pass(tmp_path):
    repo = make_repo(
        tmp_path,
        {
            "src/core/x.hpp": "// x\n",
            "src/g1/a.cpp": '#include "' + UP + 'core/x.hpp"\n',
            "docs/a.md": "see [the readme](" + UP + "README.md) and /var/tmp/kvtier-g3\n",
            "README.md": "hello\n",
            "scripts/s.sh": 'cd "$(dirname "$0")/' + UP + '" && cat README.md\n',
        },
    )
    run = check(repo)
    assert run.returncode == 0, run.stdout + run.stderr

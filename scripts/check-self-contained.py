#!/usr/bin/env python3
"""Fails when a tracked file reaches outside the repository.

A person who clones kvtier has the repository and nothing beside it: a test, a
script, a doc or a default that names a path out of it (a relative path that
climbs past the root, or an absolute path of a developer's machine) works on
the machine it was written on and fails on theirs. This check reads every
tracked text file and prints each such path with its file and line.

A relative path is resolved from the file's folder and from the repository
root (commands in docs and scripts run from the root); it is fine when it names
something in the repository from either, and reaches out when it names nothing
there and climbs past the root from one of them. `${PROJECT_SOURCE_DIR}`-style prefixes resolve from the root,
`${CMAKE_CURRENT_SOURCE_DIR}` from the file's folder.

Usage: check-self-contained.py [REPO]   (default: the repository holding this script)
Exit 0: nothing reaches out. Exit 1: the paths printed do.
"""
import os
import re
import subprocess
import sys

# Folders of a developer's or CI's machine that no clone has.
MACHINE_PATH = re.compile(r"(?<![\w.~$/-])/(?:work|home|Users|old_root|root)/[\w.+-]+")
# A path with a parent step in it, with whatever prefix it has (a variable, a folder).
RELATIVE_PATH = re.compile(r"[\w${}()@.+/-]*\.\./[\w${}().+/-]*")
ROOT_PREFIXES = ("${PROJECT_SOURCE_DIR}", "${CMAKE_SOURCE_DIR}", "$root", "${root}", "$ROOT", "${ROOT}")
FILE_DIR_PREFIXES = ("${CMAKE_CURRENT_SOURCE_DIR}", "${CMAKE_CURRENT_LIST_DIR}", "$(dirname \"$0\")", "$(dirname $0)")


def tracked_files(repo):
    try:
        out = subprocess.run(["git", "-C", repo, "ls-files", "-z"], check=True, capture_output=True).stdout
        return [f for f in out.decode().split("\0") if f]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: every file below it
        files = []
        for folder, dirs, names in os.walk(repo):
            dirs[:] = [d for d in dirs if d not in (".git", "build")]
            files += [os.path.relpath(os.path.join(folder, n), repo) for n in names]
        return files


def resolve(base, path):
    """`path` taken from the repository-relative folder `base`: None when it leaves the repository."""
    resolved = os.path.normpath(os.path.join(base, path))
    return None if resolved == ".." or resolved.startswith("../") or os.path.isabs(resolved) else resolved


def reaches_out(repo, token, file_dir):
    """True when the relative path `token` leaves the repository: it names nothing inside from the
    file's folder or the root, and leaves the repository from one of them."""
    for prefix in ROOT_PREFIXES:
        if token.startswith(prefix + "/"):
            return resolve(".", token[len(prefix) + 1 :]) is None
    for prefix in FILE_DIR_PREFIXES:
        if token.startswith(prefix + "/"):
            return resolve(file_dir, token[len(prefix) + 1 :]) is None
    if token.startswith("$"):  # another variable ($PWD, $HOME): read from either folder below
        token = token.split("/", 1)[1] if "/" in token else ""
    inside = [resolve(base, token) for base in (file_dir, ".")]
    if any(p is not None and os.path.exists(os.path.join(repo, p)) for p in inside):
        return False
    return None in inside


def problems_in(repo, name):
    try:
        with open(os.path.join(repo, name), "rb") as f:
            data = f.read()
    except OSError:
        return []  # a link to nowhere, a deleted file: nothing a clone reads
    if b"\0" in data[:8192]:
        return []  # binary
    found = []
    file_dir = os.path.dirname(name) or "."
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if "/" not in line:
            continue
        for match in MACHINE_PATH.finditer(line):
            found.append(f"{name}:{number}: an absolute path of a machine: {match.group(0)}")
        for match in RELATIVE_PATH.finditer(line) if "../" in line else ():
            token = match.group(0)
            if reaches_out(repo, token, file_dir):
                found.append(f"{name}:{number}: a path out of the repository: {token}")
    return found


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    repo = os.path.abspath(repo)
    problems = [p for name in tracked_files(repo) for p in problems_in(repo, name)]
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} paths reach outside the repository: a clone has nothing there", file=sys.stderr)
        return 1
    print("self-contained: no tracked file reaches outside the repository")
    return 0


if __name__ == "__main__":
    sys.exit(main())

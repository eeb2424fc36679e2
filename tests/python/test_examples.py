"""The scheduler loop docs/python.md shows runs and serves every request."""
import os
import re
import subprocess
import sys

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python_scheduler.py")


def test_the_documented_scheduler_loop_finishes_every_request():
    out = subprocess.run([sys.executable, EXAMPLE], capture_output=True, text=True, check=True).stdout
    finished, cached, preemptions = map(int, re.search(r"finished (\d+), prompt tokens from cache (\d+), "
                                                       r"preemptions (\d+)", out).groups())
    assert finished == 24
    assert cached >= 23 * 64, "every request after the first reuses the shared system prompt"
    assert preemptions > 0, "48 pages cannot hold every request's growth: the loop must have preempted"
    assert "'active': 0" in out

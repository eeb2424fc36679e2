"""Fixtures the Python tests share."""
import os
import pathlib
import shutil
import subprocess

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "redis-cluster.sh"


class RedisNode:
    """One redis-server on 127.0.0.1 started by scripts/redis-cluster.sh (a
    temporary directory, stopped by PID): its URL, redis-cli and signals."""

    def __init__(self, directory, port):
        self.port = str(port)
        self.env = dict(os.environ, KVTIER_REDIS_DIR=str(directory))
        self.pid_file = pathlib.Path(directory) / f"{port}.pid"
        self.url = subprocess.run(["bash", str(SCRIPT), "start", "1", self.port], env=self.env, check=True,
                                  capture_output=True, text=True).stdout.strip()

    def cli(self, *args):
        return subprocess.run(["redis-cli", "-p", self.port, *args], check=True, capture_output=True,
                              text=True).stdout.strip()

    def signal(self, name):
        subprocess.run(["kill", f"-{name}", self.pid_file.read_text().strip()], check=True)

    def stop(self):
        subprocess.run(["bash", str(SCRIPT), "stop", "1", self.port], env=self.env, check=True)


def _start(tmp_path_factory, offset):
    if shutil.which("redis-server") is None:
        pytest.skip("no redis-server")
    return RedisNode(tmp_path_factory.mktemp("redis"), 14000 + os.getpid() % 1000 * 4 + offset)


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    """One redis-server on 127.0.0.1 for the module; skipped without one."""
    node = _start(tmp_path_factory, 0)
    yield node.url
    node.stop()


@pytest.fixture(scope="module")
def redis_node(tmp_path_factory):
    """One redis-server on 127.0.0.1 for the module, with redis-cli and signals; skipped without one."""
    node = _start(tmp_path_factory, 1)
    yield node
    node.signal("CONT")  # a test that stopped it must not keep the stop from ending it
    node.stop()

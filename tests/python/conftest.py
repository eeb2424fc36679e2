"""Fixtures the Python tests share."""
import os
import pathlib
import shutil
import subprocess

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "redis-cluster.sh"


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    """One redis-server on 127.0.0.1 for the module (scripts/redis-cluster.sh: a
    temporary directory, stopped by PID when the module ends); skipped without one."""
    if shutil.which("redis-server") is None:
        pytest.skip("no redis-server")
    port = str(14000 + os.getpid() % 1000 * 4)
    env = dict(os.environ, KVTIER_REDIS_DIR=str(tmp_path_factory.mktemp("redis")))
    url = subprocess.run(["bash", str(SCRIPT), "start", "1", port], env=env, check=True, capture_output=True,
                         text=True).stdout.strip()
    yield url
    subprocess.run(["bash", str(SCRIPT), "stop", "1", port], env=env, check=True)
